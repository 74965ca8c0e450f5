"""The foreachBatch writer: dead letters to the sink table or to files, stats, replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.assembly import OUTPUT_DDL
from app.config import AppConfig, load_config
from app.pipeline import QUERY_ID_PROPERTY, BatchWriter, to_sink_rows
from app.progress import BatchStats, ProgressReporter
from demo.ddl import split_statements
from devstack.stack import DDL_FILE
from devstack.starrocks.launcher import EmulatorHandle
from sinks.base import TargetStats, collect_target_stats

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def emulator_config(emulator: EmulatorHandle, *sets: str) -> AppConfig:
    """``conf/local.yaml`` aimed at ``emulator``, with the demo's tables created there."""
    for statement in split_statements(DDL_FILE.read_text()):
        emulator.sql(statement)
    return load_config(
        ROOT / "conf" / "local.yaml",
        [
            f"starrocks.load-url={emulator.host}:{emulator.fe_port}",
            f"starrocks.jdbc-url=jdbc:mysql://{emulator.host}:{emulator.query_port}",
            f"starrocks.username={emulator.user}",
            *sets,
        ],
    )


def row(kind: str, txn: str, row_seq: int, **extra: Any) -> tuple[Any, ...]:
    base: dict[str, Any] = {
        "kind": kind,
        "topic": "cdc",
        "partition": 0,
        "txn_id": txn,
        "txn_seq": 0 if kind == "ROW" else None,
        "row_seq": row_seq,
        "database": "demo" if kind == "ROW" else None,
        "table": "orders" if kind == "ROW" else None,
        "op": "UPSERT" if kind == "ROW" else None,
        "row": '{"order_id": 1}',
        "is_txn_end": True,
        "first_offset": 10,
        "last_offset": 12,
        "source_ts_ms": 5,
        "reason": None if kind == "ROW" else "undecodable: not JSON",
    }
    base.update(extra)
    return tuple(base.values())


class Recorder(ProgressReporter):
    """Keeps every batch's stats, in the order the writer recorded them."""

    def __init__(self) -> None:
        super().__init__(enabled=False)
        self.seen: list[BatchStats] = []
        self.sink: Any = None  # set by tests that start the real sink

    def record(self, stats: BatchStats) -> None:
        self.seen.append(stats)
        super().record(stats)


class RecordingSink:
    """Keeps what it was asked to write, per batch id (as the real sink's labels do)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[dict[str, Any]]] = {}
        self.stats: dict[int, Any] = {}

    def write_batch(
        self, batch_df: Any, batch_id: int, stats: Any = None, tally: Any = None
    ) -> None:
        assert tally is None, "a sink that does not count in its load is never given a tally"
        self.batches[batch_id] = [r.asDict() for r in batch_df.collect()]
        # The writer's stats must be exactly what the sink would have aggregated itself.
        assert sorted(stats, key=repr) == sorted(collect_target_stats(batch_df), key=repr)
        self.stats[batch_id] = stats


def batch(spark: Any) -> Any:
    rows = [
        row("ROW", "good", 0),
        row("REJECT", "bad", 0),
        # A rejected transaction's records may name several tables; it is one transaction.
        row("REJECT", "bad", 1, database="demo", table="order_items", last_offset=11),
        # A second rejected transaction of the same partition.
        row("REJECT", "worse", 0, first_offset=13, last_offset=13),
    ]
    return spark.createDataFrame(rows, OUTPUT_DDL)


def test_rejects_travel_to_the_dead_letter_table_in_the_same_batch(spark: Any) -> None:
    config = load_config(ROOT / "conf" / "local.yaml")
    sink = RecordingSink()
    reporter = ProgressReporter(enabled=False)
    writer = BatchWriter(sink, config, reporter)
    writer(to_sink_rows(batch(spark), config), 3)
    assert reporter.last is not None
    assert (reporter.last.rows, reporter.last.rejected_records) == (1, 3)
    assert reporter.last.rejected_transactions == 2
    assert reporter.last.emitted == {("cdc", 0): 13}
    written = sink.batches[3]
    assert [(r["table"], r["kind"]) for r in written].count(("orders", "ROW")) == 1
    dead = [r for r in written if r["table"] == "_cdc_dead_letter"]
    assert len(dead) == 3
    entry = json.loads(dead[0]["row"])
    assert entry["reason"].startswith("undecodable")
    assert (entry["topic"], entry["kafka_partition"], entry["first_offset"]) == ("cdc", 0, 10)
    assert entry["pipeline"] == "orders-demo"
    assert sorted(json.loads(d["row"])["row_seq"] for d in dead) == [0, 0, 1]
    assert all(d["database"] == "demo" and d["op"] == "UPSERT" for d in dead)
    by_table = {t.table: t for t in sink.stats[3]}
    assert by_table["orders"] == TargetStats("cdc", 0, "demo", "orders", 1, 12, "good", "good")
    assert by_table["_cdc_dead_letter"].rows == 3
    assert by_table["_cdc_dead_letter"].last_offset == 13


def test_rejects_go_to_one_file_per_batch_and_a_replay_rewrites_it(
    spark: Any, tmp_path: Path
) -> None:
    config = load_config(
        ROOT / "conf" / "local.yaml",
        ["dead-letter.destination=file", f"dead-letter.path={tmp_path}"],
    )
    sink = RecordingSink()
    reporter = ProgressReporter(enabled=False)
    writer = BatchWriter(sink, config, reporter)
    # foreachBatch runs on Spark's batch thread, which carries the checkpoint's query id.
    spark.sparkContext.setLocalProperty(QUERY_ID_PROPERTY, "query-a")
    for _ in range(2):  # the second call is Spark replaying the batch after a crash
        writer(to_sink_rows(batch(spark), config), 7)
    # A new checkpoint numbers its batches from 0 again: its files go beside, not over.
    spark.sparkContext.setLocalProperty(QUERY_ID_PROPERTY, "query-b")
    writer(to_sink_rows(batch(spark), config), 7)
    spark.sparkContext.setLocalProperty(QUERY_ID_PROPERTY, None)
    assert sorted(p.name for p in (tmp_path / "orders-demo").iterdir()) == ["query-a", "query-b"]
    files = sorted((tmp_path / "orders-demo" / "query-a").iterdir())
    assert [f.name for f in files] == ["batch-000000000007.jsonl"]
    lines = [json.loads(x) for x in files[0].read_text().splitlines()]
    assert [(e["txn_id"], e["row_seq"], e["batch_id"]) for e in lines] == [
        ("bad", 0, 7),
        ("bad", 1, 7),
        ("worse", 0, 7),
    ]
    assert all(e["reason"] for e in lines)
    assert [r["kind"] for r in sink.batches[7]] == ["ROW"]  # only good rows reach the sink
    assert reporter.last is not None
    assert (reporter.last.rows, reporter.last.transactions, reporter.last.rejected_records) == (
        1,
        1,
        3,
    )
    assert reporter.last.rejected_transactions == 2
