"""The state machine on valid input: emission, ordering, replays, spanning calls, N:1."""

from __future__ import annotations

import json
import pickle

import pytest

from assembler import (
    AssemblerError,
    AssemblerSettings,
    PartitionState,
    SourceRecord,
    TransactionAssembler,
)
from assembler.state import TxnStatus
from tests.unit.assembler.builders import (
    TOPIC,
    Driver,
    begin,
    data,
    end,
    records,
    rejects,
    rows,
    txn,
)

pytestmark = pytest.mark.unit


def test_complete_transaction_is_emitted_on_end_with_numbering() -> None:
    d = Driver()
    evs = [
        begin("a", ts=100),
        data("a", 1, ts=101),
        data("a", 2, "items", op="DELETE"),
        data("a", 3),
        end("a", 3, ts=105),
    ]
    out = d.feed(records(evs, start=10))
    assert [r.kind for r in out] == ["ROW"] * 3
    assert [r.row_seq for r in out] == [0, 1, 2]
    assert [r.is_txn_end for r in out] == [False, False, True]
    assert {r.txn_seq for r in out} == {1}
    assert [json.loads(r.row or "")["id"] for r in out] == [1, 2, 3]
    assert [r.op for r in out] == ["UPSERT", "DELETE", "UPSERT"]
    assert [r.table for r in out] == ["orders", "items", "orders"]
    assert all(r.database == "shop" and r.txn_id == "a" for r in out)
    assert all(r.first_offset == 10 and r.last_offset == 14 for r in out)
    assert all(r.source_ts_ms == 105 for r in out)  # from END
    assert all(r.topic == TOPIC and r.partition == 0 and r.reason is None for r in out)
    assert d.state is not None
    assert d.state.status is TxnStatus.IDLE
    assert d.state.last_offset == 14
    assert d.state.txn_buffer == b""
    assert d.steps[-1].timeout_at_ms is None


def test_source_ts_falls_back_to_data_then_begin() -> None:
    out = Driver().feed(records([begin("a", ts=7), data("a", ts=9), end("a")]))
    assert out[0].source_ts_ms == 9
    out = Driver().feed(records([begin("a", ts=7), data("a"), end("a")]))
    assert out[0].source_ts_ms == 7


def test_nothing_is_emitted_before_end_even_across_calls_and_restarts() -> None:
    d = Driver()
    evs = txn("a", 5)
    recs = records(evs)
    for rec in recs[:-1]:
        assert d.feed([rec], now_ms=1) == []
        assert d.state is not None
        assert d.state.status is TxnStatus.OPEN
        assert d.steps[-1].timeout_at_ms == 1 + 600_000
    assert d.state is not None
    assert d.state.txn_rows == 5
    # a new assembler instance (executor restart) continues from the stored tuple
    d.asm = TransactionAssembler(AssemblerSettings())
    out = d.feed(recs[-1:], now_ms=2)
    assert [r.row_seq for r in out] == [0, 1, 2, 3, 4]
    assert [json.loads(r.row or "")["id"] for r in out] == [0, 1, 2, 3, 4]
    assert out[-1].is_txn_end
    assert out[0].first_offset == 0
    assert out[0].last_offset == 6


def test_several_transactions_in_one_call_n_to_1_and_txn_seq_survives() -> None:
    d = Driver()
    evs = txn("a", 2) + txn("b", 1) + txn("c", 3)
    out = d.feed(records(evs))
    assert [(r.txn_id, r.txn_seq, r.row_seq) for r in out] == [
        ("a", 1, 0),
        ("a", 1, 1),
        ("b", 2, 0),
        ("c", 3, 0),
        ("c", 3, 1),
        ("c", 3, 2),
    ]
    assert [r.is_txn_end for r in out] == [False, True, True, False, False, True]
    out = d.feed(records(txn("d", 1), start=len(evs)))
    assert [(r.txn_id, r.txn_seq) for r in out] == [("d", 4)]


def test_records_in_any_order_are_sorted_by_offset() -> None:
    recs = records(txn("a", 3) + txn("b", 2))
    shuffled = list(reversed(recs))
    out = Driver().feed(shuffled)
    assert [(r.txn_id, r.row_seq) for r in out] == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("b", 0),
        ("b", 1),
    ]


def test_replays_and_duplicates_are_ignored() -> None:
    d = Driver()
    recs = records(txn("a", 2) + txn("b", 2))
    first = d.feed(recs[:6])  # a complete, b open with 1 row
    assert [r.txn_id for r in first] == ["a", "a"]
    state_before = d.state
    assert d.feed(recs[:6]) == []  # a full replay
    assert d.state == state_before
    out = d.feed(recs[2:] + recs[6:])  # replayed part plus duplicates of new records
    assert [(r.txn_id, r.txn_seq, r.row_seq) for r in out] == [("b", 2, 0), ("b", 2, 1)]
    assert d.feed(recs) == []


def test_offset_gaps_are_fine() -> None:
    evs = txn("a", 2)
    recs = [
        SourceRecord(TOPIC, 0, off, r.value)
        for off, r in zip((3, 9, 10, 40), records(evs), strict=False)
    ]
    out = Driver().feed(recs)
    assert [(r.first_offset, r.last_offset) for r in out] == [(3, 40), (3, 40)]


def test_empty_transaction_emits_nothing_and_keeps_txn_seq() -> None:
    d = Driver()
    out = d.feed(records([begin("e"), end("e", 0), *txn("a", 1)], start=0))
    assert [(r.txn_id, r.txn_seq) for r in out] == [("a", 1)]
    assert d.state is not None
    assert d.state.last_offset == 4


def test_process_without_records_keeps_state() -> None:
    d = Driver()
    d.feed(records(txn("a", 1)[:2]), now_ms=5)
    before = d.state
    assert d.feed([], now_ms=6) == []
    assert d.state == before
    assert d.steps[-1].timeout_at_ms == 5 + 600_000


def test_process_needs_state_or_records() -> None:
    asm = TransactionAssembler(AssemblerSettings())
    with pytest.raises(ValueError, match="partition"):
        asm.process(None, [], 0)


def test_records_of_another_partition_are_refused() -> None:
    d = Driver()
    d.feed(records(txn("a", 1)))
    with pytest.raises(AssemblerError, match="partition=1"):
        d.feed(records(txn("b", 1), start=10, partition=1))


def test_expire_before_deadline_changes_nothing() -> None:
    d = Driver()
    d.feed(records(txn("a", 2)[:2]), now_ms=1000)
    before = d.state
    assert d.expire(1000 + 599_999) == []
    assert d.state == before


def test_large_unicode_rows_round_trip_through_state() -> None:
    d = Driver()
    row = json.dumps({"name": "Zoë 🚀" * 100, "n": 1}, ensure_ascii=False)
    evs = [begin("a"), data("a"), end("a")]
    recs = records(evs)
    from assembler import Event, encode_event

    recs[1] = SourceRecord(
        TOPIC, 0, 1, encode_event(Event("a", "DATA", "db", "täble", None, row), "json")
    )
    d.feed(recs[:2])
    assert d.state is not None
    assert d.state.txn_bytes == len(d.state.txn_buffer)
    out = d.feed(recs[2:])
    assert out[0].row == row
    assert out[0].table == "täble"


def test_assembler_and_state_pickle() -> None:
    asm = TransactionAssembler(AssemblerSettings())
    asm2 = pickle.loads(pickle.dumps(asm))
    d = Driver(asm2)
    d.feed(records(txn("a", 1)[:2]))
    assert d.state is not None
    st = pickle.loads(pickle.dumps(d.state))
    assert isinstance(st, PartitionState)
    assert st == d.state
    assert rows(d.feed(records(txn("a", 1)[2:], start=2))) != []
    assert rejects(d.steps[-1].outputs) == []


def test_offsets_the_pipeline_never_saw_are_logged_once_with_their_range(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from assembler.codecs import encode_event
    from assembler.events import Event

    def rec(offset: int, event: Event) -> SourceRecord:
        return SourceRecord("t", 0, offset, encode_event(event, "json"))

    def one_txn(first: int, name: str) -> list[SourceRecord]:
        return [
            rec(first, Event(name, "TXN_BEGIN")),
            rec(first + 1, Event(name, "DATA", "d", "x", "UPSERT", '{"id": 1}')),
            rec(first + 2, Event(name, "TXN_END", event_count=1)),
        ]

    assembler = TransactionAssembler(AssemblerSettings())
    caplog.set_level("WARNING", logger="assembler.machine")
    state = assembler.process(None, one_txn(0, "a"), now_ms=1).state
    assert not caplog.records
    # Offsets 3..9 are gone (retention); 12 -> 14 leaves a marker-sized gap, not reported.
    assembler.process(state, [*one_txn(10, "b"), *one_txn(14, "c")], now_ms=2)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, messages
    assert messages[0].startswith("offsets skipped topic=t partition=0 first=3 last=9 count=7")
