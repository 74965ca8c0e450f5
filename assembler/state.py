"""Per-partition assembler state, as a flat tuple of scalars for ``applyInPandasWithState``.

Spark facts (DESIGN.md §7): ARRAY or MAP fields in the state schema crash the Python worker,
so the state is scalars plus one BINARY field holding the open transaction's buffered rows
(:mod:`assembler.buffer`). ``to_tuple`` writes no nulls (sentinels instead), so the state
never depends on how Spark round-trips null scalars.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from assembler.exceptions import AssemblerError
from assembler.output import NONE_OPEN, OutputRow, status_row

STATE_VERSION = 1
"""Bumped whenever the tuple layout or the buffer encoding changes."""

STATE_FIELDS: tuple[tuple[str, str], ...] = (
    ("version", "int"),
    ("topic", "string"),
    ("partition", "int"),
    ("last_offset", "bigint"),
    ("txn_seq", "bigint"),
    ("status", "string"),
    ("txn_id", "string"),
    ("txn_first_offset", "bigint"),
    ("txn_opened_at_ms", "bigint"),
    ("txn_begin_ts_ms", "bigint"),
    ("txn_last_ts_ms", "bigint"),
    ("txn_rows", "int"),
    ("txn_bytes", "bigint"),
    ("txn_buffer", "binary"),
    ("reject_reason", "string"),
)
"""(name, Spark DDL type) of the state; only scalars, STRING and BINARY (no ARRAY/MAP)."""

_NO_OFFSET = -1
NO_TS = -(2**63)  # Long.MIN_VALUE: no real epoch-ms timestamp


def state_ddl() -> str:
    """Spark DDL string of the state schema."""
    return ", ".join(f"`{name}` {ddl}" for name, ddl in STATE_FIELDS)


class TxnStatus(str, Enum):  # noqa: UP042 -- stored by value; str mixin keeps comparisons cheap
    """What the partition is doing between transactions."""

    IDLE = "IDLE"
    """No transaction open; the next event should be a TXN_BEGIN."""
    OPEN = "OPEN"
    """A transaction is open; its DATA events are buffered in ``txn_buffer``."""
    REJECTING = "REJECTING"
    """A transaction was rejected; its remaining events (until its END) are rejected too."""


class StateError(AssemblerError):
    """The stored state cannot be read (unknown version, corrupt layout)."""


@dataclass
class PartitionState:
    """Everything the assembler remembers about one (topic, partition).

    Attributes:
        topic: Kafka topic.
        partition: Kafka partition.
        last_offset: last consumed offset (-1 = none); anything at or below is a replay.
        txn_seq: sequence number of the last emitted transaction (0 = none yet).
        status: see :class:`TxnStatus`.
        txn_id: id of the open (OPEN) or rejected (REJECTING) transaction.
        txn_first_offset: its first offset (BEGIN, or the first record seen when rejecting).
        txn_opened_at_ms: processing time its BEGIN was applied (for ``txn-timeout``).
        txn_begin_ts_ms: ``source_ts_ms`` of its BEGIN.
        txn_last_ts_ms: latest ``source_ts_ms`` seen on its BEGIN/DATA events.
        txn_rows: OPEN: buffered DATA events; REJECTING: reject rows emitted so far.
        txn_bytes: size of ``txn_buffer`` (what ``max-txn-bytes`` bounds).
        txn_buffer: buffered DATA events, :mod:`assembler.buffer` encoding.
        reject_reason: REJECTING: the reason given to the transaction's remaining events.
    """

    topic: str
    partition: int
    last_offset: int = _NO_OFFSET
    txn_seq: int = 0
    status: TxnStatus = TxnStatus.IDLE
    txn_id: str | None = None
    txn_first_offset: int = _NO_OFFSET
    txn_opened_at_ms: int | None = None
    txn_begin_ts_ms: int | None = None
    txn_last_ts_ms: int | None = None
    txn_rows: int = 0
    txn_bytes: int = 0
    txn_buffer: bytes = b""
    reject_reason: str | None = None

    def open_status(self) -> OutputRow:
        """The partition's STATUS row: its open transaction, if one is (a rejecting one is not)."""
        if self.status is not TxnStatus.OPEN:
            return status_row(self.topic, self.partition, None, NONE_OPEN, None)
        return status_row(
            self.topic, self.partition, self.txn_id, self.txn_first_offset, self.txn_opened_at_ms
        )

    def to_tuple(
        self,
    ) -> tuple[int, str, int, int, int, str, str, int, int, int, int, int, int, bytes, str]:
        """The state as a tuple in :data:`STATE_FIELDS` order, without nulls."""
        return (
            STATE_VERSION,
            self.topic,
            self.partition,
            self.last_offset,
            self.txn_seq,
            self.status.value,
            self.txn_id or "",
            self.txn_first_offset,
            NO_TS if self.txn_opened_at_ms is None else self.txn_opened_at_ms,
            NO_TS if self.txn_begin_ts_ms is None else self.txn_begin_ts_ms,
            NO_TS if self.txn_last_ts_ms is None else self.txn_last_ts_ms,
            self.txn_rows,
            self.txn_bytes,
            bytes(self.txn_buffer),
            self.reject_reason or "",
        )

    @classmethod
    def from_tuple(cls, t: Sequence[Any]) -> PartitionState:
        """Rebuild the state from :meth:`to_tuple` output (or a Spark ``Row`` of it).

        Raises:
            StateError: the tuple has another length or version (a checkpoint written by an
                incompatible release: start from a new checkpoint or migrate it).
        """
        if len(t) != len(STATE_FIELDS) or t[0] != STATE_VERSION:
            msg = (
                f"unreadable assembler state (version {t[0] if len(t) else '?'}, "
                f"{len(t)} fields; expected version {STATE_VERSION}, {len(STATE_FIELDS)} "
                "fields): the checkpoint was written by an incompatible release; "
                "use a new checkpoint location or the release that wrote it"
            )
            raise StateError(msg)

        def ts(v: Any) -> int | None:
            return None if v is None or v == NO_TS else int(v)

        try:
            return cls(
                topic=str(t[1]),
                partition=int(t[2]),
                last_offset=int(t[3]),
                txn_seq=int(t[4]),
                status=TxnStatus(t[5]),
                txn_id=t[6] or None,
                txn_first_offset=int(t[7]),
                txn_opened_at_ms=ts(t[8]),
                txn_begin_ts_ms=ts(t[9]),
                txn_last_ts_ms=ts(t[10]),
                txn_rows=int(t[11]),
                txn_bytes=int(t[12]),
                txn_buffer=bytes(t[13]) if t[13] is not None else b"",
                reject_reason=t[14] or None,
            )
        except (TypeError, ValueError) as e:
            msg = f"corrupt assembler state for topic={t[1]} partition={t[2]}: {e}"
            raise StateError(msg) from e
