"""The Debezium core: transactions assembled across topics, commit order, every policy."""

from __future__ import annotations

import json
import pickle
import struct
from typing import Any

import pytest

from assembler.debezium import (
    DEBEZIUM_STATE_VERSION,
    DebeziumAssembler,
    DebeziumAssemblyFailed,
    DebeziumSettings,
    DebeziumStep,
)
from assembler.exceptions import AssemblerError
from assembler.output import KIND_REJECT, KIND_ROW, OutputRow
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings, Policy, Targets, Violation
from common.errors import ConfigError
from tests.unit.assembler.dbz_builders import ITEMS, ORDERS, TXN_TOPIC, Source, settings

pytestmark = pytest.mark.unit


def run(
    asm: DebeziumAssembler, calls: list[list[SourceRecord]], now: int = 0
) -> tuple[list[OutputRow], Any]:
    state = None
    out: list[OutputRow] = []
    for records in calls:
        step = asm.process(state, records, now)
        out += step.outputs
        state = step.state
    return out, state


def order_txn(src: Source, xid: int, lsn: int, oid: int) -> list[SourceRecord]:
    """BEGIN, an order, two items, END (in the order Debezium writes them)."""
    return [
        src.begin(xid, lsn),
        src.change(ORDERS, "c", {"order_id": oid, "n": 2}, xid, 1, lsn + 1),
        src.change(ITEMS, "c", {"order_id": oid, "line": 1}, xid, 2, lsn + 2),
        src.change(ITEMS, "c", {"order_id": oid, "line": 2}, xid, 3, lsn + 3),
        src.end(xid, lsn + 4, {"orders": 1, "order_items": 2}),
    ]


def rows(out: list[OutputRow]) -> list[OutputRow]:
    return [o for o in out if o.kind == KIND_ROW]


def test_whole_transaction_in_total_order_once_end_and_counts_are_met() -> None:
    src = Source()
    asm = DebeziumAssembler(settings())
    b, o, i1, i2, e = order_txn(src, 700, 100, 1)
    # The transaction topic and the orders topic first: not complete, nothing comes out.
    out, state = run(asm, [[e, o, b]])
    assert out == []
    step = asm.process(state, [i2, i1], 0)
    got = step.outputs
    assert [(r.table, json.loads(r.row)) for r in got] == [
        ("orders", {"order_id": 1, "n": 2}),
        ("order_items", {"order_id": 1, "line": 1}),
        ("order_items", {"order_id": 1, "line": 2}),
    ]
    assert {r.kind for r in got} == {KIND_ROW}
    assert [r.txn_seq for r in got] == [1, 1, 1]
    assert [r.row_seq for r in got] == [0, 1, 2]
    assert [r.is_txn_end for r in got] == [False, False, True]
    assert {(r.database, r.op, r.txn_id, r.topic) for r in got} == {
        ("demo", "UPSERT", "700", TXN_TOPIC)
    }
    assert (got[0].first_offset, got[0].last_offset) == (b.offset, e.offset)
    assert step.timeout_at_ms is None


def test_status_says_which_partitions_hold_events_of_a_transaction_not_yet_emitted() -> None:
    src = Source()
    asm = DebeziumAssembler(settings())
    b, o, i1, i2, e = order_txn(src, 700, 100, 1)
    step = asm.process(None, [b, o, i1], 5_000)
    status = {(r.topic, r.partition): r for r in step.status}
    assert {r.kind for r in step.status} == {"STATUS"}
    # The orders and items partitions wait for the END; the transaction topic holds no event.
    assert (status[(ORDERS, 0)].first_offset, status[(ORDERS, 0)].txn_id) == (o.offset, "700")
    assert (status[(ITEMS, 0)].first_offset, status[(ITEMS, 0)].source_ts_ms) == (i1.offset, 5_000)
    assert status[(TXN_TOPIC, 0)].first_offset == -1
    # A later call that touches only the items topic still says the orders partition is open.
    step = asm.process(step.state, [i2], 6_000)
    assert {(r.topic, r.first_offset) for r in step.status} == {
        (ORDERS, o.offset),
        (ITEMS, i1.offset),
        (TXN_TOPIC, -1),
    }
    step = asm.process(step.state, [e], 7_000)
    assert len(rows(step.outputs)) == 3
    assert {(r.topic, r.first_offset) for r in step.status} == {
        (ORDERS, -1),
        (ITEMS, -1),
        (TXN_TOPIC, -1),
    }


def test_commit_order_is_end_order_even_when_a_later_transaction_completes_first() -> None:
    src = Source()
    asm = DebeziumAssembler(settings())
    # 701 changes an item only, 702 an order only; 702 is complete first.
    b1 = src.begin(701, 100)
    e1 = src.end(701, 102, {"order_items": 1})
    b2 = src.begin(702, 200)
    o2 = src.change(ORDERS, "u", {"order_id": 2}, 702, 1, 201)
    e2 = src.end(702, 202, {"orders": 1})
    i1 = src.change(ITEMS, "c", {"order_id": 1, "line": 1}, 701, 1, 101)
    out, state = run(asm, [[b1, e1, b2, o2, e2]])
    assert out == []
    step = asm.process(state, [i1], 0)
    assert [(r.txn_id, r.txn_seq) for r in step.outputs] == [("701", 1), ("702", 2)]


def test_update_delete_and_key_columns() -> None:
    src = Source()
    asm = DebeziumAssembler(settings())
    records = [
        src.begin(703, 10),
        src.change(ORDERS, "u", {"order_id": 1, "n": 3}, 703, 1, 11),
        src.change(
            ITEMS,
            "d",
            {"order_id": 1, "line": 2, "qty": None},
            703,
            2,
            12,
            key={"order_id": 1, "line": 2},
        ),
        src.end(703, 13, {"orders": 1, "order_items": 1}),
    ]
    out, _ = run(asm, [records])
    assert [(r.op, r.table, json.loads(r.row)) for r in out] == [
        ("UPSERT", "orders", {"order_id": 1, "n": 3}),
        ("DELETE", "order_items", {"order_id": 1, "line": 2}),
    ]


def test_numbers_that_do_not_fit_a_double_keep_every_digit() -> None:
    """A NUMERIC sent as a JSON number (``decimal.format=NUMERIC``), an integer beyond 64 bits."""
    src = Source()
    asm = DebeziumAssembler(settings())
    exact = '"amount":12345678901234567.123456789,"big":123456789012345678901234567890'

    def raw(op: str, image: str, order: int) -> bytes:
        record = src.change(ORDERS, op, {"x": 0}, 705, order, 20 + order).value
        assert record is not None
        field = "before" if op == "d" else "after"
        return record.replace(f'"{field}": {{"x": 0}}'.encode(), f'"{field}":{image}'.encode())

    upsert = raw("c", '{"order_id":1,' + exact + "}", 1)
    delete = raw("d", "{" + exact + ',"order_id":2}', 2)
    records = [
        src.begin(705, 19),
        src.record(ORDERS, upsert),
        src.record(ORDERS, delete, key={"order_id": 2, "big": 0}),
        src.end(705, 23, {"orders": 2}),
    ]
    out, _ = run(asm, [records])
    assert [(r.op, r.row) for r in rows(out)] == [
        ("UPSERT", '{"order_id":1,' + exact + "}"),
        ("DELETE", '{"order_id":2,"big":123456789012345678901234567890}'),
    ]


def test_table_map_and_unknown_table() -> None:
    src = Source()
    mapped = settings(
        table_map={"public.orders": ("sr", "orders_t"), "public.order_items": ("sr", "items_t")}
    )
    out, _ = run(DebeziumAssembler(mapped), [order_txn(src, 704, 10, 1)])
    assert {(r.database, r.table) for r in out} == {("sr", "orders_t"), ("sr", "items_t")}

    only_orders = settings(table_map={"public.orders": ("sr", "orders_t")})
    src = Source()
    out, _ = run(DebeziumAssembler(only_orders), [order_txn(src, 705, 10, 1)])
    assert rows(out) == []
    rejects = [r for r in out if r.kind == KIND_REJECT]
    assert len(rejects) == 4  # the order, two items, the END: the whole transaction
    assert all(r.reason.startswith("unknown-table:") for r in rejects)
    assert {r.txn_id for r in rejects} == {"705"}
    # Nothing of the rejected events is lost, and each reject is keyed by its own record
    # (topic, partition, offset): the transaction spans topics, its rows must not collide.
    assert all(r.row for r in rejects), rejects
    assert [(r.first_offset, r.last_offset) for r in rejects] == [
        (r.last_offset, r.last_offset) for r in rejects
    ]
    keys = {(r.topic, r.partition, r.first_offset, r.row_seq) for r in rejects}
    assert len(keys) == len(rejects)


def test_toast_placeholder_never_overwrites_a_value() -> None:
    src = Source()
    records = order_txn(src, 706, 10, 1)
    records[1] = src.change(
        ORDERS, "u", {"order_id": 1, "note": "__debezium_unavailable_value"}, 706, 1, 11
    )
    out, _ = run(DebeziumAssembler(settings()), [records])
    assert rows(out) == []
    assert {r.reason.split(":")[0] for r in out} == {"unavailable-value"}
    assert "REPLICA IDENTITY FULL" in out[0].reason

    failing = settings(policies={"unavailable-value": Policy.FAIL})
    with pytest.raises(DebeziumAssemblyFailed) as info:
        run(DebeziumAssembler(failing), [records])
    message = str(info.value)
    assert f"topic={ORDERS} partition=0 offset={records[1].offset} txn=706" in message
    assert pickle.loads(pickle.dumps(info.value)).offset == records[1].offset


PLACEHOLDER = "__debezium_unavailable_value"


@pytest.mark.parametrize(
    "value",
    [
        [PLACEHOLDER],  # text[]
        "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",  # bytea, base64 of the placeholder's bytes
        PLACEHOLDER.encode().hex(),  # bytea, binary.handling.mode=hex
        ["X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="],  # bytea[]
        list(PLACEHOLDER.encode()),  # integer[], bigint[]: the placeholder's byte values
        [float(b) for b in PLACEHOLDER.encode()],  # real[], double precision[]
        {PLACEHOLDER: PLACEHOLDER},  # hstore, hstore.handling.mode=map
        json.dumps({PLACEHOLDER: PLACEHOLDER}),  # hstore, hstore.handling.mode=json
        ["b68a35a7-17ad-35b3-af2a-ae46edb4545a"],  # uuid[]: Java's nameUUIDFromBytes of it
    ],
)
def test_toast_placeholder_of_every_column_type_is_rejected(value: Any) -> None:
    """Debezium's UnchangedToastedPlaceholder writes the marker in the column's own type."""
    src = Source()
    records = [
        src.begin(706, 10),
        src.change(ORDERS, "u", {"order_id": 1, "tags": value, "note": "x"}, 706, 1, 11),
        src.end(706, 12, {"orders": 1}),
    ]
    out, _ = run(DebeziumAssembler(settings()), [records])
    assert rows(out) == []
    assert {r.reason.split(":")[0] for r in out} == {"unavailable-value"}
    assert "column(s) tags of public.orders" in out[0].reason


def test_values_that_only_look_like_the_placeholder_are_applied() -> None:
    src = Source()
    near = {
        "order_id": 1,
        "note": f"about {PLACEHOLDER}",
        "tags": [PLACEHOLDER, "x"],
        "codes": list(PLACEHOLDER.encode())[:-1],
        "attrs": {PLACEHOLDER: "x"},
    }
    records = [
        src.begin(706, 10),
        src.change(ORDERS, "u", near, 706, 1, 11),
        src.end(706, 12, {"orders": 1}),
    ]
    out, _ = run(DebeziumAssembler(settings()), [records])
    assert [json.loads(r.row or "{}") for r in rows(out)] == [near]


def test_heartbeats_tombstones_schema_changes_and_messages_are_skipped() -> None:
    src = Source()
    noise = [
        src.record("__debezium-heartbeat.shop", {"ts_ms": 1}),
        src.record(ORDERS, None, {"order_id": 9}),  # tombstone
        src.record("shop", {"ddl": "ALTER TABLE ...", "source": {}}),
        src.change(ORDERS, "m", {}, 1),
    ]
    out, state = run(DebeziumAssembler(settings()), [[*noise, *order_txn(src, 707, 10, 1)]])
    assert len(rows(out)) == 3
    assert all(r.kind == KIND_ROW for r in out)
    assert DebeziumAssembler(settings()).process(state, noise, 0).outputs == []


def test_snapshot_rows_come_in_bounded_chunks_before_transactions() -> None:
    src = Source()
    snap = [src.change(ORDERS, "r", {"order_id": n}, None) for n in range(5)]
    asm = DebeziumAssembler(settings(snapshot_batch_rows=2))
    out, _ = run(asm, [[*order_txn(src, 708, 10, 9), *snap]])
    assert [(r.txn_seq, json.loads(r.row)["order_id"]) for r in out] == [
        (1, 0),
        (1, 1),
        (2, 2),
        (2, 3),
        (3, 4),
        (4, 9),
        (4, 9),
        (4, 9),
    ]
    assert [r.is_txn_end for r in out[:5]] == [False, True, False, True, True]


PAYMENTS = "shop.public.payments"


def test_an_incremental_snapshot_row_waits_for_the_transactions_before_it() -> None:
    """Incremental snapshot rows (op=r, no transaction block) come in the middle of the stream.

    Order 7 goes to v1 in 741 (with an item, late on its topic) and to v2 in 742; then a
    snapshot row of order 7 (v2) in the orders topic. Applied first, it would show 742's state
    and then 741's, a state PostgreSQL never had.
    """
    src = Source()
    b1 = src.begin(741, 101)
    o1 = src.change(ORDERS, "u", {"order_id": 7, "v": 1}, 741, 1, 101)
    i1 = src.change(ITEMS, "c", {"order_id": 7, "line": 1}, 741, 2, 102)
    e1 = src.end(741, 103, {"orders": 1, "order_items": 1})
    b2 = src.begin(742, 201)
    o2 = src.change(ORDERS, "u", {"order_id": 7, "v": 2}, 742, 1, 201)
    e2 = src.end(742, 202, {"orders": 1})
    snap = src.change(ORDERS, "r", {"order_id": 7, "v": 2}, None)
    other = src.change(PAYMENTS, "r", {"order_id": 8}, None)  # nothing before it
    nxt = order_txn(src, 743, 300, 7)
    asm = DebeziumAssembler(settings())
    first = asm.process(None, [b1, o1, e1, b2, o2, e2, snap, other], 0)
    assert [(r.txn_id, r.table) for r in first.outputs] == [
        (f"snapshot:{PAYMENTS}:0:0", "payments")
    ]
    second = asm.process(first.state, [i1, *nxt], 1_000)
    assert [(r.txn_seq, r.table, json.loads(r.row or "{}").get("v")) for r in second.outputs] == [
        (2, "orders", 1),
        (2, "order_items", None),
        (3, "orders", 2),
        (4, "orders", 2),  # the snapshot row, after 742 and before 743
        (5, "orders", None),
        (5, "order_items", None),
        (5, "order_items", None),
    ]
    # A held row is released when what it waits for is rejected too, and then only.
    asm = DebeziumAssembler(settings())
    step = asm.process(None, [b1, o1, e1, snap], 0)
    assert step.outputs == []
    assert step.timeout_at_ms == 10_000
    late = asm.expire(step.state, 10_000)
    assert [r.kind for r in late.outputs] == [KIND_REJECT, KIND_REJECT, KIND_ROW]
    assert json.loads(late.outputs[-1].row or "{}") == {"order_id": 7, "v": 2}


def test_end_without_begin_rejects_the_transaction() -> None:
    src = Source()
    _begin, *rest = order_txn(src, 709, 10, 1)
    out, _ = run(DebeziumAssembler(settings()), [rest])
    assert rows(out) == []
    assert len(out) == 4
    assert all(r.reason.startswith("no-begin:") for r in out)
    with pytest.raises(DebeziumAssemblyFailed, match=r"no-begin at topic=shop\.transaction"):
        run(
            DebeziumAssembler(
                settings(core=AssemblerSettings(policies={Violation.NO_BEGIN: Policy.FAIL}))
            ),
            [rest],
        )


def test_missing_metadata_and_undecodable_name_topic_and_offset() -> None:
    src = Source()
    orphan = src.change(ORDERS, "u", {"order_id": 1}, None)
    garbage = src.record(ITEMS, b"{not json")
    bad_marker = src.record(TXN_TOPIC, {"status": "MAYBE", "id": "1:1"})
    out, _ = run(DebeziumAssembler(settings()), [[orphan, garbage, bad_marker]])
    assert [r.reason.split(":")[0] for r in out] == [
        "undecodable",
        "missing-metadata",
        "undecodable",
    ]
    items, orders, marker = out  # data topics in name order, then the transaction topic
    assert f"topic={ITEMS} partition=0 offset={garbage.offset}" in items.reason
    assert items.row == "{not json"
    assert (orders.topic, orders.last_offset) == (ORDERS, orphan.offset)
    assert f"topic={TXN_TOPIC} partition=0 offset={bad_marker.offset}" in marker.reason


def test_counts_that_never_complete_time_out_and_late_events_follow() -> None:
    src = Source()
    b, o, i1, i2, e = order_txn(src, 710, 10, 1)
    nxt = order_txn(src, 711, 100, 2)
    asm = DebeziumAssembler(settings())
    step = asm.process(None, [b, o, e], 1_000)
    assert step.outputs == []
    assert step.timeout_at_ms == 11_000
    early = asm.expire(step.state, 10_999)
    assert early.outputs == []
    late = asm.expire(step.state, 11_000)
    assert [r.kind for r in late.outputs] == [KIND_REJECT, KIND_REJECT]
    assert all(r.reason.startswith("txn-timeout:") for r in late.outputs)
    assert late.outputs[-1].is_txn_end
    # The missing items arrive afterwards: rejected too, not buffered; the next txn flows.
    after = asm.process(late.state, [i1, i2, *nxt], 12_000)
    assert [r.kind for r in after.outputs[:2]] == [KIND_REJECT, KIND_REJECT]
    assert [r.txn_id for r in rows(after.outputs)] == ["711"] * 3
    assert rows(after.outputs)[0].txn_seq == 1


def test_a_complete_transaction_behind_a_timed_out_head_is_applied() -> None:
    # 716's END heads the queue one item short; 717 behind it is complete and waits only for
    # commit order. When 716 times out, only it is rejected: 717 is applied, not dead-lettered.
    src = Source()
    b, o, *_ = order_txn(src, 716, 10, 1)
    short = src.end(716, 14, {"orders": 1, "order_items": 1})
    b2 = src.begin(717, 100)
    o2 = src.change(ORDERS, "u", {"order_id": 2}, 717, 1, 101)
    e2 = src.end(717, 102, {"orders": 1})
    nxt = order_txn(src, 718, 200, 3)
    asm = DebeziumAssembler(settings())
    step = asm.process(None, [b, o, short, b2, o2, e2], 0)
    assert step.outputs == []
    late = asm.expire(step.state, 10_000)
    assert [(r.kind, r.txn_id) for r in late.outputs] == [
        (KIND_REJECT, "716"),
        (KIND_REJECT, "716"),
        (KIND_ROW, "717"),
    ]
    assert late.outputs[0].reason.startswith("txn-timeout:")
    assert rows(late.outputs)[0].txn_seq == 1
    # Nothing is left queued: the next transaction is applied as soon as it is read.
    done = asm.process(late.state, nxt, 10_001)
    assert [(r.txn_id, r.txn_seq) for r in done.outputs] == [("718", 2)] * 3


def test_more_events_than_the_end_says_is_a_count_mismatch() -> None:
    src = Source()
    records = [
        src.begin(712, 10),
        src.change(ORDERS, "c", {"order_id": 1}, 712, 1, 11),
        src.change(ORDERS, "c", {"order_id": 2}, 712, 2, 12),
        src.end(712, 13, {"orders": 1}),
    ]
    out, _ = run(DebeziumAssembler(settings()), [records])
    assert rows(out) == []
    assert {r.reason.split(":")[0] for r in out} == {"event-count-mismatch"}


def test_replays_and_connect_resends_change_nothing() -> None:
    src = Source()
    first = order_txn(src, 713, 10, 1)
    asm = DebeziumAssembler(settings())
    out, state = run(asm, [first])
    assert len(out) == 3
    # Spark replays the same offsets: skipped.
    assert asm.process(state, first, 0).outputs == []
    # Kafka Connect re-sends the whole transaction at new offsets (worker crash).
    resent = order_txn(src, 713, 10, 1)
    resent[-1] = src.end(713, 14, {"orders": 1, "order_items": 2})
    step = asm.process(state, resent, 0)
    assert step.outputs == []
    # A duplicated data event of a transaction still being assembled counts once.
    b, o, i1, i2, e = order_txn(src, 714, 100, 2)
    dup = src.change(ITEMS, "c", {"order_id": 2, "line": 1}, 714, 2, 102)
    step = asm.process(step.state, [b, o, i1, dup, i2, e], 0)
    assert [r.txn_seq for r in step.outputs] == [2, 2, 2]


def test_txn_id_exact_drops_a_resent_transaction() -> None:
    """A connector with a stable id has no LSN watermark: the ids emitted tell a re-send."""
    src = Source()
    asm = DebeziumAssembler(settings(txn_id="exact"))

    def txn(xid: int) -> list[SourceRecord]:
        return [
            src.begin(xid, 400),
            src.change(ORDERS, "c", {"order_id": xid}, xid, 1, 400),
            src.end(xid, 400, {"orders": 1}),
        ]

    first = asm.process(None, txn(804), 0)
    assert [r.txn_id for r in rows(first.outputs)] == ["804:400"]
    # Re-sent at new offsets, same ids, with its data after its END this time; then a new one.
    b, o, e = txn(804)
    again = asm.process(first.state, [b, e], 1)
    assert again.outputs == []
    later = asm.process(again.state, [o, *txn(805)], 2)
    assert [(r.txn_id, r.txn_seq) for r in later.outputs] == [("805:400", 2)]
    # One dead-lettered for a timeout and then re-sent whole is not applied either.
    b, o, e = txn(806)
    waited = asm.expire(asm.process(later.state, [b, e], 3).state, 20_000)
    assert {r.kind for r in waited.outputs} == {KIND_REJECT}
    forgotten = asm.expire(waited.state, 40_000).state  # its rejection's bookkeeping expired
    resent = asm.process(forgotten, txn(806), 40_001)
    assert rows(resent.outputs) == []


def test_txn_id_exact_counts_three_part_data_collections() -> None:
    """SQL Server names a data collection <db>.<schema>.<table> in its END ("testDB.dbo.tablea"
    in Debezium's docs); its events say db, schema and table apart."""
    tid = "00000025:00000d08:0025"
    begin = {"status": "BEGIN", "id": tid, "event_count": None, "data_collections": None}
    end = {
        "status": "END",
        "id": tid,
        "event_count": 1,
        "data_collections": [{"data_collection": "testDB.dbo.tablea", "event_count": 1}],
    }
    data = {
        "before": None,
        "after": {"pk": 2, "aa": 1},
        "source": {"db": "testDB", "schema": "dbo", "table": "tablea", "ts_ms": 1},
        "op": "c",
        "transaction": {"id": tid, "total_order": 1, "data_collection_order": 1},
    }
    records = [
        SourceRecord(TXN_TOPIC, 0, 0, json.dumps(begin).encode(), None),
        SourceRecord("shop.dbo.tablea", 0, 0, json.dumps(data).encode(), b'{"pk":2}'),
        SourceRecord(TXN_TOPIC, 0, 1, json.dumps(end).encode(), None),
    ]
    out, _ = run(DebeziumAssembler(settings(txn_id="exact")), [records])
    assert [(r.kind, r.database, r.table, r.txn_id) for r in out] == [
        (KIND_ROW, "demo", "tablea", tid)
    ]


def test_schemas_enabled_envelope_and_state_round_trip() -> None:
    src = Source()
    records = order_txn(src, 715, 10, 1)
    wrapped = [
        SourceRecord(
            r.topic,
            r.partition,
            r.offset,
            json.dumps({"schema": {}, "payload": json.loads(r.value)}).encode(),
            r.key,
        )
        for r in records
    ]
    asm = DebeziumAssembler(settings())
    step = asm.process(None, wrapped[:2], 0)
    state = pickle.loads(pickle.dumps(step.state))
    assert len(asm.process(state, wrapped[2:], 0).outputs) == 3
    assert isinstance(step, DebeziumStep)


def test_settings_from_options() -> None:
    s = DebeziumSettings.from_options(
        {
            "transaction-topic": TXN_TOPIC,
            "database": "demo",
            "table.public.orders": "sr.orders_t",
            "on-error.unknown-table": "fail",
            "snapshot-batch-rows": "5",
        }
    )
    assert s.target("public", "orders") == ("sr", "orders_t")
    assert s.target("public", "other") is None
    assert s.policy("unknown-table") is Policy.FAIL
    assert s.policy("txn-timeout") is Policy.REJECT
    with pytest.raises(ConfigError, match=r"unknown debezium option .tabel\.x."):
        DebeziumSettings.from_options({"transaction-topic": "t", "tabel.x": "a.b"})
    with pytest.raises(ConfigError, match="transaction-topic"):
        DebeziumSettings.from_options({"database": "d"})
    with pytest.raises(ConfigError, match="expected table"):
        DebeziumSettings.from_options({"transaction-topic": "t", "table.orders": "x"})


def test_a_table_the_sink_may_not_write_rejects_the_whole_transaction() -> None:
    # No table map: every source table goes to the sink's database; table-name still rules.
    core = AssemblerSettings(
        txn_timeout_ms=10_000,
        targets=Targets("demo", frozenset({"orders"}), frozenset({"_cdc_dead_letter"})),
    )
    src = Source()
    out, _ = run(DebeziumAssembler(settings(core=core)), [order_txn(src, 706, 10, 1)])
    assert rows(out) == []
    rejects = [r for r in out if r.kind == KIND_REJECT]
    assert len(rejects) == 4
    assert all(r.reason.startswith("unknown-table:") for r in rejects), rejects
    assert any("not in table-name" in r.reason for r in rejects)


def test_an_end_queued_in_an_earlier_call_is_known_to_later_calls() -> None:
    src = Source()
    b, o, i1, i2, e = order_txn(src, 720, 10, 1)
    resent = src.end(720, 14, {"orders": 1, "order_items": 2})
    nxt = order_txn(src, 721, 100, 2)
    asm = DebeziumAssembler(settings())
    # The order arrives, then its END, then the same END again (a Connect restart); the items
    # come last.
    first = asm.process(None, [b, o], 0)
    queued = asm.process(first.state, [e], 5_000)
    again = asm.process(queued.state, [resent], 6_000)
    assert first.outputs == queued.outputs == again.outputs == []
    # The order waited 10 s, but its END is queued: the END's clock decides, not the data's.
    assert asm.expire(again.state, 10_000).outputs == []
    done = asm.process(again.state, [i1, i2, *nxt], 10_000)
    assert [(r.txn_id, r.txn_seq) for r in done.outputs] == [("720", 1)] * 3 + [("721", 2)] * 3
    assert all(r.kind == KIND_ROW for r in done.outputs)


def test_a_long_queue_of_ends_drains_in_commit_order() -> None:
    src = Source()
    txns = [order_txn(src, 800 + n, 1_000 + 10 * n, n) for n in range(50)]
    markers = [r for t in txns for r in (t[0], t[-1])]
    data = [r for t in txns for r in t[1:-1]]
    out, state = run(DebeziumAssembler(settings()), [markers, data[:70], data[70:]])
    assert [r.txn_id for r in out if r.is_txn_end] == [str(800 + n) for n in range(50)]
    assert [r.txn_seq for r in out if r.is_txn_end] == list(range(1, 51))
    assert DebeziumAssembler(settings()).expire(state, 10**12).outputs == []  # nothing queued


def test_a_state_written_by_the_previous_release_is_read() -> None:
    """Version 1 (one JSON document) holding an order whose items and END are still to come."""
    src = Source()
    b, _, i1, i2, e = order_txn(src, 730, 10, 1)
    row = ["shop.public.orders", 0, 0, "public.orders", "UPSERT", "demo", "orders"]
    v1 = {
        "offsets": {"shop.transaction\x000": 0, "shop.public.orders\x000": 0},
        "seq": 0,
        "wm": -1,
        "begins": {"730": [b.offset, 0, 1]},
        "pending": {"730": {"since": 0, "rows": {"1": [*row, '{"order_id":1,"n":2}', 5, None]}}},
        "ends": [],
        "rejected": {},
        "dropping": {},
    }
    step = DebeziumAssembler(settings()).process((1, json.dumps(v1).encode()), [i1, i2, e], 0)
    assert [(r.table, r.row) for r in step.outputs] == [
        ("orders", '{"order_id":1,"n":2}'),
        ("order_items", '{"order_id":1,"line":1}'),
        ("order_items", '{"order_id":1,"line":2}'),
    ]
    assert step.state[0] == DEBEZIUM_STATE_VERSION


def test_a_version_2_state_is_read_and_its_waiting_transactions_hold_snapshot_rows() -> None:
    """Version 2 had no index of the waiting transactions' partitions: it is built on load."""
    src = Source()
    b, o, i1, i2, e = order_txn(src, 731, 10, 1)
    snap = src.change(ORDERS, "r", {"order_id": 1, "n": 3}, None)
    version, blob = DebeziumAssembler(settings()).process(None, [b, o], 0).state
    assert version == DEBEZIUM_STATE_VERSION
    (size,) = struct.unpack_from(">I", blob)
    header = json.loads(blob[4 : 4 + size])
    del header["open"], header["held"]
    text = json.dumps(header).encode()
    v2 = (2, struct.pack(">I", len(text)) + text + blob[4 + size :])
    asm = DebeziumAssembler(settings())
    step = asm.process(v2, [snap], 0)
    assert step.outputs == []  # the snapshot row was read after the order's change
    done = asm.process(step.state, [i1, i2, e], 0)
    assert [json.loads(r.row or "{}").get("n") for r in done.outputs] == [2, None, None, 3]


def test_a_state_from_a_newer_release_is_refused_by_name() -> None:
    with pytest.raises(AssemblerError, match="state version 4 is not one this release reads"):
        DebeziumAssembler(settings()).process((4, b"{}"), [], 0)


def test_a_state_of_the_wrong_length_is_refused() -> None:
    src = Source()
    b, o, *_ = order_txn(src, 740, 10, 1)
    asm = DebeziumAssembler(settings())
    version, blob = asm.process(None, [b, o], 0).state
    for broken in (blob[:-1], blob + b"x"):
        with pytest.raises(AssemblerError, match="header accounts for"):
            asm.process((version, broken), [], 0)


def test_waiting_transactions_survive_many_calls_untouched() -> None:
    src = Source()
    txns = [order_txn(src, 900 + n, 5_000 + 10 * n, n) for n in range(20)]
    data = [r for t in txns for r in t[1:-1]]
    markers = [r for t in txns for r in (t[0], t[-1])]
    # Every data event first, one transaction a call; then the markers, three calls.
    calls = [data[i : i + 3] for i in range(0, len(data), 3)]
    calls += [markers[:10], markers[10:25], markers[25:]]
    out, _ = run(DebeziumAssembler(settings()), calls)
    assert [r.txn_id for r in out if r.is_txn_end] == [str(900 + n) for n in range(20)]
    assert len(out) == 60
    assert all(r.kind == KIND_ROW for r in out)


def restarted_txn(
    src: Source, resume: int, written: int = 3, finished: bool = False
) -> tuple[list[SourceRecord], list[SourceRecord]]:
    """Transaction 730 (five items, then their order: events 1-6 at LSNs 101-106) as Debezium
    writes it when Kafka Connect crashes inside it: the first write got events 1 to ``written``
    out, then the worker resumed after event ``resume`` (its last flushed offset), wrote BEGIN
    again and numbered the rest from 1; its END counts only the rest (seen on Debezium 3.4,
    11-29). With ``resume < written`` the two writes overlap; ``finished``: the first write
    got its END out too.
    """
    events = [(ITEMS, {"order_id": 9, "line": n}) for n in range(1, 6)]
    events.append((ORDERS, {"order_id": 9, "n": 5}))
    first = [src.begin(730, 100)]
    first += [
        src.change(t, "c", row, 730, i + 1, 101 + i) for i, (t, row) in enumerate(events[:written])
    ]
    if finished:
        first.append(src.end(730, 107, {"order_items": 5, "orders": 1}))
    rest = events[resume:]
    second = [src.begin(730, 100)]
    second += [
        src.change(t, "c", row, 730, i + 1, 101 + resume + i) for i, (t, row) in enumerate(rest)
    ]
    counts = {"order_items": sum(t == ITEMS for t, _ in rest), "orders": 1}
    second.append(src.end(730, 107, counts))
    return first, second


def whole_730(out: list[OutputRow]) -> list[tuple[str, int]]:
    """(table, line or n) of transaction 730's applied rows, in their order."""
    return [
        (r.table or "", json.loads(r.row or "{}").get("line") or json.loads(r.row or "{}")["n"])
        for r in rows(out)
        if r.txn_id == "730"
    ]


WHOLE_730 = [("order_items", n) for n in range(1, 6)] + [("orders", 5)]


def test_a_transaction_debezium_resumed_inside_is_rebuilt_whole_from_its_two_writes() -> None:
    src = Source()
    first, second = restarted_txn(src, resume=2)
    after = order_txn(src, 731, 200, 10)
    # In any cut, the rows come out whole, once, in the transaction's order, and only once
    # both writes are read up to where they overlap (the change at LSN 103).
    cuts = [
        [[*first, *second, *after]],
        [first, [*second, *after]],
        # The order (last event) and the END before the second write's items: numbering alone
        # looks complete (items 1-3 of the first write, the order), which lost items 4 and 5.
        [[*first, second[0], second[-2], second[-1]], [*second[1:-2], *after]],
        [[*first, second[0], second[-1]], [*second[1:-1]], after],
    ]
    for calls in cuts:
        out, state = run(DebeziumAssembler(settings()), calls)
        assert [r.kind for r in out] == [KIND_ROW] * 9, calls
        assert whole_730(out) == WHOLE_730, calls
        assert [r.txn_seq for r in out] == [1] * 6 + [2] * 3
        assert out[5].is_txn_end
        assert DebeziumAssembler(settings()).expire(state, 100_000).outputs == []


def test_a_transaction_debezium_finished_and_then_resumed_inside_is_applied_whole_once() -> None:
    # The first write got everything out, END included, before the crash; the offsets flushed
    # were inside the transaction, so the second write repeats its tail under new numbers.
    src = Source()
    first, second = restarted_txn(src, resume=2, written=6, finished=True)
    after = order_txn(src, 731, 200, 10)
    data = [r for r in [*first, *second] if r.topic != TXN_TOPIC]
    markers = [r for r in [*first, *second] if r.topic == TXN_TOPIC]
    cuts = [
        [[*first, *second, *after]],
        [first, [*second, *after]],
        [[*data, *after[1:-1]], [*markers, after[0], after[-1]]],
        [[*first[:-1], *second[1:-1]], [first[-1], second[0], second[-1]], after],
        # Its END and the order (event 6, the second write's 4) from both writes first: no
        # number was read twice, one change was.
        [[*first[:3], first[6], first[7], second[4]], [*first[3:6], *second[:4], second[5]], after],
    ]
    for calls in cuts:
        out, state = run(DebeziumAssembler(settings()), calls)
        assert [r.kind for r in out] == [KIND_ROW] * 9, calls
        assert whole_730(out) == WHOLE_730, calls
        assert [r.txn_seq for r in out] == [1] * 6 + [2] * 3
        assert DebeziumAssembler(settings()).expire(state, 100_000).outputs == []


def test_a_rebuilt_transaction_waits_until_the_overlap_is_read() -> None:
    src = Source()
    first, second = restarted_txn(src, resume=2)
    # The first write's copy of LSN 103 (its event 3) is read last: keyed to another
    # partition of the items topic, as Kafka Connect's producer may place it.
    copy = first[3]._replace(partition=1, offset=0)
    asm = DebeziumAssembler(settings())
    step = asm.process(None, [*first[:3], *second], 0)
    assert step.outputs == []  # nothing yet places the second write in the transaction
    assert step.timeout_at_ms == 10_000
    done = asm.process(step.state, [copy], 1_000)
    assert whole_730(done.outputs) == WHOLE_730


def test_the_first_writes_later_copies_are_dropped_after_the_rebuild() -> None:
    src = Source()
    first, second = restarted_txn(src, resume=2, written=5)  # events 3-5 in both writes
    asm = DebeziumAssembler(settings())
    step = asm.process(None, [*first[:4], *second], 0)
    assert whole_730(step.outputs) == WHOLE_730
    # Events 4 and 5 of the first write come later (another partition, a slower topic).
    later = asm.process(step.state, first[4:], 1_000)
    assert later.outputs == []
    assert asm.expire(later.state, 100_000).outputs == []


def test_without_an_overlap_it_waits_out_txn_timeout_and_is_dead_lettered_whole() -> None:
    src = Source()
    first, second = restarted_txn(src, resume=3)  # the second write starts at event 4
    after = order_txn(src, 731, 200, 10)
    asm = DebeziumAssembler(settings())
    step = asm.process(None, [*first, *second], 0)
    assert step.outputs == []  # nothing tells whether the first write had an event 4
    late = asm.expire(step.state, 10_000)
    rejected = [r for r in late.outputs if r.kind == KIND_REJECT]
    assert len(rejected) == 3 + 3 + 1  # both writes and the END: nothing lost
    assert all(r.reason.startswith("restarted-mid-transaction:") for r in rejected)
    assert "cannot be rebuilt" in rejected[0].reason
    assert "shop.transaction:0:" in rejected[0].reason  # where its END is
    assert [r.txn_id for r in rows(asm.process(late.state, after, 10_000).outputs)] == ["731"] * 3


def test_two_writes_that_do_not_fit_together_are_dead_lettered_whole() -> None:
    src = Source()
    first, second = restarted_txn(src, resume=2)
    # An END that counts less than the second write holds.
    short = src.end(730, 107, {"order_items": 2, "orders": 1})
    out, _ = run(DebeziumAssembler(settings()), [[*first, *second[:-1], short]])
    # Each change once (LSN 103 was in both writes), and the END.
    assert [r.kind for r in out] == [KIND_REJECT] * 7
    assert all(r.reason.startswith("restarted-mid-transaction:") for r in out)
    assert "do not fit together" in out[0].reason
    # Debezium restarted inside it twice: a third BEGIN, a third event 1.
    src = Source()
    first, second = restarted_txn(src, resume=2)
    third = [src.begin(730, 100), src.change(ITEMS, "c", {"order_id": 9, "line": 4}, 730, 1, 104)]
    out, _ = run(DebeziumAssembler(settings()), [[*first, *third, *second]])
    assert [r.kind for r in out] == [KIND_REJECT] * 7
    assert "more than once" in out[0].reason


def test_a_transaction_debezium_wrote_again_from_its_start_is_applied_once() -> None:
    src = Source()
    first, second = restarted_txn(src, resume=0)
    for calls in ([[*first, *second]], [first, second], [[*first, second[0], second[-1]], second]):
        out, _ = run(DebeziumAssembler(settings()), calls)
        assert [r.kind for r in out] == [KIND_ROW] * 6, calls
        assert [json.loads(r.row or "{}")["line"] for r in out[:5]] == [1, 2, 3, 4, 5]


def test_restarted_mid_transaction_can_fail_the_query() -> None:
    src = Source()
    first, second = restarted_txn(src, resume=3)
    options = {
        "transaction-topic": TXN_TOPIC,
        "database": "demo",
        "on-error.restarted-mid-transaction": "fail",  # source.debezium.<key> in the config
    }
    failing = DebeziumSettings.from_options(options)
    assert failing.policy("restarted-mid-transaction") is Policy.FAIL
    asm = DebeziumAssembler(failing)
    step = asm.process(None, [*first, *second], 0)
    with pytest.raises(AssemblerError, match="restarted-mid-transaction"):
        asm.expire(step.state, 600_000)


def test_a_restarted_transaction_with_an_event_without_lsn_is_dead_lettered_whole() -> None:
    src = Source()
    # An id without its LSN part: that change cannot be placed among the others.
    bare = src.change(ITEMS, "c", {"order_id": 9, "line": 6}, 730, 6, 106)
    bare = bare._replace(value=(bare.value or b"").replace(b'"730:106"', b'"730"'))
    first, second = restarted_txn(src, resume=2)
    out, _ = run(DebeziumAssembler(settings()), [[bare, *first, *second]])
    assert {r.kind for r in out} == {KIND_REJECT}
    assert "cannot all be told apart by LSN" in out[0].reason
    # Once keyed by LSN, a later event without one is rejected with the rest.
    src = Source()
    first, second = restarted_txn(src, resume=2)
    bare = src.change(ORDERS, "c", {"order_id": 9, "n": 5}, 730, 6, 106)
    bare = bare._replace(value=(bare.value or b"").replace(b'"730:106"', b'"730"'))
    later, _ = run(DebeziumAssembler(settings()), [[*first, *second[:2]], [bare, second[-1]]])
    assert {r.kind for r in later} == {KIND_REJECT}
    assert any("has no LSN" in r.reason for r in later)


def test_rows_of_one_copy_share_an_lsn_and_are_not_taken_for_a_restart() -> None:
    # COPY writes its rows in one WAL record: Debezium gives them one LSN, distinct numbers.
    src = Source()
    copy = [
        src.begin(740, 300),
        *(src.change(ITEMS, "c", {"order_id": 7, "line": n}, 740, n, 301) for n in range(1, 4)),
        src.end(740, 302, {"order_items": 3}),
    ]
    out, _ = run(DebeziumAssembler(settings()), [copy])
    assert [json.loads(r.row or "{}")["line"] for r in rows(out)] == [1, 2, 3]
    # Such a transaction that Debezium also resumed inside cannot be rebuilt: dead-lettered.
    again = [
        src.begin(740, 300),
        src.change(ITEMS, "c", {"order_id": 7, "line": 3}, 740, 1, 301),
        src.end(740, 302, {"order_items": 1}),
    ]
    out, _ = run(DebeziumAssembler(settings()), [[*copy[:-1], *again]])
    # (Its event 1 is the first write's at the same LSN, so it reads as a re-send.)
    assert {r.kind for r in out} == {KIND_REJECT}
    assert len(out) == 3 + 1  # each change and the END
