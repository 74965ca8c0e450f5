"""Commit behind: a micro-batch's commit runs while Spark moves on to the next batch.

Multi-table mode with loading in the tasks (the default path). ``write_batch`` of batch ``b``
loads the batch into its label as before, then records the label in a durable note
(:class:`PendingStore`, next to Spark's checkpoint) and hands the commit to one background
thread; Spark writes ``b`` to its commit log and plans ``b + 1`` meanwhile. ``write_batch`` of
``b + 1`` first waits for ``b``'s commit (:meth:`CommitBehind.settle`), so commits stay in
batch order and at most one is in flight.

Spark may thus record ``b`` as done before StarRocks has it. What makes that safe:

* every load of ``b`` has finished before the note is written and before ``write_batch``
  returns; only the commit (no data) is left;
* a commit that fails stops the query at the next batch, before ``b + 1`` is begun;
* at the next start (:func:`app.commit_behind.recover`), the note's label is committed if its
  transaction is still open, and otherwise Spark's checkpoint is rewound to replay ``b``
  (same offsets, same state version, same rows; the label rule keeps it exactly once).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

from sinks.exceptions import SinkTerminalError
from sinks.starrocks.steps import Verdict

logger = logging.getLogger(__name__)

#: In the message of a failed commit behind; ``app/commit_behind.py`` looks for it in the
#: query's failure (it crosses py4j as text) to rewind and restart the query.
COMMIT_BEHIND_FAILED = "COMMIT_BEHIND_FAILED"


@dataclass(frozen=True)
class PendingCommit:
    """The one batch whose commit may be in flight."""

    query_id: str
    batch_id: int
    label: str

    def as_json(self) -> dict[str, Any]:
        """The note as written."""
        return {"query_id": self.query_id, "batch_id": self.batch_id, "label": self.label}

    @classmethod
    def from_json(cls, data: Any) -> PendingCommit | None:
        """The note as written, or ``None`` when it is not one."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(str(data["query_id"]), int(data["batch_id"]), str(data["label"]))
        except (KeyError, TypeError, ValueError):
            return None


class PendingStore(Protocol):
    """Where the note of the pending commit is kept, durably, before Spark's commit log."""

    def save(self, pending: PendingCommit) -> None:
        """Write the note (replacing the previous one) before returning."""


class CommitBehindError(SinkTerminalError):
    """A batch's commit behind did not commit: the query stops and the batch is replayed."""


class CommitBehind:
    """One background commit at a time, in batch order (driver)."""

    def __init__(self, store: PendingStore) -> None:
        self._store = store
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="starrocks-commit")
        self._pending: tuple[PendingCommit, Future[Verdict]] | None = None
        #: When the last commit ended (epoch seconds).
        self.last_commit_end = 0.0
        #: Set as soon as a commit behind did not commit, for whoever watches the query: with
        #: no next batch (no new data), nothing else would notice.
        self.failure: CommitBehindError | None = None

    def submit(self, pending: PendingCommit, commit: Callable[[], Verdict]) -> None:
        """Note ``pending``, then commit it in the background (call :meth:`settle` first)."""
        if self._pending is not None:
            msg = f"batch {self._pending[0].batch_id}'s commit is not settled"
            raise RuntimeError(msg)
        self._store.save(pending)

        def timed() -> Verdict:
            verdict = commit()
            self.last_commit_end = time.time()
            return verdict

        future = self._pool.submit(timed)
        # Runs in the commit thread, possibly after settle() has returned from result().
        future.add_done_callback(lambda done: self._watch(pending, done))
        self._pending = (pending, future)

    def _watch(self, pending: PendingCommit, done: Future[Verdict]) -> None:
        self.failure = _failure(pending, done)

    def settle(self) -> PendingCommit | None:
        """Wait for the commit in flight; the batch it committed, or ``None`` if none.

        Raises:
            CommitBehindError: it was aborted or its outcome is unknown; the message says
                which batch, and the next start replays it.
        """
        if self._pending is None:
            return None
        pending, future = self._pending
        self._pending = None
        wait([future])
        failure = _failure(pending, future)
        if failure is not None:
            raise failure from future.exception()
        return pending

    def close(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the commit in flight; anything left is recovered."""
        if self._pending is not None:
            pending, future = self._pending
            try:
                future.result(timeout=timeout_s)
            except Exception as e:  # the next start settles it (app/commit_behind.py)
                logger.warning(
                    "starrocks commit behind of batch %s (label %s) not settled at close: %s",
                    pending.batch_id,
                    pending.label,
                    e,
                )
            self._pending = None
        self._pool.shutdown(wait=False)


def _failure(pending: PendingCommit, done: Future[Verdict]) -> CommitBehindError | None:
    """What a finished commit behind says: ``None`` if it committed, else the error to raise."""
    error = done.exception()
    if error is not None:
        return _failed(pending, f"its commit failed: {error}")
    if done.result() is not Verdict.COMMITTED:
        return _failed(pending, "StarRocks aborted its transaction at commit")
    return None


def _failed(pending: PendingCommit, why: str) -> CommitBehindError:
    msg = (
        f"{COMMIT_BEHIND_FAILED}: StarRocks batch {pending.batch_id} (label {pending.label}) "
        f"was loaded but not committed: {why}. Spark already recorded the batch; the query "
        "stops, and the next start rewinds the checkpoint to replay it (nothing is lost or "
        "duplicated)"
    )
    return CommitBehindError(msg, batch_id=pending.batch_id, label=pending.label)
