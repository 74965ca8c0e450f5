"""Injected bad transactions, replayed through the real assembler, are exactly what the truth says.

The stream is the one the generator sends (:func:`demo.badinput.interleave` of the workload
and :func:`demo.badinput.build`), with Kafka offsets assigned per partition as a broker
would, decoded and assembled by :class:`assembler.machine.TransactionAssembler` under the
``reject`` policy in random micro-batches with state round trips.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.codecs import CodecSettings, DecodeError, Encoding, make_decoder
from assembler.events import EVENT_SCHEMA_PATH
from assembler.machine import TransactionAssembler
from assembler.output import KIND_REJECT, KIND_ROW, OutputRow
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings, Targets
from assembler.state import PartitionState, TxnStatus
from demo.badinput import (
    BAD_ID_BASE,
    UNDECODABLE_VALUE,
    BadInputKind,
    BadInputPlan,
    BadTransaction,
    build,
    encode_record,
    interleave,
    max_good_txn_rows,
    parse_bad_input,
)
from demo.deadletters import (
    ExpectedDeadLetter,
    compare_dead_letters,
    group_rows,
)
from demo.errors import DemoConfigError
from demo.generate import GeneratorConfig
from demo.model import Tables, decode_row
from demo.workload import Transaction, Workload, WorkloadConfig, partition_for

DEMO_TARGETS = Targets(
    "demo", frozenset({"orders", "order_items"}), frozenset({"_cdc_progress", "_cdc_dead_letter"})
)
pytestmark = pytest.mark.unit

TOPIC = "orders-cdc"
MAX_TXN_ROWS = 12
TXN_TIMEOUT_MS = 60_000
ALL_KINDS: Mapping[BadInputKind, int] = dict.fromkeys(BadInputKind, 2)


def codec(encoding: Encoding) -> CodecSettings:
    if encoding == "confluent":
        return CodecSettings(encoding="confluent", registry_schemas={1: str(EVENT_SCHEMA_PATH)})
    return CodecSettings(encoding=encoding)


@dataclass
class Sent:
    """The stream as a broker stores it."""

    records: dict[int, list[SourceRecord]]
    good: list[Transaction]
    bad: list[tuple[BadTransaction, int]]  # with the offset of its first record
    workload: Workload


def send(
    config: WorkloadConfig,
    bad_inputs: Mapping[BadInputKind, int],
    encoding: Encoding = "json",
    max_txn_rows: int | None = MAX_TXN_ROWS,
) -> Sent:
    clock = itertools.count(1_700_000_000_000, 7)
    workload = Workload(config, clock=lambda: next(clock))
    plan = BadInputPlan(
        counts=bad_inputs,
        partitions=config.partitions,
        seed=config.seed,
        slots=config.orders,
        database=config.database,
        max_txn_rows=max_txn_rows,
        max_items=config.max_items,
    )
    records: dict[int, list[SourceRecord]] = defaultdict(list)
    good: list[Transaction] = []
    bad: list[tuple[BadTransaction, int]] = []
    for txn in interleave(workload.transactions(), build(plan, ts_ms=1)):
        part = records[txn.partition]
        if isinstance(txn, BadTransaction):
            bad.append((txn, len(part)))
            values = [encode_record(r, encoding) for r in txn.records]
        else:
            good.append(txn)
            values = [encode_record(e, encoding) for e in txn.events]
        for value in values:
            part.append(SourceRecord(TOPIC, txn.partition, len(part), value))
    return Sent(dict(records), good, bad, workload)


def assemble(
    sent: Sent, encoding: Encoding, seed: int
) -> tuple[list[OutputRow], list[PartitionState]]:
    """Every partition through the assembler in random batches; outputs and final states."""
    assembler = TransactionAssembler(
        AssemblerSettings(
            codec=codec(encoding),
            max_txn_rows=MAX_TXN_ROWS,
            txn_timeout_ms=TXN_TIMEOUT_MS,
            targets=DEMO_TARGETS,
        )
    )
    rng = random.Random(seed)
    outputs: list[OutputRow] = []
    states: list[PartitionState] = []
    for partition, recs in sorted(sent.records.items()):
        state: PartitionState | None = None
        i = 0
        while i < len(recs):
            n = rng.randint(1, 25)
            chunk = recs[i : i + n]
            rng.shuffle(chunk)  # a batch's pandas chunks come in any order
            step = assembler.process(state, chunk, now_ms=1_000)
            outputs += step.outputs
            state = PartitionState.from_tuple(step.state.to_tuple())
            i += n
        assert state is not None
        assert state.partition == partition
        # The timeout fires later (processing time), for the never-ending transactions only.
        step = assembler.expire(state, now_ms=1_000 + TXN_TIMEOUT_MS)
        outputs += step.outputs
        states.append(step.state)
    return outputs, states


def check_stream(sent: Sent, encoding: Encoding, seed: int = 0) -> None:
    outputs, states = assemble(sent, encoding, seed)
    # Every partition ends idle, nothing half-open, except that a never-ending transaction
    # leaves its partition rejecting whatever else of it might come.
    timed_out = {b.partition: b.txn_id for b, _ in sent.bad if b.kind is BadInputKind.TXN_TIMEOUT}
    for s in states:
        if s.partition in timed_out:
            assert (s.status, s.txn_id) == (TxnStatus.REJECTING, timed_out[s.partition])
        else:
            assert s.status is TxnStatus.IDLE

    # Dead letters: exactly the bad transactions, by kind, coordinates and record count.
    rejects = [o for o in outputs if o.kind == KIND_REJECT]
    report = group_rows(
        (o.topic, o.partition, o.first_offset, o.row_seq, o.txn_id, o.reason) for o in rejects
    )
    got = {(t.kind, t.coordinates, t.records, t.txn_id) for t in report.transactions}
    want = {
        (b.kind.value, (TOPIC, b.partition, first), b.rejected_records, b.txn_id)
        for b, first in sent.bad
    }
    assert got == want
    expected = [
        ExpectedDeadLetter(b.kind.value, TOPIC, b.partition, first, b.rejected_records)
        for b, first in sent.bad
    ]
    assert compare_dead_letters(report, expected, [TOPIC]).ok

    # Good transactions: each emitted once, whole, in order; no row of a bad one.
    rows_by_txn: dict[str | None, list[OutputRow]] = defaultdict(list)
    for o in outputs:
        if o.kind == KIND_ROW:
            rows_by_txn[o.txn_id].append(o)
    emitted_good: dict[str | None, Transaction] = {
        t.txn_id: t for t in sent.good if t.data_events > 0
    }
    assert set(rows_by_txn) == set(emitted_good)
    for txn_id, rows in rows_by_txn.items():
        data = [e for e in emitted_good[txn_id].events if e.type == "DATA"]
        assert [(r.table, r.op, r.row) for r in rows] == [(e.table, e.op, e.row) for e in data]
        assert [r.row_seq for r in rows] == list(range(len(data)))
        assert [r.is_txn_end for r in rows] == [False] * (len(data) - 1) + [True]
    # Numbering is gap-free per partition: rejected transactions consume no txn_seq.
    seqs: dict[int, list[int]] = defaultdict(list)
    for o in outputs:
        if o.kind == KIND_ROW and o.is_txn_end:
            assert o.txn_seq is not None
            seqs[o.partition].append(o.txn_seq)
    assert all(s == list(range(1, len(s) + 1)) for s in seqs.values())

    # Applying the emitted rows gives exactly the ground truth.
    tables = Tables()
    for o in outputs:
        if o.kind == KIND_ROW:
            assert o.table is not None
            assert o.row is not None
            tables.apply(o.table, o.op or "UPSERT", decode_row(o.row))
    assert tables == Tables.from_rows(sent.workload.final_rows())


@pytest.mark.parametrize("encoding", ["json", "avro", "confluent"])
def test_every_kind_is_dead_lettered_exactly_and_good_data_is_intact(encoding: Encoding) -> None:
    config = WorkloadConfig(orders=60, partitions=3, seed=11, max_items=4)
    sent = send(config, ALL_KINDS, encoding)
    assert len(sent.bad) == 2 * len(BadInputKind)
    assert {b.kind for b, _ in sent.bad} == set(BadInputKind)
    check_stream(sent, encoding, seed=3)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    orders=st.integers(0, 25),
    partitions=st.integers(1, 4),
    counts=st.dictionaries(st.sampled_from(list(BadInputKind)), st.integers(0, 3)),
    batch_seed=st.integers(0, 1000),
)
def test_any_mix_is_accounted_exactly(
    seed: int,
    orders: int,
    partitions: int,
    counts: dict[BadInputKind, int],
    batch_seed: int,
) -> None:
    config = WorkloadConfig(orders=orders, partitions=partitions, seed=seed, max_items=3)
    timeouts = min(counts.get(BadInputKind.TXN_TIMEOUT, 0), partitions)
    counts = {**counts, BadInputKind.TXN_TIMEOUT: timeouts}
    check_stream(send(config, counts), "json", seed=batch_seed)


def test_bad_transactions_use_their_own_ids_and_keep_key_partitioning() -> None:
    config = WorkloadConfig(orders=30, partitions=4, seed=2)
    sent = send(config, ALL_KINDS)
    for b, _ in sent.bad:
        assert b.order_id >= BAD_ID_BASE
        assert b.partition == partition_for(b.order_id, 4)
        assert b.key == str(b.order_id).encode()
    assert len({b.order_id for b, _ in sent.bad}) == len(sent.bad)
    assert all(t.order_id < BAD_ID_BASE for t in sent.good)
    assert len({b.txn_id for b, _ in sent.bad} | {t.txn_id for t in sent.good}) == len(
        sent.bad
    ) + len(sent.good)
    # Interleaved: bad ones do not all come at the end.
    order = [isinstance(t, BadTransaction) for t in interleave(sent.good, build_plan(config))]
    assert not all(order[-len(sent.bad) :])


def build_plan(config: WorkloadConfig, seed: int | None = None) -> list[tuple[int, BadTransaction]]:
    return build(
        BadInputPlan(
            counts=ALL_KINDS,
            partitions=config.partitions,
            seed=config.seed if seed is None else seed,
            slots=config.orders,
            max_txn_rows=MAX_TXN_ROWS,
        ),
        ts_ms=1,
    )


def test_deterministic_by_seed() -> None:
    config = WorkloadConfig(orders=30, partitions=4, seed=2)
    assert build_plan(config) == build_plan(config)
    assert build_plan(config) != build_plan(config, seed=3)
    a, b = send(config, ALL_KINDS), send(config, ALL_KINDS)
    assert a.records == b.records


def test_good_transactions_do_not_depend_on_injection() -> None:
    config = WorkloadConfig(orders=30, partitions=4, seed=2)
    clean, dirty = send(config, {}), send(config, ALL_KINDS)
    assert clean.good == dirty.good
    assert clean.workload.final_rows() == dirty.workload.final_rows()
    assert not clean.bad


@pytest.mark.parametrize("encoding", ["json", "avro", "confluent"])
def test_the_undecodable_value_decodes_in_no_encoding(encoding: Encoding) -> None:
    with pytest.raises(DecodeError):
        make_decoder(codec(encoding)).decode(UNDECODABLE_VALUE)


def test_parse_bad_input() -> None:
    assert parse_bad_input("undecodable") == (BadInputKind.UNDECODABLE, 1)
    assert parse_bad_input("txn-too-large:3") == (BadInputKind.TXN_TOO_LARGE, 3)
    assert parse_bad_input("TXN-TIMEOUT:2") == (BadInputKind.TXN_TIMEOUT, 2)
    with pytest.raises(DemoConfigError, match="unknown kind"):
        parse_bad_input("txn-late")
    with pytest.raises(DemoConfigError, match="positive integer"):
        parse_bad_input("no-begin:0")
    with pytest.raises(DemoConfigError, match="positive integer"):
        parse_bad_input("no-begin:x")


def test_never_ending_transactions_come_last_one_per_partition() -> None:
    config = WorkloadConfig(orders=20, partitions=3, seed=4)
    sent = send(config, {BadInputKind.TXN_TIMEOUT: 3, BadInputKind.NO_BEGIN: 3})
    for b, first in sent.bad:
        if b.kind is BadInputKind.TXN_TIMEOUT:
            assert first + len(b.records) == len(sent.records[b.partition])
            assert all(not isinstance(r, bytes) and r.type != "TXN_END" for r in b.records)
    assert sorted(b.partition for b, _ in sent.bad if b.kind is BadInputKind.TXN_TIMEOUT) == [
        0,
        1,
        2,
    ]
    with pytest.raises(DemoConfigError, match="at most one per partition"):
        send(config, {BadInputKind.TXN_TIMEOUT: 4})


def test_txn_too_large_needs_a_limit_above_good_transactions() -> None:
    workload = WorkloadConfig(orders=1, max_items=5)
    large = {BadInputKind.TXN_TOO_LARGE: 1}
    with pytest.raises(DemoConfigError, match="needs --max-txn-rows"):
        GeneratorConfig("b:1", "t", workload, bad_inputs=large)
    with pytest.raises(DemoConfigError, match="below 10"):
        GeneratorConfig("b:1", "t", workload, bad_inputs=large, max_txn_rows=9)
    GeneratorConfig("b:1", "t", workload, bad_inputs=large, max_txn_rows=max_good_txn_rows(5))


def test_good_transactions_stay_within_the_bound() -> None:
    config = WorkloadConfig(orders=300, partitions=1, seed=9, max_items=4, update_ratio=0.5)
    _, txns = (w := Workload(config, clock=lambda: 0)), list(w.transactions())
    assert max(t.data_events for t in txns) <= max_good_txn_rows(4)


def test_bad_input_kinds_are_exactly_the_assembler_violations() -> None:
    # The generator must be able to provoke every violation the assembler knows, and name
    # each the way the dead-letter reasons do.
    from assembler.settings import Violation

    assert [k.value for k in BadInputKind] == [v.value for v in Violation]
