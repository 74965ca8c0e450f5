"""Recovering an earlier run's commit behind: settled, or the checkpoint rewound to replay."""

from __future__ import annotations

import pytest

from app.commit_behind import Restarts, recover
from sinks.exceptions import SinkTerminalError
from sinks.starrocks.behind import PendingCommit, _failed
from sinks.starrocks.steps import Verdict

pytestmark = pytest.mark.unit


class Files:
    """Spark's offset and commit logs as batch ids; deletions in order."""

    def __init__(self, offsets: list[int], commits: list[int]) -> None:
        self.logs = {"offsets": offsets, "commits": commits}
        self.deleted: list[str] = []

    def batch_ids(self, folder: str) -> list[int]:
        return sorted(self.logs[folder])

    def delete(self, name: str) -> bool:
        folder, batch = name.split("/")
        self.logs[folder].remove(int(batch))
        self.deleted.append(name)
        return True


class Note:
    def __init__(self, pending: PendingCommit | None) -> None:
        self.pending = pending

    def load(self) -> PendingCommit | None:
        return self.pending

    def clear(self) -> None:
        self.pending = None


class Sink:
    def __init__(self, verdict: Verdict | Exception) -> None:
        self.verdict = verdict
        self.settled: list[PendingCommit] = []

    def settle_pending(self, pending: PendingCommit) -> Verdict:
        self.settled.append(pending)
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict


PENDING = PendingCommit("q", 5, "t-q-5-0")


def test_no_note_nothing_to_do():
    files = Files([0, 1], [0, 1])
    assert recover(Note(None), files, Sink(Verdict.ABORTED)) is None  # type: ignore[arg-type]
    assert files.deleted == []


def test_a_committed_label_leaves_the_checkpoint_as_it_is():
    files, note, sink = Files([4, 5, 6], [4, 5]), Note(PENDING), Sink(Verdict.COMMITTED)
    assert recover(note, files, sink) is None  # type: ignore[arg-type]
    assert (files.deleted, note.pending, sink.settled) == ([], None, [PENDING])


def test_a_lost_transaction_spark_recorded_rewinds_to_replay_its_batch():
    files, note = Files([4, 5, 6], [4, 5]), Note(PENDING)
    assert recover(note, files, Sink(Verdict.ABORTED)) == 5  # type: ignore[arg-type]
    # Offsets after the batch first, then its commit: a crash in between rewinds again.
    assert files.deleted == ["offsets/6", "commits/5"]
    assert files.logs == {"offsets": [4, 5], "commits": [4]}
    assert note.pending is None


def test_a_lost_transaction_spark_never_recorded_needs_no_rewind():
    files, note = Files([4, 5], [4]), Note(PENDING)
    assert recover(note, files, Sink(Verdict.ABORTED)) is None  # type: ignore[arg-type]
    assert (files.deleted, note.pending) == ([], None)


def test_a_label_settling_cannot_decide_keeps_the_checkpoint_and_the_note():
    """E.g. StarRocks refused the credentials: the label may still commit, so the start
    fails as it is, nothing rewound, and the next start settles the note again."""
    files, note = Files([4, 5, 6], [4, 5]), Note(PENDING)
    refused = Sink(SinkTerminalError("label t-q-5-0 could not be settled"))
    with pytest.raises(SinkTerminalError, match="could not be settled"):
        recover(note, files, refused)  # type: ignore[arg-type]
    assert (files.deleted, note.pending) == ([], PENDING)


def failure_of(batch: int) -> str:
    """The line ``app/main.py`` finds in the query's failure (it crosses py4j as text)."""
    return "py4j ... " + str(_failed(PendingCommit("q", batch, f"l-{batch}"), "refused"))


def test_restarts_are_counted_per_failing_batch_not_for_the_process_life():
    restarts = Restarts(2)
    # Rare failures of ever later batches: each replay went through, so the query goes on.
    assert all(restarts.allow(failure_of(batch)) for batch in range(10, 60, 5))
    # One batch that fails again and again: max_attempts restarts, then the query stops.
    assert [restarts.allow(failure_of(70)) for _ in range(3)] == [True, True, False]
    # A line without a batch id counts as one more failure of an unknown batch.
    unknown = Restarts(1)
    assert [unknown.allow("COMMIT_BEHIND_FAILED"), unknown.allow("x")] == [True, False]


def test_a_note_older_than_a_recorded_batch_is_left_over_and_rewinds_nothing():
    """Batches that end EMPTY or ALREADY_APPLIED do not replace the note, so it can name a
    batch Spark recorded long ago; by then StarRocks may have forgotten its label. A later
    batch in the commit log settled that commit first: nothing may be rewound (review 12-08).
    """
    files = Files([5, 6, 7, 8, 9], [5, 6, 7, 8, 9])
    note = Note(PendingCommit("q", 5, "t-q-5-0"))
    assert recover(note, files, Sink(Verdict.ABORTED)) is None  # type: ignore[arg-type]
    assert files.deleted == []
    assert note.pending is None
