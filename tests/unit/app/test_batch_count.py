"""The batch's counts in Python: progress-line numbers and the sink's targets, in any split."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.batch_count import _OUTPUT_COUNTED, BatchCounter, batch_stats
from assembler.output import KIND_REJECT, KIND_ROW, OutputRow
from common.native import native_module
from sinks.base import TargetStats

pytestmark = pytest.mark.unit


def row(kind: str, txn: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "topic": "cdc",
        "partition": 0,
        "database": "demo",
        "table": "orders" if kind == "ROW" else "_cdc_dead_letter",
        "kind": kind,
        "is_txn_end": True,
        "first_offset": 10,
        "last_offset": 12,
        "txn_id": txn,
        "reason": None if kind == "ROW" else "txn-timeout: no END within 60 s",
        "source_ts_ms": 5,
    }
    base.update(extra)
    return base


ROWS = [
    row("ROW", "a", is_txn_end=False, last_offset=12, source_ts_ms=1),
    row("ROW", "a", last_offset=12, source_ts_ms=1),
    row("ROW", "b", partition=1, table="order_items", last_offset=30, source_ts_ms=2),
    row("ROW", "c", first_offset=13, last_offset=15, source_ts_ms=3),
    row("REJECT", "x", first_offset=20, last_offset=20),
    row("REJECT", "x", first_offset=20, last_offset=21),
    row("REJECT", "y", first_offset=22, last_offset=22, reason="undecodable: not JSON"),
    row("REJECT", "z", partition=1, first_offset=31, last_offset=None, reason=None),
]


def counted(
    rows: list[dict[str, Any]], splits: int, *, to_sink: bool = True
) -> tuple[Any, list[TargetStats]]:
    """Count ``rows`` cut into ``splits`` Arrow batches, as tasks and batches would."""
    counter = BatchCounter(dead_letters_to_sink=to_sink, source_times=True)
    size = -(-len(rows) // splits)
    out = []
    for start in range(0, len(rows), size):
        part = [{c: r[c] for c in counter.columns} for r in rows[start : start + size]]
        out.extend(counter(pa.RecordBatch.from_pylist(part)))
    return batch_stats(out, 7, dead_letters_to_sink=to_sink)


@pytest.mark.parametrize("splits", [1, 3, len(ROWS)])
def test_counts_do_not_depend_on_how_the_batch_is_cut(splits: int) -> None:
    stats, targets = counted(ROWS, splits)
    assert (stats.batch_id, stats.rows, stats.transactions) == (7, 4, 3)
    assert (stats.rejected_records, stats.rejected_transactions) == (4, 3)
    assert stats.rejects_by_reason == {"txn-timeout": 2, "undecodable": 1, "unknown": 1}
    assert sorted(stats.source_ts_ms) == [1, 2, 3]
    assert stats.emitted == {("cdc", 0): 22, ("cdc", 1): 30}
    by_key = {(t.partition, t.table): t for t in targets}
    assert by_key[(0, "orders")] == TargetStats("cdc", 0, "demo", "orders", 3, 15, "c", "a")
    assert by_key[(1, "order_items")].rows == 1
    dead = by_key[(0, "_cdc_dead_letter")]
    assert (dead.rows, dead.last_offset, dead.last_txn_id, dead.sample_txn_id) == (3, 22, "y", "x")
    assert by_key[(1, "_cdc_dead_letter")].last_offset == -1


def test_rejects_kept_out_of_the_sink_have_no_target() -> None:
    stats, targets = counted(ROWS, 2, to_sink=False)
    assert stats.rejected_records == 4
    assert {t.table for t in targets} == {"orders", "order_items"}


def test_source_times_only_when_asked() -> None:
    counter = BatchCounter(dead_letters_to_sink=True)
    batch = pa.RecordBatch.from_pylist([{c: ROWS[1][c] for c in counter.columns}])
    stats, _ = batch_stats(counter(batch), 0, dead_letters_to_sink=True)
    assert (stats.transactions, stats.source_ts_ms) == (1, [])


# -- the native count of output rows ------------------------------------------------------------

_TXN_IDS = ["t1", "t2", "t10", "é", None]


@st.composite
def _output_rows(draw: st.DrawFn) -> list[OutputRow]:
    rows = []
    for _ in range(draw(st.integers(0, 40))):
        run = draw(st.integers(1, 4))  # rows come in runs of one transaction and table
        topic = draw(st.sampled_from(["a", "b"]))
        partition = draw(st.integers(0, 2))
        txn_id = draw(st.sampled_from(_TXN_IDS))
        table = draw(st.sampled_from(["orders", "items", "dead"]))
        last = draw(st.one_of(st.none(), st.integers(0, 2**70)))
        ts = draw(st.one_of(st.none(), st.integers(0, 9)))
        kind = draw(st.sampled_from([KIND_ROW] * 15 + [KIND_REJECT]))
        for k in range(run):
            end: Any = draw(st.sampled_from([k == run - 1, 0, 1, None]))  # truthy or not
            rows.append(
                OutputRow(
                    kind, topic, partition, txn_id, 1, k, "shop", table, "UPSERT", "{}",
                    end, 0, last, ts, None if kind == KIND_ROW else "txn-timeout: x",
                )
            )  # fmt: skip
    return rows


@settings(max_examples=300, deadline=None)
@given(_output_rows(), st.booleans())
def test_the_native_count_of_output_rows_counts_as_the_loop_does(
    rows: list[OutputRow], source_times: bool
) -> None:
    counter = BatchCounter(dead_letters_to_sink=True, source_times=source_times)
    assert counter.count_outputs(rows) == counter.count(map(_OUTPUT_COUNTED, rows))


def test_the_native_count_takes_rows_and_leaves_rejects_to_the_loop() -> None:
    count_rows = getattr(native_module(), "count_rows", None)
    assert count_rows is not None, "make setup installs the native module"
    row = OutputRow(
        KIND_ROW, "a", 0, "t", 1, 0, "shop", "orders", "UPSERT", "{}", True, 0, 5, 9, None
    )
    assert count_rows([row, row], KIND_ROW, True) == [
        ("a", 0, "shop", "orders", 2, 5, "t", "t", 2, [9, 9])
    ]
    reject = row._replace(kind=KIND_REJECT, reason="txn-timeout: x")
    assert count_rows([row, reject], KIND_ROW, True) is None
    assert count_rows([("not", "an", "output", "row")], KIND_ROW, True) is None
