"""A batch counted by its own load job (multi-table mode, ``write_batch(tally=...)``).

One Spark job loads and counts the batch; the targets it finds are checked before the commit,
and a batch with nothing to load rolls its begun label back. Emulator, real local Spark.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from sinks.base import TargetStats, collect_target_stats, merge_target_stats
from sinks.exceptions import SinkTerminalError

from .conftest import DB, batch, make_sink, order_txn, table_rows

pytestmark = pytest.mark.integration

QID = "eeeeeeee-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class RowTally:
    """The least a tally carries: the sink's target keys and ``_ts_`` columns, one per row."""

    columns: ClassVar[tuple[str, ...]] = (
        "topic",
        "partition",
        "database",
        "table",
        "txn_id",
        "last_offset",
    )

    def __call__(self, batch: Any) -> list[dict[str, Any]]:
        return [
            {
                "topic": r["topic"],
                "partition": r["partition"],
                "database": r["database"],
                "table": r["table"],
                "_ts_rows": 1,
                "_ts_last_offset": r["last_offset"],
                "_ts_last_txn_id": r["txn_id"],
                "_ts_sample_txn_id": r["txn_id"],
            }
            for r in batch.to_pylist()
        ]


def jobs_of(spark: Any, run: Any) -> tuple[Any, int]:
    """``run()``'s result and the number of Spark jobs it ran."""
    sc = spark.sparkContext
    group = f"counted-{uuid.uuid4()}"  # not id(run): CPython reuses the ids of freed objects
    sc.setJobGroup(group, "test")
    # A streaming query runs its micro-batches without adaptive execution, which would
    # otherwise submit each shuffle's map stage as a job of its own.
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        result = run()
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
        sc.setLocalProperty("spark.jobGroup.id", None)
    return result, len(sc.statusTracker().getJobIdsForGroup(group))


def opened(sr: Any, **overrides: Any) -> Any:
    sink = make_sink(sr, query_id=QID, **overrides)
    sink.open()
    return sink


def rows() -> list[dict[str, Any]]:
    return order_txn(1, offset=10) + order_txn(2, items=3, partition=1, offset=20)


def test_one_job_loads_counts_and_commits_the_batch(sr, spark):
    sink = opened(sr)
    df = batch(spark, rows())
    expected = sorted(collect_target_stats(df), key=repr)
    result, jobs = jobs_of(spark, lambda: sink.write_batch(df, 0, tally=RowTally()))
    assert jobs == 1
    assert result.outcome == "committed"
    assert dict(result.rows_per_table) == {"orders": 2, "order_items": 5}
    assert result.source_partitions == 2
    assert len(result.tally_rows) == 7
    counted = merge_target_stats(TargetStats.from_row(r) for r in result.tally_rows)
    assert sorted(counted, key=repr) == expected
    assert table_rows(sr, "orders") == [(1, 2, 32, 1), (2, 3, 63, 1)]
    progress = sr.sql(
        f"SELECT kafka_partition, last_offset, last_txn_id, label FROM {DB}._cdc_progress "
        "ORDER BY kafka_partition"
    )
    assert progress == [(0, 14, "tx-1-1", result.label), (1, 25, "tx-2-1", result.label)]
    assert sr.control.labels(DB) == {result.label: "VISIBLE"}


def test_a_replay_loads_nothing_and_reads_the_batch_through(sr, spark):
    first = opened(sr).write_batch(batch(spark, rows()), 4, tally=RowTally())
    again = make_sink(sr, query_id=QID)
    result, jobs = jobs_of(
        spark, lambda: again.write_batch(batch(spark, rows()), 4, tally=RowTally())
    )
    # One job, not the load's: Spark's state stores commit only for a batch that was read.
    assert (result.outcome, jobs, result.load_requests) == ("already_applied", 1, 0)
    assert len(table_rows(sr, "order_items")) == 5
    assert sr.control.labels(DB) == {first.label: "VISIBLE"}


def test_a_batch_with_nothing_to_load_rolls_its_label_back(sr, spark):
    sink = opened(sr)
    result = sink.write_batch(batch(spark, []), 0, tally=RowTally())
    assert result.outcome == "empty"
    assert result.tally_rows == ()
    assert set(sr.control.labels(DB).values()) <= {"ABORTED"}
    assert sr.sql(f"SELECT * FROM {DB}._cdc_progress") == []


def test_a_failed_load_is_redone_and_counted_once(sr, spark):
    sink = opened(sr)
    sr.control.fail_next("load", 1, http_status=500, status="INTERNAL_ERROR", message="be crashed")
    result = sink.write_batch(batch(spark, rows()), 0, tally=RowTally())
    assert (result.outcome, result.attempt) == ("committed", 1)
    assert len(result.tally_rows) == 7
    assert sr.control.labels(DB) == {f"t-{QID}-0-0": "ABORTED", f"t-{QID}-0-1": "VISIBLE"}
    assert len(table_rows(sr, "order_items")) == 5


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({"table": "customers"}, "rows target table shop.customers"),
        ({"database": "other"}, "rows target database 'other'"),
    ],
)
def test_a_bad_target_found_by_the_load_is_rolled_back_before_commit(sr, spark, where, message):
    sink = opened(sr)
    stray = order_txn(3, partition=1, offset=40)
    stray[0].update(where)
    with pytest.raises(SinkTerminalError, match=message) as info:
        sink.write_batch(batch(spark, rows() + stray), 0, tally=RowTally())
    assert "topic=cdc partition=1 txn_id=tx-3-1" in str(info.value)
    assert table_rows(sr, "orders") == []
    assert set(sr.control.labels(DB).values()) == {"ABORTED"}


def test_per_table_mode_refuses_a_tally(sr, spark):
    sink = make_sink(sr, query_id=QID, **{"sink.transaction.multi-table.enabled": "false"})
    assert not sink.counts_in_load
    with pytest.raises(ValueError, match="multi-table mode"):
        sink.write_batch(batch(spark, rows()), 0, tally=RowTally())
