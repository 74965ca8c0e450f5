"""Rows loaded by the task that assembles them: dead letters, counts and order as on the
other path (``app.pipeline.to_sink_rows`` and the sink's load job)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from app.batch_count import BatchCounter, batch_stats
from app.progress import OpenTxn
from app.task_load import LoadInTask
from assembler.output import NONE_OPEN, OutputRow, status_row

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


def dead_letter(reject: OutputRow) -> dict[str, Any]:
    loader = Loader()
    load_in_task(loader)([reject])
    ((rows, _),) = loader.calls
    return json.loads(rows[0][2])


def test_a_rejected_data_events_dead_letter_keeps_its_target_and_op() -> None:
    """Without them a dead-lettered DELETE could not be told from an upsert, nor its table."""
    reject = out("REJECT", 0, "t", 3, "order_items", op="DELETE", row='{"id":7}')
    payload = json.loads(dead_letter(reject)["payload"])
    assert payload == {
        "database": "demo",
        "table": "order_items",
        "op": "DELETE",
        "row": '{"id":7}',
    }
    # Any other record (a BEGIN, an undecodable value) is kept as it was.
    begin = out("REJECT", 0, "t", 0, None, row='{"type":"TXN_BEGIN"}')
    assert dead_letter(begin)["payload"] == '{"type":"TXN_BEGIN"}'


def test_a_payload_longer_than_its_column_is_cut_and_its_reason_says_so() -> None:
    """StarRocks' longest VARCHAR is 1,048,576 bytes: a longer value fails the whole batch."""
    huge = "é" * 600_000  # 1.2 MB in UTF-8
    letter = dead_letter(out("REJECT", 0, "t", 0, None, row=huge))
    assert len(letter["payload"].encode()) <= 1_048_576
    assert huge.startswith(letter["payload"])
    assert letter["reason"].startswith("[payload cut to 1048576 of 1200000 bytes] undecodable")
    small = dead_letter(out("REJECT", 0, "t", 0, None, row="é" * 10))
    assert small["reason"] == "undecodable: not JSON"


def test_status_rows_are_counted_as_the_other_path_counts_them_and_never_loaded() -> None:
    loader = Loader()
    status = [status_row("cdc", 0, "a", 10, 5), status_row("cdc", 1, None, NONE_OPEN, None)]
    load_in_task(loader)(OUTPUTS, status)
    ((rows, tally),) = loader.calls
    assert len(rows) == len(OUTPUTS)
    counter = BatchCounter(dead_letters_to_sink=True, source_times=True)
    spark_path = counter(
        pa.RecordBatch.from_pylist(
            [{name: getattr(s, name) for name in BatchCounter.columns} for s in status]
        )
    )
    assert [t for t in tally if t["kind"] == "STATUS"] == spark_path
    stats, targets = batch_stats(tally, 3, dead_letters_to_sink=True)
    assert stats.status == {("cdc", 0): OpenTxn(10, 5), ("cdc", 1): None}
    assert {t.table for t in targets} == {"orders", "order_items", "_cdc_dead_letter"}
