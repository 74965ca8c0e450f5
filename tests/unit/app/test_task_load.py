"""Rows loaded by the task that assembles them: dead letters, counts and order as on the
other path (``app.pipeline.to_sink_rows`` and the sink's load job)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from app.batch_count import BatchCounter
from app.task_load import LoadInTask
from assembler.output import OutputRow

pytestmark = pytest.mark.unit


def out(
    kind: str, partition: int, txn: str, seq: int, table: str | None, **extra: Any
) -> OutputRow:
    fields: dict[str, Any] = {
        "kind": kind,
        "topic": "cdc",
        "partition": partition,
        "txn_id": txn,
        "txn_seq": 1 if kind == "ROW" else None,
        "row_seq": seq,
        "database": "demo" if table else None,
        "table": table,
        "op": "UPSERT" if table else None,
        "row": f'{{"id":{seq}}}',
        "is_txn_end": False,
        "first_offset": 10,
        "last_offset": 12,
        "source_ts_ms": 5,
        "reason": None if kind == "ROW" else "undecodable: not JSON",
    }
    fields.update(extra)
    return OutputRow(**fields)


OUTPUTS = [
    out("ROW", 0, "a", 0, "orders"),
    out("ROW", 0, "a", 1, "order_items"),
    out("ROW", 0, "a", 2, "order_items", is_txn_end=True),
    out("REJECT", 1, "x" * 300, 0, None, row=None, source_ts_ms=None, reason="é" * 600),
    out("ROW", 1, "b", 0, "orders"),
    out("ROW", 1, "b", 1, "order_items", is_txn_end=True),
]


class Loader:
    def __init__(self) -> None:
        self.calls: list[tuple[list[tuple[Any, ...]], list[dict[str, Any]]]] = []

    def __call__(
        self, rows: list[tuple[Any, ...]], tally: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        self.calls.append((rows, tally))
        return [{"table": "", "tally": "[]"}]


def load_in_task(loader: Loader) -> LoadInTask:
    counter = BatchCounter(dead_letters_to_sink=True, source_times=True)
    return LoadInTask(loader, counter, "pipe", "demo", "_cdc_dead_letter")


def test_rows_go_by_table_each_partition_in_its_own_order() -> None:
    loader = Loader()
    assert load_in_task(loader)(OUTPUTS) == [{"table": "", "tally": "[]"}]
    ((rows, _),) = loader.calls
    assert [(r[0], r[4], r[2]) for r in rows] == [
        ("_cdc_dead_letter", 1, rows[0][2]),
        ("order_items", 0, '{"id":1}'),
        ("order_items", 0, '{"id":2}'),
        ("order_items", 1, '{"id":1}'),
        ("orders", 0, '{"id":0}'),
        ("orders", 1, '{"id":0}'),
    ]
    assert {r[1] for r in rows} == {"UPSERT"}


def test_a_reject_becomes_the_dead_letter_row_spark_would_build() -> None:
    loader = Loader()
    load_in_task(loader)(OUTPUTS)
    dead = json.loads(loader.calls[0][0][0][2])
    # to_json leaves nulls out: no payload, no source_ts_ms here.
    assert list(dead) == [
        "topic",
        "kafka_partition",
        "first_offset",
        "row_seq",
        "pipeline",
        "txn_id",
        "last_offset",
        "reason",
    ]
    assert (dead["topic"], dead["kafka_partition"], dead["pipeline"]) == ("cdc", 1, "pipe")
    assert dead["txn_id"] == "x" * 252  # cut as Spark cuts it: 3 bytes spare
    assert len(dead["reason"].encode()) <= 1024
    assert dead["reason"].startswith("éé")


def test_the_counts_are_those_of_the_sink_rows() -> None:
    """The same counts as BatchCounter over the rows the other path's load job reads."""
    loader = Loader()
    load_in_task(loader)(OUTPUTS)
    counter = BatchCounter(dead_letters_to_sink=True, source_times=True)
    table = {"REJECT": "_cdc_dead_letter"}
    expected = counter(
        pa.RecordBatch.from_pylist(
            [
                {
                    "topic": o.topic,
                    "partition": o.partition,
                    "database": "demo",
                    "table": table.get(o.kind, o.table),
                    "kind": o.kind,
                    "is_txn_end": o.is_txn_end,
                    "first_offset": o.first_offset,
                    "last_offset": o.last_offset,
                    "txn_id": o.txn_id,
                    "reason": o.reason,
                    "source_ts_ms": o.source_ts_ms,
                }
                for o in OUTPUTS
            ]
        )
    )
    assert loader.calls[0][1] == expected
