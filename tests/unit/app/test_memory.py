"""max-txn-bytes against the heap that holds open transactions (review finding 11)."""

from __future__ import annotations

import pytest

from app.memory import executor_heap, parse_jvm_memory, txn_bytes_budget

pytestmark = pytest.mark.unit


def test_jvm_memory_sizes_as_spark_reads_them() -> None:
    assert parse_jvm_memory("1g") == 2**30
    assert parse_jvm_memory("512m") == 512 * 2**20
    assert parse_jvm_memory("2048k") == 2 * 2**20
    assert parse_jvm_memory("1073741824") == 2**30
    with pytest.raises(ValueError, match="JVM memory"):
        parse_jvm_memory("lots")


def test_local_mode_uses_the_driver_heap_and_clusters_the_executors() -> None:
    assert executor_heap("local[2]", {}) == (2**30, 1, "spark.driver.memory")
    assert executor_heap("local[2]", {"spark.driver.memory": "4g"})[0] == 4 * 2**30
    heap, executors, key = executor_heap(
        "spark://m:7077", {"spark.executor.memory": "8g", "spark.executor.instances": "4"}
    )
    assert (heap, executors, key) == (8 * 2**30, 4, "spark.executor.memory")


def test_the_budget_shrinks_with_the_open_groups_per_executor() -> None:
    one_gib = 2**30
    # One partition on a 1 GiB heap: half the heap over the 2.4x state overhead.
    assert txn_bytes_budget(one_gib, 1, 1) == int(one_gib * 0.5 / 2.4)
    # 16 partitions: each open transaction gets a sixteenth of that.
    assert txn_bytes_budget(one_gib, 1, 16) == int(one_gib * 0.5 / (16 * 2.4))
    # Spread over 4 executors, each holds 4 of them.
    assert txn_bytes_budget(one_gib, 4, 16) == txn_bytes_budget(one_gib, 1, 4)
    # The old 256 MiB default does not fit even one partition of a 1 GiB heap.
    assert txn_bytes_budget(one_gib, 1, 1) < 256 * 2**20
