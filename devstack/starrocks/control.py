"""Typed client for the emulator's admin endpoint (``/_emulator/*`` on the FE port).

Tests arm faults through it; each method maps to one JSON call documented in the README.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import requests


class EmulatorControl:
    """Fault knobs and introspection of one running emulator."""

    def __init__(self, fe_url: str, timeout: float = 10.0) -> None:
        self.fe_url = fe_url.rstrip("/")
        self.timeout = timeout

    def _post(self, what: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        r = requests.post(f"{self.fe_url}/_emulator/{what}", json=body or {}, timeout=self.timeout)
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    def _get(self, what: str) -> dict[str, Any]:
        r = requests.get(f"{self.fe_url}/_emulator/{what}", timeout=self.timeout)
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    def add_fault(self, op: str, kind: str, count: int = 1, **extra: Any) -> None:
        """Arm a raw fault (see :class:`devstack.starrocks.faults.Fault`)."""
        self._post("faults", {"op": op, "kind": kind, "count": count, **extra})

    def fail_next(
        self,
        op: str,
        count: int = 1,
        *,
        status: str = "INTERNAL_ERROR",
        message: str = "injected fault",
        http_status: int | None = None,
    ) -> None:
        """The next ``count`` ``op`` requests answer ``status``/``message`` and do nothing.

        With ``http_status`` (e.g. 500, 503) the answer carries that HTTP code.
        """
        self.add_fault(op, "fail", count, status=status, message=message, http_status=http_status)

    def delay(self, op: str, seconds: float, count: int = 1) -> None:
        """Delay the next ``count`` ``op`` requests (BE ops hold the channel lock meanwhile)."""
        self.add_fault(op, "delay", count, seconds=seconds)

    def drop_commit_response(self, count: int = 1) -> None:
        """Apply the next ``count`` commits, then close the connection without answering."""
        self.add_fault("commit", "drop_response", count)

    def journal_restart_after_commit(self, count: int = 1) -> None:
        """Apply the next ``count`` commits, restart the FE from its journal, lose the answer.

        A committed multi-table task then answers as CANCELLED (the client's retry of the
        commit hears ``Can not commit CANCELLED``) while its label stays VISIBLE.
        """
        self.add_fault("commit", "journal_restart", count)

    def publish_timeout(self, count: int = 1) -> None:
        """Commit, then answer ``publish timeout`` (the txn is COMMITTED, VISIBLE shortly)."""
        self.add_fault("commit", "publish_timeout", count)

    def commit_ok_but_failed(self, count: int = 1) -> None:
        """The next ``count`` multi-table commits fail, roll back, and still answer OK.

        As some 4.0.x FE builds do (spec §4.3a): only ``get_load_state`` (ABORTED or
        UNKNOWN) or a second commit (``Can not commit CANCELLED``) shows the truth.
        """
        self.add_fault("commit", "commit_ok_but_failed", count)

    def commit_failed(self, message: str, count: int = 1) -> None:
        """The next ``count`` commits fail in the FE and answer FAILED ``message``.

        As a database write-lock timeout does: a multi-table task rolls back (its label
        ABORTED), a single-table transaction stays PREPARED for the client to commit again.
        """
        self.add_fault("commit", "commit_failed", count, status="FAILED", message=message)

    def too_many_txns(self, count: int = 1) -> None:
        """The next ``count`` begins fail with ``current running txns on db ...``."""
        self.add_fault("begin", "too_many_txns", count)

    def faults(self) -> list[dict[str, Any]]:
        """The armed faults."""
        out: list[dict[str, Any]] = self._get("faults")["faults"]
        return out

    def reset(self) -> None:
        """Disarm every fault."""
        self._post("reset-faults")

    def discard_rows(self, tables: Sequence[str]) -> None:
        """Commits drop these tables' rows (``db.table``) unwritten; ``[]`` writes all again.

        A benchmark knob, not StarRocks behaviour: it takes the SQLite writes that StarRocks
        would do on its own nodes off the machine under test. Transactions are unchanged.
        """
        self._post("discard", {"tables": list(tables)})

    def restart(self, journal: bool = False) -> None:
        """Simulate an FE+BE restart: BE contexts dropped, running multi-table txns cancelled.

        ``journal``: the FE replays its journal, so committed multi-table tasks come back
        CANCELLED too, their labels VISIBLE (``TxnManager.restart``).
        """
        self._post("restart", {"journal": journal})

    def transactions(self) -> list[dict[str, Any]]:
        """Every transaction the FE knows (label, txn_id, db, multi, status, state, reason...)."""
        out: list[dict[str, Any]] = self._get("txns")["txns"]
        return out

    def labels(self, db: str | None = None) -> dict[str, str]:
        """Latest status per label as an operator sees it (optionally of one database).

        Multi-table task states are mapped to TransactionStatus names (BEGIN -> PREPARE,
        COMMITED -> VISIBLE, CANCELLED -> ABORTED). This is the truth a check should use;
        ``get_load_state`` may say UNKNOWN for the same label (see :meth:`load_states`).
        """
        return self._by_label("state", db)

    def load_states(self, db: str | None = None) -> dict[str, str]:
        """What ``get_load_state`` answers per label (UNKNOWN for unregistered multi-table)."""
        return self._by_label("load_state", db)

    def _by_label(self, key: str, db: str | None) -> dict[str, str]:
        out: dict[str, str] = {}
        for t in sorted(self.transactions(), key=lambda t: int(t["txn_id"])):
            if db is None or t["db"] == db:
                out[str(t["label"])] = str(t[key])
        return out
