"""Runtime fault injection, driven through the FE admin endpoint ``/_emulator/faults``.

A fault is consumed by the node that *answers* an operation (never by the FE hop that only
307s it), so ``fail_next("commit", 1)`` fails exactly one commit whichever node handles it.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

OPS = frozenset(["begin", "load", "prepare", "commit", "rollback", "get_load_state"])
#: ``journal_restart``: the operation happens, then the FE restarts from its journal
#: (``TxnManager.restart(journal=True)``) and the answer is lost. ``commit_failed``: the
#: FE's commit fails (e.g. a database write-lock timeout) and answers FAILED ``message``; a
#: multi-table task rolls back (CANCELLED), a single-table transaction stays PREPARED.
KINDS = frozenset(
    [
        "fail",
        "commit_failed",
        "delay",
        "drop_response",
        "publish_timeout",
        "too_many_txns",
        "commit_ok_but_failed",
        "journal_restart",
    ]
)


def write_lock_timeout(db: str, timeout_ms: int = 5000) -> str:
    """The FE's answer to a commit that could not take the database's write lock in time.

    As ``GlobalTransactionMgr.commitPreparedTransaction`` words it; for ``commit_failed``.
    """
    return (
        "class com.starrocks.common.StarRocksException: get database write lock timeout, "
        f"database={db}, timeoutMillis={timeout_ms}"
    )


@dataclass
class Fault:
    """One armed fault: ``kind`` on the next ``count`` ``op`` requests."""

    op: str
    kind: str
    count: int = 1
    status: str = "INTERNAL_ERROR"
    message: str = "injected fault"
    http_status: int | None = None
    seconds: float = 0.0

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Fault:
        """Validate an admin request body.

        Raises:
            ValueError: unknown op/kind or bad count.
        """
        f = cls(
            op=str(d.get("op", "")),
            kind=str(d.get("kind", "")),
            count=int(d.get("count", 1)),
            status=str(d.get("status", "INTERNAL_ERROR")),
            message=str(d.get("message", "injected fault")),
            http_status=int(d["http_status"]) if d.get("http_status") is not None else None,
            seconds=float(d.get("seconds", 0.0)),
        )
        if f.op not in OPS:
            msg = f"unknown op {f.op!r}; expected one of {sorted(OPS)}"
            raise ValueError(msg)
        if f.kind not in KINDS:
            msg = f"unknown kind {f.kind!r}; expected one of {sorted(KINDS)}"
            raise ValueError(msg)
        if f.count < 1:
            msg = "count must be >= 1"
            raise ValueError(msg)
        return f


class FaultRegistry:
    """Thread-safe FIFO of armed faults."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> None:
        """Arm a fault."""
        with self._lock:
            self._faults.append(fault)

    def reset(self) -> None:
        """Disarm everything."""
        with self._lock:
            self._faults.clear()

    def take(self, op: str) -> Fault | None:
        """Consume one use of the oldest fault armed for ``op``."""
        with self._lock:
            for f in self._faults:
                if f.op == op:
                    f.count -= 1
                    if f.count <= 0:
                        self._faults.remove(f)
                    return f
            return None

    def snapshot(self) -> list[dict[str, Any]]:
        """The armed faults, for ``GET /_emulator/faults``."""
        with self._lock:
            return [asdict(f) for f in self._faults]
