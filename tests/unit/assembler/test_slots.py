"""A slot's state holds many partitions: the same outputs and states as one group each.

The reference is what the adapter did with one ``applyInPandasWithState`` group per partition:
``process`` for a partition with records, ``expire`` for a quiet one once Spark's timeout fired
(its deadline strictly before the batch's time).
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assembler import (
    AssemblerSettings,
    CodecSettings,
    OutputRow,
    PartitionState,
    SourceRecord,
    TransactionAssembler,
)
from assembler.events import EVENT_SCHEMA_PATH
from assembler.slots import SlotAssembler, decode, encode
from assembler.state import StateError, TxnStatus
from tests.unit.assembler.builders import TOPIC, begin, data, end, records, roundtrip
from tests.unit.assembler.test_properties import SETTINGS, partition_streams, split_points

pytestmark = pytest.mark.unit

TIMEOUT_MS = 1_000


@SETTINGS
@given(st.data())
def test_a_slot_behaves_like_one_group_per_partition(data: st.DataObject) -> None:
    n_parts = data.draw(st.integers(1, 4))
    parts = [data.draw(partition_streams(i, "json")) for i in range(n_parts)]
    rnd = data.draw(st.randoms(use_true_random=False))
    core = TransactionAssembler(AssemblerSettings(txn_timeout_ms=TIMEOUT_MS))
    slot = SlotAssembler(core)

    pieces = {p.number: split_points(data.draw, len(p.records)) for p in parts}
    n_batches = max((len(v) for v in pieces.values()), default=0) + 2  # then quiet batches
    groups: dict[int, tuple[PartitionState, int | None]] = {}
    entries: bytes | None = None
    now = 0
    for b in range(n_batches):
        now += data.draw(st.sampled_from([0, 1, 400, TIMEOUT_MS, 3 * TIMEOUT_MS]))
        batch = []
        expected: list[OutputRow] = []
        processed: set[int] = set()
        for p in parts:
            lo, hi = pieces[p.number][b] if b < len(pieces[p.number]) else (0, 0)
            recs = p.records[lo:hi]
            batch += recs
            known = groups.get(p.number)
            if recs:
                step = core.process(known[0] if known else None, recs, now)
            elif known is not None and known[1] is not None and known[1] < now:
                step = core.expire(known[0], now)
            else:
                continue
            expected += step.outputs
            processed.add(p.number)
            groups[p.number] = (roundtrip(step.state), step.timeout_at_ms)
        rnd.shuffle(batch)
        got = slot.process(entries, batch, now)
        assert got.outputs == expected
        entries = bytes(got.entries)  # what the state store keeps
        stored = decode(entries)
        assert {k[1]: v[0] for k, v in stored.items()} == {k: v[0] for k, v in groups.items()}
        deadlines = [d for _, d in groups.values() if d is not None]
        assert got.timeout_at_ms == (min(deadlines) if deadlines else None)
        assert got.partitions == len(groups)
        # A STATUS row for each partition processed, and for each quiet one holding a
        # transaction open (read from its entry's header): what its state says.
        status = {(r.topic, r.partition): r for r in got.status}
        assert len(status) == len(got.status)
        assert status == {
            (state.topic, number): state.open_status()
            for number, (state, _) in groups.items()
            if number in processed or state.status is TxnStatus.OPEN
        }


def test_a_quiet_partitions_overdue_transaction_expires_while_another_has_records() -> None:
    slot = SlotAssembler(TransactionAssembler(AssemblerSettings(txn_timeout_ms=TIMEOUT_MS)))
    first = slot.process(None, records([begin("a"), data("a")], partition=0), now_ms=0)
    assert first.timeout_at_ms == TIMEOUT_MS
    # Partition 1 has records at a time partition 0's transaction is overdue: it is rejected.
    step = slot.process(first.entries, records([begin("b")], partition=1), TIMEOUT_MS + 1)
    rejected = [r for r in step.outputs if r.partition == 0]
    assert {r.kind for r in rejected} == {"REJECT"}
    assert {r.txn_id for r in rejected} == {"a"}
    assert all(r.reason.startswith("txn-timeout") for r in rejected if r.reason)
    states = decode(step.entries)
    assert states[(TOPIC, 0)][0].status is not TxnStatus.OPEN
    assert states[(TOPIC, 1)][0].status is TxnStatus.OPEN
    assert step.timeout_at_ms == 2 * TIMEOUT_MS + 1


def test_the_state_value_round_trips_every_field() -> None:
    states = {
        ("t", 0): (PartitionState("t", 0), -1),
        ("tópico", 7): (
            PartitionState(
                "tópico", 7, last_offset=99, txn_seq=4, status=TxnStatus.OPEN, txn_id="tx-ü",
                txn_first_offset=90, txn_opened_at_ms=5, txn_begin_ts_ms=None,
                txn_last_ts_ms=-3, txn_rows=2, txn_bytes=3, txn_buffer=b"\x00\xff\x01",
            ),
            1_005,
        ),
        ("t", 1): (
            PartitionState(
                "t", 1, last_offset=5, status=TxnStatus.REJECTING, txn_id="x",
                reject_reason="txn-timeout: late",
            ),
            -1,
        ),
    }  # fmt: skip
    assert decode(encode(states)) == states
    assert decode(b"") == {}


def test_quiet_partitions_are_copied_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    # A slot of many partitions, few of them active in a batch (tables that rarely change):
    # the batch must cost the active ones, not a decode and re-encode of every entry.
    slot = SlotAssembler(TransactionAssembler(AssemblerSettings(txn_timeout_ms=TIMEOUT_MS)))
    quiet = [
        r for p in range(1, 101) for r in records([begin(f"q{p}"), data(f"q{p}")], partition=p)
    ]
    first = slot.process(None, quiet, now_ms=0)
    decoded: list[int] = []
    real = PartitionState.from_tuple.__func__  # type: ignore[attr-defined]

    def counting(cls: type[PartitionState], t: object) -> PartitionState:
        decoded.append(1)
        return real(cls, t)

    monkeypatch.setattr(PartitionState, "from_tuple", classmethod(counting))
    step = slot.process(first.entries, records([begin("a"), data("a")], partition=0), now_ms=1)
    assert len(decoded) <= 1  # partition 0 is new: nothing stored to decode
    assert step.entries.endswith(first.entries)  # the quiet entries, byte for byte
    assert step.partitions == 101
    assert step.timeout_at_ms == TIMEOUT_MS  # the quiet ones' deadline, read from headers
    monkeypatch.undo()
    states = decode(step.entries)
    assert states[(TOPIC, 0)][0].txn_id == "a"
    assert all(states[(TOPIC, p)][0].txn_id == f"q{p}" for p in range(1, 101))


@pytest.mark.parametrize("cut", [1, 10, 60, -1])
def test_a_damaged_state_value_is_a_state_error_not_a_wrong_state(cut: int) -> None:
    value = encode({("t", 0): (PartitionState("t", 0, txn_id="abc", txn_buffer=b"xyz"), -1)})
    with pytest.raises(StateError, match="corrupt assembler slot state"):
        decode(value[:cut])


def test_an_unknown_status_is_a_state_error() -> None:
    value = bytearray(encode({("t", 0): (PartitionState("t", 0), -1)}))
    value[4 + 8 + 64] = 9  # the status byte
    with pytest.raises(StateError):
        decode(bytes(value))


def test_outputs_do_not_depend_on_the_order_records_arrive_in() -> None:
    slot = SlotAssembler(TransactionAssembler(AssemblerSettings()))
    recs = [
        *records([begin("a"), data("a", 1), data("a", 2), end("a", 2)], partition=0),
        *records([begin("b"), data("b", 3), end("b", 1)], partition=1),
    ]
    want = slot.process(None, recs, 0).outputs
    for seed in range(5):
        shuffled = list(recs)
        random.Random(seed).shuffle(shuffled)
        assert slot.process(None, shuffled, 0).outputs == want


TS_MS = 1_704_067_200_123  # b"\xf6\xd1\x8f\xa5\x98\x63" as an Avro long


@pytest.mark.parametrize(
    ("writer_ts", "value_ts", "kinds"),
    [
        # A timestamp-millis writer field (Debezium's): the long is kept, the BEGIN stored.
        ({"type": "long", "logicalType": "timestamp-millis"}, b"\xf6\xd1\x8f\xa5\x98\x63", []),
        # A 10-byte varint of 2**63, beyond a long: rejected with its location, not a crash.
        ("long", b"\x80" * 9 + b"\x02", ["REJECT"]),
    ],
)
def test_an_avro_number_the_state_cannot_hold_never_reaches_it(
    writer_ts: object, value_ts: bytes, kinds: list[str]
) -> None:
    """Both failed the slot's state write (struct.error, no location) on every replay."""
    writer = json.loads(EVENT_SCHEMA_PATH.read_text())
    writer["fields"][6]["type"] = ["null", writer_ts]
    codec = CodecSettings(encoding="confluent", registry_schemas={7: json.dumps(writer)})
    slot = SlotAssembler(TransactionAssembler(AssemblerSettings(codec=codec)))
    value = b"\x00\x00\x00\x00\x07\x04t1\x12TXN_BEGIN\x00\x00\x00\x00\x02" + value_ts + b"\x00"
    step = slot.process(None, [SourceRecord(TOPIC, 3, 41, value)], now_ms=1)
    assert [(o.kind, o.partition, o.last_offset) for o in step.outputs] == [
        (k, 3, 41) for k in kinds
    ]
    state = decode(bytes(step.entries))[(TOPIC, 3)][0]
    if kinds:
        assert "cannot be decoded: field 'source_ts_ms' out of range" in str(step.outputs[0].reason)
    else:
        assert (state.status, state.txn_begin_ts_ms) == (TxnStatus.OPEN, TS_MS)
