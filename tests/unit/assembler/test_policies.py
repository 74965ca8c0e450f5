"""Every violation under both policies: ``reject`` (whole transaction out as REJECT rows) and
``fail`` (AssemblyFailed naming topic, partition, offset and transaction)."""

from __future__ import annotations

import base64
import json
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from assembler import (
    AssemblyFailed,
    Event,
    OutputRow,
    Policy,
    SourceRecord,
    TransactionAssembler,
    Violation,
)
from assembler.settings import Targets
from assembler.state import TxnStatus
from common.errors import CdcError, Terminal
from tests.unit.assembler.builders import (
    TOPIC,
    Driver,
    begin,
    data,
    end,
    records,
    rejects,
    rows,
    settings,
    txn,
)

pytestmark = pytest.mark.unit


def assert_accounted(out: list[OutputRow], offsets: range) -> None:
    """Every offset is inside an emitted transaction or is the offset of exactly one REJECT."""
    covered: list[int] = []
    for r in out:
        if r.kind == "ROW" and r.is_txn_end:
            covered.extend(range(r.first_offset, r.last_offset + 1))
        elif r.kind == "REJECT":
            covered.append(r.last_offset)
    assert sorted(covered) == list(offsets)


@dataclass
class Case:
    """One violation scenario: its records and what the reject policy must produce."""

    violation: Violation
    items: list[Event | bytes | None]
    fail_offset: int  # offset AssemblyFailed names
    fail_txn: str | None
    reject_offsets: list[int]  # offsets that go out as REJECT rows, in order
    row_txns: list[str]  # transactions still emitted as ROW
    kwargs: dict[str, Any] = field(default_factory=dict)


GARBAGE = b"{not json"
TARGETS = Targets("shop", frozenset({"orders"}), frozenset({"_cdc_dead_letter", "_cdc_progress"}))
CASES = {
    "undecodable-in-txn": Case(
        Violation.UNDECODABLE,
        [begin("a"), data("a"), GARBAGE, data("a"), end("a"), *txn("b", 1)],
        2,
        "a",
        [0, 1, 2, 3, 4],
        ["b"],
    ),
    "undecodable-alone": Case(Violation.UNDECODABLE, [GARBAGE, *txn("b", 1)], 0, None, [0], ["b"]),
    "undecodable-null-value": Case(
        Violation.UNDECODABLE, [None, *txn("b", 1)], 0, None, [0], ["b"]
    ),
    "undecodable-invalid-data": Case(
        Violation.UNDECODABLE,
        [*txn("b", 1), Event("c", "DATA", None, "t", None, "{}")],
        3,
        None,
        [3],
        ["b"],
    ),
    "unknown-type-in-txn": Case(
        Violation.UNKNOWN_TYPE,
        [begin("a"), data("a"), Event("a", "COMMIT"), end("a"), *txn("b", 1)],
        2,
        "a",
        [0, 1, 2, 3],
        ["b"],
    ),
    "unknown-type-alone": Case(
        Violation.UNKNOWN_TYPE, [Event("x", "HEARTBEAT"), *txn("b", 1)], 0, "x", [0], ["b"]
    ),
    "no-begin-data": Case(
        Violation.NO_BEGIN,
        [data("x"), data("x"), end("x"), *txn("b", 1)],
        0,
        "x",
        [0, 1, 2],
        ["b"],
    ),
    "no-begin-end": Case(Violation.NO_BEGIN, [end("x"), *txn("b", 1)], 0, "x", [0], ["b"]),
    "txn-id-mismatch": Case(
        Violation.TXN_ID_MISMATCH,
        [begin("a"), data("a"), data("z"), data("a"), end("a"), *txn("b", 1)],
        2,
        "a",
        [0, 1, 2, 3, 4],
        ["b"],
    ),
    "txn-id-mismatch-end": Case(
        Violation.TXN_ID_MISMATCH,
        [begin("a"), data("a"), end("z"), end("a"), *txn("b", 1)],
        2,
        "a",
        [0, 1, 2, 3],
        ["b"],
    ),
    "begin-while-open": Case(
        Violation.BEGIN_WHILE_OPEN,
        [begin("a"), data("a"), *txn("b", 2)],
        2,
        "a",
        [0, 1],
        ["b"],
    ),
    "event-count-mismatch": Case(
        Violation.EVENT_COUNT_MISMATCH,
        [begin("a"), data("a"), end("a", 2), *txn("b", 1)],
        2,
        "a",
        [0, 1, 2],
        ["b"],
    ),
    "txn-too-large-rows": Case(
        Violation.TXN_TOO_LARGE,
        [*txn("b", 2), begin("a"), data("a"), data("a"), data("a"), data("a"), end("a")],
        7,
        "a",
        [4, 5, 6, 7, 8, 9],
        ["b"],
        {"max_txn_rows": 2},
    ),
    "txn-too-large-bytes": Case(
        Violation.TXN_TOO_LARGE,
        [begin("a"), data("a"), data("a"), end("a"), *txn("b", 1)],
        2,
        "a",
        [0, 1, 2, 3],
        ["b"],
        {"max_txn_bytes": 50},  # one row is 17 + 4 + 6 + 9 = 36 bytes
    ),
    # Rows the sink may not write are rejected here, not left to fail the sink on every replay.
    "unknown-table": Case(
        Violation.UNKNOWN_TABLE,
        [begin("a"), data("a"), data("a", table="customers"), data("a"), end("a"), *txn("b", 1)],
        2,
        "a",
        [0, 1, 2, 3, 4],
        ["b"],
        {"targets": TARGETS},
    ),
    "wrong-database": Case(
        Violation.UNKNOWN_TABLE,
        [begin("a"), data("a", db="other"), end("a"), *txn("b", 1)],
        1,
        "a",
        [0, 1, 2],
        ["b"],
        {"targets": TARGETS},
    ),
    "sink-own-table": Case(
        Violation.UNKNOWN_TABLE,
        [begin("a"), data("a", table="_cdc_dead_letter", op="DELETE"), end("a"), *txn("b", 1)],
        1,
        "a",
        [0, 1, 2],
        ["b"],
        {"targets": TARGETS},
    ),
}


@pytest.mark.parametrize("split", [False, True], ids=["one-call", "record-per-call"])
@pytest.mark.parametrize("name", list(CASES))
def test_reject_policy(name: str, split: bool) -> None:
    case = CASES[name]
    d = Driver(TransactionAssembler(settings(Policy.REJECT, **case.kwargs)))
    recs = records(case.items)
    out: list[OutputRow] = []
    if split:
        for rec in recs:
            out += d.feed([rec])
    else:
        out = d.feed(recs)

    rej = rejects(out)
    assert [r.last_offset for r in rej] == case.reject_offsets
    assert all(r.reason and r.reason.startswith(case.violation.value + ":") for r in rej)
    assert all(r.txn_seq is None and r.topic == TOPIC and r.partition == 0 for r in rej)
    # one rejected transaction: row_seq numbers its records, first_offset is its first record
    if case.fail_txn is not None:
        in_txn = [r for r in rej if r.txn_id == case.fail_txn]
        assert [r.row_seq for r in in_txn] == list(range(len(in_txn)))
        assert {r.first_offset for r in in_txn} == {in_txn[0].last_offset}
    emitted = rows(out)
    assert sorted({str(r.txn_id) for r in emitted}) == case.row_txns
    assert {r.txn_seq for r in emitted} == set(range(1, len(case.row_txns) + 1))
    assert_accounted(out, range(len(recs)))
    assert d.state is not None
    assert d.state.last_offset == len(recs) - 1
    # the output does not depend on how records were split into calls
    if split:
        assert out == Driver(TransactionAssembler(settings(Policy.REJECT, **case.kwargs))).feed(
            recs
        )


@pytest.mark.parametrize("name", list(CASES))
def test_fail_policy(name: str) -> None:
    case = CASES[name]
    asm = TransactionAssembler(settings(Policy.FAIL, only=case.violation, **case.kwargs))
    recs = records(case.items)
    with pytest.raises(AssemblyFailed) as info:
        asm.process(None, recs, now_ms=0)
    e = info.value
    assert e.violation is case.violation
    assert (e.topic, e.partition, e.offset, e.txn_id) == (TOPIC, 0, case.fail_offset, case.fail_txn)
    msg = str(e)
    for part in (
        f"topic={TOPIC}",
        "partition=0",
        f"offset={case.fail_offset}",
        f"txn={case.fail_txn or '-'}",
        f"on-error.{case.violation.value}=reject",
    ):
        assert part in msg
    assert isinstance(e, CdcError)
    assert isinstance(e, Terminal)
    again = pickle.loads(pickle.dumps(e))
    assert str(again) == msg
    assert again.violation is case.violation


def test_fail_policy_of_one_violation_leaves_others_rejecting() -> None:
    asm = TransactionAssembler(settings(Policy.FAIL, only=Violation.EVENT_COUNT_MISMATCH))
    out = asm.process(None, records([GARBAGE, *txn("b", 1)]), 0).outputs
    assert [r.kind for r in out] == ["REJECT", "ROW"]


def test_fail_leaves_the_given_state_untouched() -> None:
    asm = TransactionAssembler(settings(Policy.FAIL))
    step = asm.process(None, records([begin("a"), data("a")]), 0)
    before = step.state.to_tuple()
    with pytest.raises(AssemblyFailed):
        asm.process(step.state, records([GARBAGE], start=2), 0)
    assert step.state.to_tuple() == before


def test_rejected_rows_carry_the_record_content() -> None:
    items: list[Event | bytes | None] = [
        begin("a", ts=5),
        data("a", 7, "items", op="DELETE", ts=6),
        b"\xff\x00binary",
    ]
    out = Driver().feed(records(items))
    b, d, g = out
    assert json.loads(b.row or "") == {"txn_id": "a", "type": "TXN_BEGIN", "source_ts_ms": 5}
    assert (d.database, d.table, d.op, json.loads(d.row or "")) == (
        "shop",
        "items",
        "DELETE",
        {"id": 7},
    )
    assert g.row == "base64:" + base64.b64encode(b"\xff\x00binary").decode()
    assert g.txn_id == "a"
    assert "cannot be decoded" in (g.reason or "")
    text = Driver().feed(records([b'["a list"]']))[0]
    assert text.row == '["a list"]'
    assert "not an object" in (text.reason or "")


def test_rejected_transaction_stays_rejected_until_its_end_across_calls() -> None:
    d = Driver()
    d.feed(records([begin("a"), data("a"), GARBAGE]))
    assert d.state is not None
    assert d.state.status is TxnStatus.REJECTING
    assert d.steps[-1].timeout_at_ms is None
    out = d.feed(records([data("a", 2), data("a", 3)], start=3))
    assert [(r.kind, r.row_seq) for r in out] == [("REJECT", 3), ("REJECT", 4)]
    assert all("later event of transaction 'a'" in (r.reason or "") for r in out)
    assert all(r.first_offset == 0 for r in out)
    out = d.feed(records([end("a"), *txn("b", 1)], start=5))
    assert [(r.kind, r.is_txn_end) for r in out] == [("REJECT", True), ("ROW", True)]
    assert d.state is not None
    assert d.state.status is TxnStatus.IDLE  # type: ignore[comparison-overlap]  # feed() changed it


def test_new_begin_ends_a_rejected_transaction_without_its_end() -> None:
    d = Driver()
    d.feed(records([begin("a"), GARBAGE]))
    out = d.feed(records(txn("b", 1), start=2))
    assert [r.kind for r in out] == ["ROW"]


def test_too_large_rejects_the_buffered_part_immediately_across_calls() -> None:
    d = Driver(TransactionAssembler(settings(max_txn_rows=3)))
    d.feed(records([begin("a"), data("a"), data("a")]))
    assert d.state is not None
    assert d.state.txn_rows == 2
    out = d.feed(records([data("a"), data("a")], start=3))
    assert [r.row_seq for r in out] == [0, 1, 2, 3, 4]
    assert d.state is not None
    assert d.state.txn_buffer == b""
    assert d.state.status is TxnStatus.REJECTING


# -- txn-timeout (processing time) --------------------------------------------------------


def test_timeout_via_expire_rejects_then_rejects_the_rest() -> None:
    d = Driver(TransactionAssembler(settings(txn_timeout_ms=1000)))
    d.feed(records([begin("a"), data("a")]), now_ms=10_000)
    assert d.steps[-1].timeout_at_ms == 11_000
    out = d.expire(11_000)
    assert [r.last_offset for r in out] == [0, 1]
    assert all((r.reason or "").startswith("txn-timeout:") for r in out)
    assert d.steps[-1].timeout_at_ms is None
    out = d.feed(records([data("a"), end("a"), *txn("b", 1)], start=2), now_ms=11_500)
    assert [(r.kind, r.row_seq) for r in out] == [("REJECT", 2), ("REJECT", 3), ("ROW", 0)]


def test_a_late_end_that_arrives_before_the_timeout_fires_completes() -> None:
    # The pipeline was down or behind: the END was already in Kafka. Only a partition gone
    # quiet (expire) times out, so the transaction completes.
    d = Driver(TransactionAssembler(settings(txn_timeout_ms=1000)))
    d.feed(records([begin("a"), data("a")]), now_ms=0)
    out = d.feed(records([end("a")], start=2), now_ms=60_000)
    assert [(r.kind, r.last_offset) for r in out] == [("ROW", 2)]


def test_timeout_not_reached_in_process_completes() -> None:
    d = Driver(TransactionAssembler(settings(txn_timeout_ms=1000)))
    d.feed(records([begin("a"), data("a")]), now_ms=0)
    out = d.feed(records([end("a")], start=2), now_ms=999)
    assert [r.kind for r in out] == ["ROW"]


def test_timeout_fail_policy() -> None:
    asm = TransactionAssembler(settings(Policy.FAIL, only=Violation.TXN_TIMEOUT, txn_timeout_ms=5))
    step = asm.process(None, records([begin("a"), data("a")], start=40), now_ms=0)
    with pytest.raises(AssemblyFailed) as info:
        asm.expire(step.state, 5)
    assert info.value.violation is Violation.TXN_TIMEOUT
    assert (info.value.offset, info.value.txn_id) == (40, "a")
    assert "txn-timeout is 5 ms" in str(info.value)


def test_timeouts_do_not_touch_an_idle_partition() -> None:
    d = Driver(TransactionAssembler(settings(txn_timeout_ms=1)))
    d.feed(records(txn("a", 1)), now_ms=0)
    assert d.expire(10_000) == []


def test_mixed_topics_in_records_are_refused_with_a_clear_error() -> None:
    asm = TransactionAssembler(settings())
    recs = [*records(txn("a", 1)), SourceRecord("other", 0, 9, b"{}")]
    with pytest.raises(CdcError, match="topic=other"):
        asm.process(None, recs, 0)
