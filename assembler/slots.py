"""Many Kafka partitions in one state value: the assembler's state per state-store slot.

Spark pays a fixed cost for every group of ``applyInPandasWithState`` and micro-batch (a
state-store read and write, pandas frames, a Python call): ~5 ms. With one group per Kafka
partition that cost grows with the partitions, not with the rows (docs/scaling.md). So the
pipeline groups by *slot*, one per state-store partition, and a slot's state holds the
:class:`~assembler.state.PartitionState` of every Kafka partition mapped to it. The core is
unchanged: :class:`SlotAssembler` runs it once per partition that has records, and expires
the quiet partitions whose transaction is overdue.

A slot's state is one BINARY value (DESIGN.md §7: no ARRAY or MAP state fields), a sequence
of entries sorted by (topic, partition), each::

    partition:int32  deadline:int64  8 x int64 (the state's integers)  status:uint8
    len(topic):uint16  len(txn_id):uint32  len(reject_reason):uint32  len(buffer):uint32
    topic  txn_id  reject_reason  buffer

``deadline`` is the processing time the partition's open transaction times out (-1: none),
so the slot's timeout is the earliest one without decoding the states. A batch decodes only
the entries of partitions with records or overdue; the others are copied as they are, so a
slot of many quiet partitions (tables that rarely change) costs little more than its active
ones.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from assembler.machine import TransactionAssembler
from assembler.output import OutputRow, status_row
from assembler.records import SourceRecord
from assembler.state import NO_TS, STATE_VERSION, PartitionState, StateError

SLOT_STATE_VERSION = 1
"""Bumped whenever the slot state's layout changes (the entry layout, or ``STATE_VERSION``)."""

SLOT_STATE_FIELDS: tuple[tuple[str, str], ...] = (
    ("version", "int"),
    ("partitions", "int"),
    ("entries", "binary"),
)
"""(name, Spark DDL type) of a slot's state: the layout version, the entry count, the entries."""

_ENTRY = struct.Struct(">iq8qBHIII")
_STATUS = ("IDLE", "OPEN", "REJECTING")
_STATUS_CODE = {name: code for code, name in enumerate(_STATUS)}
_OPEN = _STATUS_CODE["OPEN"]
_NO_DEADLINE = -1

Key = tuple[str, int]


@dataclass(frozen=True)
class SlotStep:
    """The result of one call for a slot: what to emit, what to store, when to wake.

    Attributes:
        outputs: the rows to emit, partition by partition (sorted by topic and partition), in
            offset order within each.
        partitions: the number of Kafka partitions the slot's state now holds.
        entries: the slot's new state (:func:`encode`).
        timeout_at_ms: the earliest deadline of an open transaction in the slot; ``None``
            when none is open.
        status: a STATUS row for each partition the call processed and each quiet one with a
            transaction open (for the metrics; :func:`assembler.output.status_row`).
    """

    outputs: list[OutputRow]
    partitions: int
    entries: bytes
    timeout_at_ms: int | None
    status: list[OutputRow] = field(default_factory=list)


class SlotAssembler:
    """The per-partition core applied to every partition of one slot (executor side)."""

    def __init__(self, core: TransactionAssembler) -> None:
        self._core = core

    def process(
        self,
        entries: bytes | None,
        records: Iterable[SourceRecord],
        now_ms: int,
    ) -> SlotStep:
        """Apply a batch's records of any partitions of the slot, then expire quiet ones.

        A partition with records is processed (the core never times out a partition whose
        records are still arriving); one without records whose deadline is before ``now_ms``
        gets :meth:`TransactionAssembler.expire`, as its own group's timeout would have (Spark
        times a group out once its timeout is strictly before the batch's time). The other
        partitions' entries are copied into the new value as they are, never decoded: a slot
        holding many quiet partitions costs a header read and a copy for each of them.

        Args:
            entries: the slot's stored state; ``None`` for a slot seen the first time.
            records: this call's records, any partitions and any order.
            now_ms: Spark's batch processing time (the same when a batch is re-run).

        Raises:
            AssemblyFailed: a violation under policy ``fail``.
            StateError: the stored state is not readable by this release.
        """
        value = entries or b""
        stored = index(value)
        by_key: dict[Key, list[SourceRecord]] = {}
        for rec in records:
            key = (rec.topic, rec.partition)
            batch = by_key.get(key)
            if batch is None:
                by_key[key] = [rec]
            else:
                batch.append(rec)
        outputs: list[OutputRow] = []
        status: list[OutputRow] = []
        parts: list[bytes] = []
        deadlines: list[int] = []
        keys = stored.keys() | by_key.keys()
        for key in sorted(keys):
            recs = by_key.get(key)
            known = stored.get(key)
            if recs is not None:
                before = _entry_state(value, known) if known else None
                step = self._core.process(before, recs, now_ms)
            elif known is not None and 0 <= known.deadline < now_ms:
                step = self._core.expire(_entry_state(value, known), now_ms)
            else:
                if known is not None:  # quiet and not overdue: its bytes, unchanged
                    parts.append(value[known.start : known.end])
                    deadlines.append(known.deadline)
                    if known.header[10] == _OPEN:  # said every call: the driver may be new
                        status.append(_open_status(value, key, known))
                continue
            outputs.extend(step.outputs)
            status.append(step.state.open_status())
            deadline = _NO_DEADLINE if step.timeout_at_ms is None else step.timeout_at_ms
            parts += _entry_parts(step.state, deadline)
            deadlines.append(deadline)
        open_ones = [d for d in deadlines if d != _NO_DEADLINE]
        return SlotStep(
            outputs=outputs,
            partitions=len(keys),
            entries=b"".join(parts),
            timeout_at_ms=min(open_ones) if open_ones else None,
            status=status,
        )


class Entry(NamedTuple):
    """Where one partition's entry lies in a slot's value, its deadline and its header."""

    partition: int
    deadline: int
    start: int
    end: int
    header: tuple[int, ...]  # the fields of ``_ENTRY``


def encode(states: dict[Key, tuple[PartitionState, int]]) -> bytes:
    """The slot's state value: every partition's state and deadline, sorted by key."""
    parts: list[bytes] = []
    for key in sorted(states):
        parts += _entry_parts(*states[key])
    return b"".join(parts)


def decode(entries: bytes) -> dict[Key, tuple[PartitionState, int]]:
    """Every partition's state and deadline from a slot's state value (:func:`encode`).

    Raises:
        StateError: the value is truncated or holds an unknown status.
    """
    return {
        key: (_entry_state(entries, entry), entry.deadline) for key, entry in index(entries).items()
    }


def index(entries: bytes) -> dict[Key, Entry]:
    """Every partition's entry in a slot's state value, from the headers alone.

    Raises:
        StateError: the value is truncated or holds an unknown status.
    """
    out: dict[Key, Entry] = {}
    topics: dict[bytes, str] = {}  # a slot's entries share a few topics
    pos, end = 0, len(entries)
    try:
        while pos < end:
            start = pos
            fields = _ENTRY.unpack_from(entries, pos)
            if fields[10] >= len(_STATUS):
                msg = f"unknown status {fields[10]}"
                raise IndexError(msg)
            pos += _ENTRY.size
            raw = entries[pos : pos + fields[11]]
            topic = topics.get(raw)
            if topic is None:
                topic = topics[raw] = raw.decode()
            pos += fields[11] + fields[12] + fields[13] + fields[14]
            if pos > end:
                msg = f"an entry runs past the end of the value (byte {pos} > {end})"
                raise IndexError(msg)
            # tuple.__new__: the named tuple's Python __new__ would be a third of the loop.
            entry = (fields[0], fields[1], start, pos, fields)
            out[(topic, fields[0])] = tuple.__new__(Entry, entry)
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise _corrupt(end, pos, e) from e
    return out


def _entry_state(entries: bytes, entry: Entry) -> PartitionState:
    """The partition state of one entry that :func:`index` found."""
    fields = entry.header
    numbers, status = fields[2:10], fields[10]
    try:
        texts: list[bytes] = []
        pos = entry.start + _ENTRY.size
        for n in fields[11:]:
            texts.append(entries[pos : pos + n])
            pos += n
        topic, txn_id, reason = (b.decode() for b in texts[:3])
    except UnicodeDecodeError as e:
        raise _corrupt(len(entries), entry.start, e) from e
    last_offset, txn_seq, first, opened, begin, last_ts, rows, nbytes = numbers
    row = [STATE_VERSION, topic, entry.partition, last_offset, txn_seq, _STATUS[status]]
    row += [txn_id, first, opened, begin, last_ts, rows, nbytes, texts[3], reason]
    return PartitionState.from_tuple(row)


def _open_status(entries: bytes, key: Key, entry: Entry) -> OutputRow:
    """The STATUS row of a quiet partition with a transaction open, from its entry's header."""
    fields = entry.header
    at = entry.start + _ENTRY.size + fields[11]
    txn_id = entries[at : at + fields[12]].decode(errors="replace") or None
    opened = fields[5]
    return status_row(key[0], key[1], txn_id, fields[4], None if opened == NO_TS else opened)


def _entry_parts(st: PartitionState, deadline: int) -> list[bytes]:
    """One entry of a slot's value (the module docstring's layout), in pieces to join."""
    t = st.to_tuple()
    topic, txn_id, reason, buf = t[1].encode(), t[6].encode(), t[14].encode(), t[13]
    numbers = (t[3], t[4], t[7], t[8], t[9], t[10], t[11], t[12])
    lengths = (len(topic), len(txn_id), len(reason), len(buf))
    header = _ENTRY.pack(t[2], deadline, *numbers, _STATUS_CODE[t[5]], *lengths)
    return [header, topic, txn_id, reason, buf]


def _corrupt(size: int, pos: int, cause: Exception) -> StateError:
    return StateError(
        f"corrupt assembler slot state ({size} bytes, stopped at byte {pos}): {cause}; the "
        "checkpoint was damaged or written by an incompatible release"
    )
