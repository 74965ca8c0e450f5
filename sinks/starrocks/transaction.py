"""The sink's view of one StarRocks transaction, with explicit, guarded states.

Driver-side bookkeeping only: the server's own status (:class:`LoadState`) is authoritative;
this object makes sure the sink never, say, commits a label it has not finished loading or
begins a new attempt while the old one is not known ABORTED.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from sinks.exceptions import TransactionStateError
from sinks.starrocks.protocol import LoadState


class TxnStatus(enum.StrEnum):
    """Lifecycle of a sink transaction (one label)."""

    NEW = "NEW"  # label chosen, nothing sent
    OPEN = "OPEN"  # begin answered OK
    LOADED = "LOADED"  # every load answered OK (single-table: also prepared)
    PREPARED = "PREPARED"  # single-table prepare answered OK (survives a crash)
    COMMITTING = "COMMITTING"  # commit sent, outcome not yet known
    COMMITTED = "COMMITTED"  # server says COMMITTED/VISIBLE
    ABORTED = "ABORTED"  # server says ABORTED (or rollback answered OK)


_TERMINAL = frozenset({TxnStatus.COMMITTED, TxnStatus.ABORTED})


@dataclass
class SinkTransaction:
    """One label and its status; each transition checks the current status first."""

    label: str
    table: str | None = None  # per-table mode: the table; multi-table mode: None
    status: TxnStatus = TxnStatus.NEW
    loaded_tables: set[str] = field(default_factory=set)

    def _move(self, action: str, allowed: frozenset[TxnStatus], target: TxnStatus) -> None:
        if self.status not in allowed:
            names = ", ".join(sorted(s.value for s in allowed))
            msg = (
                f"cannot {action} transaction label={self.label} in state {self.status.value} "
                f"(allowed from: {names}); this is a sink bug, please report it"
            )
            raise TransactionStateError(msg, label=self.label, status=self.status.value)
        self.status = target

    def mark_open(self) -> None:
        """``begin`` answered OK."""
        self._move("open", frozenset({TxnStatus.NEW}), TxnStatus.OPEN)

    def mark_loaded(self, tables: set[str] | None = None) -> None:
        """Every chunk of the batch was accepted."""
        self._move("mark loaded", frozenset({TxnStatus.OPEN}), TxnStatus.LOADED)
        self.loaded_tables = set(tables or ())

    def mark_prepared(self) -> None:
        """Single-table ``prepare`` answered OK (or the server says PREPARED)."""
        self._move("prepare", frozenset({TxnStatus.LOADED, TxnStatus.NEW}), TxnStatus.PREPARED)

    def mark_committing(self) -> None:
        """About to send ``commit``."""
        self._move(
            "commit",
            frozenset({TxnStatus.LOADED, TxnStatus.PREPARED, TxnStatus.COMMITTING}),
            TxnStatus.COMMITTING,
        )

    def mark_committed(self) -> None:
        """The server says COMMITTED/VISIBLE."""
        self._move(
            "mark committed",
            frozenset({TxnStatus.COMMITTING, TxnStatus.NEW, TxnStatus.PREPARED}),
            TxnStatus.COMMITTED,
        )

    def mark_aborted(self) -> None:
        """The server says ABORTED (rollback OK, or aborted by timeout/failed load)."""
        self._move(
            "mark aborted",
            frozenset(set(TxnStatus) - {TxnStatus.COMMITTED}),
            TxnStatus.ABORTED,
        )

    @property
    def finished(self) -> bool:
        """COMMITTED or ABORTED: nothing more may happen under this label."""
        return self.status in _TERMINAL


_FROM_STATE = {
    LoadState.UNKNOWN: TxnStatus.NEW,
    LoadState.PREPARE: TxnStatus.OPEN,
    LoadState.PREPARED: TxnStatus.PREPARED,
    LoadState.COMMITTED: TxnStatus.COMMITTED,
    LoadState.VISIBLE: TxnStatus.COMMITTED,
    LoadState.ABORTED: TxnStatus.ABORTED,
}


def from_state(label: str, table: str | None, state: LoadState) -> SinkTransaction:
    """The transaction as the server reported it (recovery never invents a status).

    UNKNOWN maps to NEW: for a single-table label that means "never begun (or forgotten)";
    a multi-table label is never judged by this (the begin probe decides, spec §4.3a).
    """
    return SinkTransaction(label, table=table, status=_FROM_STATE[state])
