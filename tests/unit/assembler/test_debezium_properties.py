"""Property: any interleaving of Debezium's topics, any split into calls, yields every
transaction whole, once, in commit (END) order, whatever arrives first."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembler.debezium import DebeziumAssembler
from assembler.output import KIND_ROW
from assembler.records import SourceRecord
from tests.unit.assembler.dbz_builders import TXN_TOPIC, Source
from tests.unit.assembler.dbz_builders import settings as dbz_settings

pytestmark = pytest.mark.unit

TABLES = ("orders", "order_items", "payments")


#: Both properties draw a stream and cut it into calls: large examples, slow ones.
STREAMS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.large_base_example, HealthCheck.too_slow],
)


def _write_txn(
    src: Source, topics: dict[str, list[SourceRecord]], xid: int, tables: list[str], lsn: int
) -> tuple[int, list[tuple[str, int]]]:
    """Transaction ``xid``: its BEGIN, one insert per table (ids from ``lsn`` on), its END.

    Returns the last LSN used and the (table, id) rows in commit order.
    """
    topics.setdefault(TXN_TOPIC, []).append(src.begin(xid, lsn))
    counts: dict[str, int] = {}
    rows: list[tuple[str, int]] = []
    for order, table in enumerate(tables, start=1):
        lsn += 1
        topic = f"shop.public.{table}"
        rec = src.change(topic, "c", {"id": lsn, "txn": xid}, xid, order, lsn)
        topics.setdefault(topic, []).append(rec)
        counts[table] = counts.get(table, 0) + 1
        rows.append((table, lsn))
    lsn += 1
    topics[TXN_TOPIC].append(src.end(xid, lsn, counts))
    return lsn, rows


@st.composite
def workloads(draw: Any) -> tuple[dict[str, list[SourceRecord]], list[list[tuple[str, int]]]]:
    """Per-topic record lists as Debezium writes them, and each transaction's rows."""
    src = Source()
    topics: dict[str, list[SourceRecord]] = {}
    expected: list[list[tuple[str, int]]] = []
    n_txns = draw(st.integers(1, 6))
    lsn = 1000
    for t in range(n_txns):
        xid = 500 + t
        tables = draw(st.lists(st.sampled_from(TABLES), min_size=1, max_size=5))
        lsn, rows = _write_txn(src, topics, xid, tables, lsn)
        expected.append(rows)
    # Snapshot-free, heartbeat-free stream; a heartbeat topic adds noise.
    topics["__debezium-heartbeat.shop"] = [src.record("__debezium-heartbeat.shop", {"ts_ms": 1})]
    return topics, expected


@STREAMS
@given(data=st.data(), work=workloads())
def test_any_interleaving_emits_whole_transactions_in_commit_order(
    data: st.DataObject,
    work: tuple[dict[str, list[SourceRecord]], list[list[tuple[str, int]]]],
) -> None:
    topics, expected = work
    asm = DebeziumAssembler(dbz_settings())
    cursors = dict.fromkeys(topics, 0)
    state = None
    emitted: list[list[Any]] = []
    previous: list[SourceRecord] = []
    while any(cursors[t] < len(topics[t]) for t in topics):
        call = _next_call(data, topics, cursors)
        if data.draw(st.booleans()):
            call += previous  # a replayed batch's records: skipped by offset
        call = data.draw(st.permutations(call))
        step = asm.process(state, call, 0)
        assert all(o.kind == KIND_ROW for o in step.outputs), step.outputs
        by_txn: dict[int | None, list[Any]] = {}
        for o in step.outputs:
            by_txn.setdefault(o.txn_seq, []).append(o)
        emitted += [by_txn[k] for k in sorted(by_txn, key=lambda k: k or 0)]
        state = pickle.loads(pickle.dumps(step.state)) if data.draw(st.booleans()) else step.state
        previous = call
    got = [[(o.table, json.loads(o.row)["id"]) for o in txn] for txn in emitted]
    assert got == expected
    assert [txn[0].txn_seq for txn in emitted] == list(range(1, len(expected) + 1))
    for txn in emitted:
        assert [o.row_seq for o in txn] == list(range(len(txn)))
        assert [o.is_txn_end for o in txn] == [False] * (len(txn) - 1) + [True]
    # Everything again (a full replay): nothing new.
    everything = [r for recs in topics.values() for r in recs]
    assert asm.process(state, everything, 0).outputs == []


@st.composite
def with_incremental_snapshots(
    draw: Any,
) -> tuple[dict[str, list[SourceRecord]], dict[int, set[str]], dict[int, tuple[str, int]]]:
    """Transactions with incremental snapshot rows between them in the data topics.

    Returns the per-topic records, each transaction's topics (by xid) and each snapshot row's
    topic and the number of transactions written before it (by its id).
    """
    src = Source()
    topics: dict[str, list[SourceRecord]] = {TXN_TOPIC: []}
    touched: dict[int, set[str]] = {}
    snaps: dict[int, tuple[str, int]] = {}
    lsn = 1000
    for t in range(draw(st.integers(1, 5))):
        xid = 500 + t
        tables = draw(st.lists(st.sampled_from(TABLES), min_size=1, max_size=4))
        lsn, _rows = _write_txn(src, topics, xid, tables, lsn)
        touched[xid] = {f"shop.public.{t}" for t in tables}
        for table in draw(st.lists(st.sampled_from(TABLES), max_size=2)):
            lsn += 1
            topic = f"shop.public.{table}"
            topics.setdefault(topic, []).append(src.change(topic, "r", {"id": lsn}, None))
            snaps[lsn] = (topic, t + 1)
    return topics, touched, snaps


@STREAMS
@given(data=st.data(), work=with_incremental_snapshots())
def test_incremental_snapshot_rows_land_between_the_transactions_around_them(
    data: st.DataObject,
    work: tuple[dict[str, list[SourceRecord]], dict[int, set[str]], dict[int, tuple[str, int]]],
) -> None:
    topics, touched, snaps = work
    asm = DebeziumAssembler(dbz_settings())
    cursors = dict.fromkeys(topics, 0)
    state = None
    seen: list[tuple[int | None, str, int]] = []  # (txn_seq, txn id or "snapshot", row id)
    while any(cursors[t] < len(topics[t]) for t in topics):
        call = _next_call(data, topics, cursors)
        step = asm.process(state, data.draw(st.permutations(call)), 0)
        assert all(o.kind == KIND_ROW for o in step.outputs), step.outputs
        seen += [(o.txn_seq, o.txn_id or "", json.loads(o.row or "{}")["id"]) for o in step.outputs]
        state = pickle.loads(pickle.dumps(step.state)) if data.draw(st.booleans()) else step.state
    assert [s for s, _, _ in seen] == sorted(s for s, _, _ in seen)  # emission order = txn_seq
    place = {}  # xid -> txn_seq
    for seq, txn, _ in seen:
        if not txn.startswith("snapshot:"):
            place[int(txn)] = seq
    assert sorted(place) == sorted(touched)
    got = {row: seq for seq, txn, row in seen if txn.startswith("snapshot:")}
    assert sorted(got) == sorted(snaps)
    for row, (topic, before) in snaps.items():
        for xid, topics_of in touched.items():
            if topic in topics_of:
                # After every transaction before it in its topic, before every one after it.
                assert (place[xid] < got[row]) == (xid - 500 < before), (row, xid)


def _next_call(
    data: st.DataObject, topics: dict[str, list[SourceRecord]], cursors: dict[str, int]
) -> list[SourceRecord]:
    """The next call's records: each topic advances on its own (Spark's offset ranges per
    partition), and by one record at least, so the example stays small."""
    call: list[SourceRecord] = []
    for topic, recs in topics.items():
        take = data.draw(st.integers(0, len(recs) - cursors[topic]))
        call += recs[cursors[topic] : cursors[topic] + take]
        cursors[topic] += take
    if not call:
        topic = next(t for t in topics if cursors[t] < len(topics[t]))
        call.append(topics[topic][cursors[topic]])
        cursors[topic] += 1
    return call
