"""The pipeline's side of commit behind (``sinks/starrocks/behind.py``): the note, the rewind.

The sink commits batch ``b`` while Spark records it and plans ``b + 1``. Before the commit
starts, the sink's note (``cdc-commit-behind.json``, next to Spark's checkpoint) names ``b``'s
label. At start, before the query, :func:`recover` settles that label: committed already, or
committed now if its transaction is still open. If StarRocks no longer holds it (timed out,
cancelled by an FE restart), Spark must not go on from ``b``: the checkpoint is rewound so that
Spark replays ``b`` (its offsets and batch timestamp from the offset log, its state version
from the state store, so the same rows under a new attempt of the label).
"""

from __future__ import annotations

import logging
import re
from typing import Protocol

from app.checkpoint_files import CheckpointFiles
from sinks.starrocks.behind import COMMIT_BEHIND_FAILED, PendingCommit
from sinks.starrocks.steps import Verdict

log = logging.getLogger(__name__)

NOTE_FILE = "cdc-commit-behind.json"
_FAILED_BATCH = re.compile(rf"{COMMIT_BEHIND_FAILED}: StarRocks batch (\d+) ")


class Restarts:
    """How many times the query may start again after failed commits behind.

    ``max_attempts`` in a row for one batch, as a sync commit retries it within the batch: a
    failure of a later batch means the replay went through, so a pipeline running for weeks
    does not run out of restarts one rare failure at a time.
    """

    def __init__(self, max_attempts: int) -> None:
        self._max = max_attempts
        self._batch: int | None = None
        self._count = 0

    def allow(self, failed: str) -> bool:
        """Whether to start again after ``failed`` (the failure's COMMIT_BEHIND_FAILED line)."""
        found = _FAILED_BATCH.search(failed)
        batch = int(found.group(1)) if found else None
        if batch != self._batch:
            self._batch, self._count = batch, 0
        self._count += 1
        return self._count <= self._max


class Settles(Protocol):
    """What :func:`recover` needs of the sink."""

    def settle_pending(self, pending: PendingCommit) -> Verdict:
        """COMMITTED, or ABORTED when the batch must be loaded again; raises when unsure."""


class CheckpointNote:
    """The sink's note of its pending commit, in the checkpoint folder (any Hadoop FS)."""

    def __init__(self, files: CheckpointFiles) -> None:
        self._files = files

    def save(self, pending: PendingCommit) -> None:
        """Write the note; Spark writes the batch's commit log entry only after this."""
        self._files.write_json(NOTE_FILE, pending.as_json())

    def load(self) -> PendingCommit | None:
        """The note an earlier run left, if any."""
        if not self._files.exists(NOTE_FILE):
            return None
        pending = PendingCommit.from_json(self._files.read_json(NOTE_FILE))
        if pending is None:
            # Written only inside a batch that then never returned: Spark replays that batch.
            log.warning("ignoring an unreadable %s in the checkpoint", NOTE_FILE)
        return pending

    def clear(self) -> None:
        """Remove the note (its commit is settled, or the checkpoint rewound past it)."""
        self._files.delete(NOTE_FILE)


def recover(note: CheckpointNote, files: CheckpointFiles, sink: Settles) -> int | None:
    """Settle an earlier run's commit behind; the batch id replayed, or ``None``.

    Called on the driver before the query starts (and before a restart in the same process).
    Rewinds the checkpoint when the noted batch was recorded by Spark but its transaction is
    gone: offset log entries after it, then commit log entries from it on, newest first, and
    the note last, so that a crash half-way leaves a note that rewinds again. What settling
    raises (the label's fate unknown, e.g. StarRocks refused the credentials) propagates
    with the checkpoint and the note untouched: the start fails and the next one settles it.
    """
    pending = note.load()
    if pending is None:
        return None
    committed = files.batch_ids("commits")
    if committed and committed[-1] > pending.batch_id:
        # A later batch is in Spark's commit log, and every write_batch first settles the
        # commit in flight (a failed one stops the query before that batch ends): this one
        # committed, and the note is left over. Asked, StarRocks may have forgotten the label
        # by now, and the rewind would undo batches Spark already ran.
        note.clear()
        return None
    if sink.settle_pending(pending) is Verdict.COMMITTED:
        note.clear()
        return None
    if pending.batch_id not in committed:
        # Spark never recorded the batch: it replays it anyway.
        note.clear()
        return None
    for batch_id in reversed(files.batch_ids("offsets")):
        if batch_id > pending.batch_id:
            files.delete(f"offsets/{batch_id}")
    for batch_id in reversed(committed):
        if batch_id >= pending.batch_id:
            files.delete(f"commits/{batch_id}")
    note.clear()
    log.warning(
        "StarRocks no longer holds batch %s's transaction (label %s), which an earlier run "
        "loaded and left to commit: the checkpoint is rewound and Spark replays batch %s",
        pending.batch_id,
        pending.label,
        pending.batch_id,
    )
    return pending.batch_id
