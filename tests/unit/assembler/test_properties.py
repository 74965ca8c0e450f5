"""Property tests of the assembler over arbitrary streams, batchings, orders and replays.

1. Valid multi-partition streams: whatever the micro-batch and chunk split, the order within a
   batch, the replays of consumed offsets and the state round trips, the output is exactly the
   complete transactions in source order per partition, each emitted whole in one call.
2. Arbitrary (mostly invalid) streams under the reject policy: every record is accounted for
   exactly once (in an emitted transaction, as a REJECT row, or still open), and the output
   does not depend on the batching.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembler import (
    AssemblerSettings,
    CodecSettings,
    Event,
    OutputRow,
    PartitionState,
    SourceRecord,
    TransactionAssembler,
    encode_event,
)
from assembler.state import TxnStatus
from tests.unit.assembler.builders import roundtrip

pytestmark = pytest.mark.unit

TOPIC = "cdc"
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Txn:
    txn_id: str
    rows: list[tuple[str, str, str]]  # (table, op, row)
    with_count: bool


@dataclass
class Partition:
    number: int
    txns: list[Txn]
    complete: int  # how many leading txns are complete; the next may be cut short
    records: list[SourceRecord]
    events: list[Event]


@st.composite
def partition_streams(draw: st.DrawFn, number: int, encoding: str) -> Partition:
    n_txns = draw(st.integers(0, 6))
    txns = []
    for t in range(n_txns):
        n_rows = draw(st.integers(0, 5))
        rows = [
            (
                draw(st.sampled_from(["orders", "order_items"])),
                draw(st.sampled_from(["UPSERT", "DELETE"])),
                json.dumps({"p": number, "t": t, "r": r, "s": draw(st.text(max_size=3))}),
            )
            for r in range(n_rows)
        ]
        txns.append(Txn(f"p{number}-t{t}", rows, draw(st.booleans())))
    events: list[Event] = []
    for tx in txns:
        events.append(Event(tx.txn_id, "TXN_BEGIN", source_ts_ms=1))
        events += [Event(tx.txn_id, "DATA", "shop", tb, op, row, 2) for tb, op, row in tx.rows]
        events.append(
            Event(
                tx.txn_id,
                "TXN_END",
                source_ts_ms=3,
                event_count=len(tx.rows) if tx.with_count else None,
            )
        )
    complete = n_txns
    ends_inside: bool = draw(st.booleans())
    if txns and ends_inside:  # the stream ends inside the last transaction
        last = txns[-1]
        keep = draw(st.integers(1, len(last.rows) + 1))  # BEGIN + some DATA, never the END
        events = events[: len(events) - (len(last.rows) + 2) + keep]
        complete = n_txns - 1
    offset = draw(st.integers(0, 1000))
    recs = []
    for ev in events:
        recs.append(SourceRecord(TOPIC, number, offset, encode_event(ev, encoding)))  # type: ignore[arg-type]
        offset += draw(st.integers(1, 3))  # Kafka offsets may have gaps (control records)
    return Partition(number, txns, complete, recs, events)


def split_points(draw: Callable[[st.SearchStrategy[Any]], Any], n: int) -> list[tuple[int, int]]:
    """Split range(n) into contiguous pieces (some may be empty)."""
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=6)))
    bounds = [0, *cuts, n]
    return list(itertools.pairwise(bounds))


def chunked(recs: list[SourceRecord], rnd: random.Random) -> Iterator[SourceRecord]:
    """The records as Spark hands them over: several chunks, consumed lazily."""
    cut = rnd.randint(0, len(recs))
    yield from recs[:cut]
    yield from recs[cut:]


def run_batched(
    draw: Callable[[st.SearchStrategy[Any]], Any],
    parts: list[Partition],
    asm: TransactionAssembler,
    rnd: random.Random,
) -> tuple[dict[int, list[list[OutputRow]]], dict[int, PartitionState]]:
    """Feed every partition through micro-batches; returns per-partition outputs per call."""
    pieces = {p.number: split_points(draw, len(p.records)) for p in parts}
    n_batches = max((len(v) for v in pieces.values()), default=0)
    states: dict[int, PartitionState] = {}
    calls: dict[int, list[list[OutputRow]]] = {p.number: [] for p in parts}
    consumed: dict[int, list[SourceRecord]] = {p.number: [] for p in parts}
    for b in range(n_batches):
        for p in parts:
            if b >= len(pieces[p.number]):
                continue
            lo, hi = pieces[p.number][b]
            batch = list(p.records[lo:hi])
            # replays of consumed offsets and duplicates within the batch
            old = consumed[p.number]
            batch += [rnd.choice(old) for _ in range(rnd.randint(0, 3))] if old else []
            batch += [rnd.choice(batch) for _ in range(rnd.randint(0, 2))] if batch else []
            if not batch:
                continue
            rnd.shuffle(batch)
            step = asm.process(states.get(p.number), chunked(batch, rnd), now_ms=0)
            calls[p.number].append(step.outputs)
            states[p.number] = roundtrip(step.state)
            if rnd.random() < 0.3:  # an executor restart: a fresh assembler
                asm = TransactionAssembler(asm.settings)
            consumed[p.number] += p.records[lo:hi]
    return calls, states


@SETTINGS
@given(st.data())
def test_any_batching_emits_exactly_the_complete_transactions(data: st.DataObject) -> None:
    encoding = data.draw(st.sampled_from(["json", "avro", "confluent"]))
    n_parts = data.draw(st.integers(1, 3))
    parts = [data.draw(partition_streams(i, encoding)) for i in range(n_parts)]
    rnd = data.draw(st.randoms(use_true_random=False))
    codec = CodecSettings(encoding=encoding, registry_schemas={1: _schema_text()})  # type: ignore[arg-type]
    asm = TransactionAssembler(AssemblerSettings(codec=codec))

    calls, states = run_batched(data.draw, parts, asm, rnd)

    for p in parts:
        flat = [r for call in calls[p.number] for r in call]
        expected = []
        seq = 0
        offsets = [r.offset for r in p.records]
        pos = 0
        for tx in p.txns[: p.complete]:
            first, last = offsets[pos], offsets[pos + len(tx.rows) + 1]
            pos += len(tx.rows) + 2
            if not tx.rows:
                continue  # an empty transaction emits nothing
            seq += 1
            for i, (tb, op, row) in enumerate(tx.rows):
                expected.append(
                    ("ROW", TOPIC, p.number, tx.txn_id, seq, i, "shop", tb, op, row,
                     i == len(tx.rows) - 1, first, last, 3, None)
                )  # fmt: skip
        assert [r.as_tuple() for r in flat] == expected
        # each transaction is emitted whole by one call
        for call in calls[p.number]:
            by_txn: dict[str | None, list[OutputRow]] = {}
            for r in call:
                by_txn.setdefault(r.txn_id, []).append(r)
            for txn_rows in by_txn.values():
                assert [r.row_seq for r in txn_rows] == list(range(len(txn_rows)))
                assert txn_rows[-1].is_txn_end
        # the final state: the cut-short transaction is still open, nothing lost
        if p.records:
            state = states[p.number]
            assert state.last_offset == p.records[-1].offset
            assert state.txn_seq == seq
            if p.complete < len(p.txns):
                assert state.status is TxnStatus.OPEN
                assert state.txn_id == p.txns[-1].txn_id
                assert state.txn_rows == sum(1 for e in p.events[pos:] if e.type == "DATA")
            else:
                assert state.status is TxnStatus.IDLE
                assert state.txn_buffer == b""
            # a full replay afterwards changes nothing
            again = asm.process(state, reversed(p.records), now_ms=0)
            assert again.outputs == []
            assert again.state == state


# -- arbitrary streams under the reject policy ------------------------------------------------

TOKENS = st.sampled_from(["B", "D", "E", "Ec", "X", "G", "N"])
IDS = st.sampled_from(["a", "b", "c"])


def token_value(token: str, txn_id: str, i: int) -> bytes | None:
    ev: Event | None = {
        "B": Event(txn_id, "TXN_BEGIN"),
        "D": Event(txn_id, "DATA", "shop", "t", None, f'{{"i":{i}}}'),
        "E": Event(txn_id, "TXN_END"),
        "Ec": Event(txn_id, "TXN_END", event_count=i % 3),
        "X": Event(txn_id, "ROLLBACK"),
    }.get(token)
    if ev is not None:
        return encode_event(ev, "json")
    return b"\x00garbage" if token == "G" else None


@SETTINGS
@given(
    st.lists(st.tuples(TOKENS, IDS), max_size=40),
    st.integers(1, 4),
    st.data(),
)
def test_every_record_is_accounted_for_and_batching_does_not_matter(
    tokens: list[tuple[str, str]], max_rows: int, data: st.DataObject
) -> None:
    recs = [SourceRecord(TOPIC, 0, i, token_value(t, x, i)) for i, (t, x) in enumerate(tokens)]
    asm = TransactionAssembler(AssemblerSettings(max_txn_rows=max_rows))
    whole = asm.process(PartitionState(TOPIC, 0), recs, now_ms=0)
    part = Partition(0, [], 0, recs, [])
    calls, states = run_batched(
        data.draw, [part], asm, data.draw(st.randoms(use_true_random=False))
    )
    batched = [r for call in calls[0] for r in call]
    assert batched == whole.outputs
    if recs:
        assert states[0] == whole.state

    covered: list[int] = []
    for r in whole.outputs:
        if r.kind == "ROW" and r.is_txn_end:
            covered += range(r.first_offset, r.last_offset + 1)
        elif r.kind == "REJECT":
            covered.append(r.last_offset)
    if whole.state.status is TxnStatus.OPEN:
        covered += range(whole.state.txn_first_offset, whole.state.last_offset + 1)
    assert len(covered) == len(set(covered)), "a record was emitted twice"
    missing = sorted(set(range(len(recs))) - set(covered))
    # only empty transactions (BEGIN x, END x at the next offset) emit nothing
    while missing:
        b, e = missing[:2]
        assert (tokens[b][0], tokens[e][0][0], tokens[b][1], e) == ("B", "E", tokens[e][1], b + 1)
        missing = missing[2:]
    assert all(r.kind == "REJECT" or r.txn_seq is not None for r in whole.outputs)


def _schema_text() -> str:
    from assembler.events import EVENT_SCHEMA_PATH

    return EVENT_SCHEMA_PATH.read_text()
