"""Typed client for the emulator's admin endpoint (``/_emulator/*`` on the FE port).

Tests arm faults through it; each method maps to one JSON call documented in the README.
"""

from __future__ import annotations

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

    def publish_timeout(self, count: int = 1) -> None:
        """Commit, then answer ``publish timeout`` (the txn is COMMITTED, VISIBLE shortly)."""
        self.add_fault("commit", "publish_timeout", count)

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

    def restart(self) -> None:
        """Simulate an FE+BE restart: BE contexts dropped, running multi-table txns cancelled."""
        self._post("restart")

    def transactions(self) -> list[dict[str, Any]]:
        """Every transaction the FE knows (label, txn_id, db, multi, status, state, reason...)."""
        out: list[dict[str, Any]] = self._get("txns")["txns"]
        return out

    def labels(self, db: str | None = None) -> dict[str, str]:
        """Latest ``get_load_state`` state per label (optionally of one database)."""
        out: dict[str, str] = {}
        for t in sorted(self.transactions(), key=lambda t: int(t["txn_id"])):
            if db is None or t["db"] == db:
                out[str(t["label"])] = str(t["state"])
        return out
