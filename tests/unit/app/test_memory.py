"""max-txn-bytes against the heap that holds open transactions (review finding 11)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.config import load_config
from app.main import fit_txn_bytes
from app.memory import ExecutorHeap, executor_heap, parse_jvm_memory, txn_bytes_budget
from tests.unit.app.test_config import BASE

pytestmark = pytest.mark.unit


def test_jvm_memory_sizes_as_spark_reads_them() -> None:
    assert parse_jvm_memory("1g") == 2**30
    assert parse_jvm_memory("512m") == 512 * 2**20
    assert parse_jvm_memory("2048k") == 2 * 2**20
    assert parse_jvm_memory("1073741824") == 2**30
    with pytest.raises(ValueError, match="JVM memory"):
        parse_jvm_memory("lots")


def test_local_mode_uses_the_driver_heap_and_clusters_the_executors() -> None:
    assert executor_heap("local[2]", {})[:3] == (2**30, 1, "spark.driver.memory")
    assert executor_heap("local[2]", {"spark.driver.memory": "4g"})[0] == 4 * 2**30
    heap, executors, key, _ = executor_heap(
        "spark://m:7077", {"spark.executor.memory": "8g", "spark.executor.instances": "4"}
    )
    assert (heap, executors, key) == (8 * 2**30, 4, "spark.executor.memory")


MIB = 2**20


@pytest.mark.parametrize(
    ("master", "key", "heap"),
    [
        # The spark.executor.memory entry (bytesConf(MiB)) sizes YARN's and Kubernetes'
        # executors: -Xmx4096m.
        ("yarn", "spark.executor.memory", 4096 * MIB),
        ("k8s://https://api:6443", "spark.executor.memory", 4096 * MIB),
        # Standalone and local-cluster executors: SparkContext.executorMemoryInMb, i.e.
        # Utils.memoryStringToMb, bytes rounded down to MiB.
        ("spark://m:7077", "spark.executor.memory", 0),
        ("local-cluster[2,1,1024]", "spark.executor.memory", 0),
        # Local mode: the driver's -Xmx4096, bytes.
        ("local[2]", "spark.driver.memory", 4096),
    ],
)
def test_a_bare_number_is_read_in_the_unit_spark_gives_it(master: str, key: str, heap: int) -> None:
    conf = {"spark.executor.memory": "4096", "spark.driver.memory": "4096"}
    found = executor_heap(master, conf)
    assert (found.key, found.value, found.size) == (key, "4096", heap)
    # Suffixed sizes mean the same everywhere; executors get whole MiB.
    assert executor_heap(master, {key: "4g"}).size == 4 * 2**30
    assert executor_heap(master, {key: "1536k"}).size == (
        1536 * 1024 if key.endswith("driver.memory") else MIB
    )


def test_local_cluster_has_its_workers_executors_of_executor_memory() -> None:
    # local-cluster[N, cores, MiB]: N worker JVMs, each starting an executor of
    # spark.executor.memory (default 1g; Spark refuses one larger than the worker's MiB).
    # The driver's heap holds no state there.
    conf = {"spark.driver.memory": "8g"}
    assert executor_heap("local-cluster[2,1,1024]", conf)[:3] == (
        2**30,
        2,
        "spark.executor.memory",
    )
    conf["spark.executor.memory"] = "512m"
    assert executor_heap("local-cluster[ 3 , 2 , 2048 ]", conf)[:2] == (512 * MIB, 3)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "conf.yaml"
    path.write_text(BASE)
    return path


def test_a_budget_too_small_for_any_transaction_is_a_warning_naming_the_setting(
    config_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # 4 MiB of executor heap (e.g. "4194304" where Spark read bytes) over 8 partitions.
    heap = ExecutorHeap(4 * MIB, 1, "spark.executor.memory", "4194304")
    with caplog.at_level(logging.INFO, logger="app"):
        fitted = fit_txn_bytes(load_config(config_file), 8, heap)
    assert fitted.assembler.max_txn_bytes < 2**20
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "spark.executor.memory='4194304' (4 MiB)" in record.getMessage()
    # A budget that holds a real transaction is only news (INFO).
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="app"):
        fit_txn_bytes(load_config(config_file), 8, heap._replace(size=2**30, value="1g"))
    assert [r.levelno for r in caplog.records] == [logging.INFO]


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
