"""Commit behind: one background commit at a time, noted first, its failure raised next batch."""

from __future__ import annotations

import threading
import time

import pytest

from sinks.starrocks.behind import (
    COMMIT_BEHIND_FAILED,
    CommitBehind,
    CommitBehindError,
    PendingCommit,
)
from sinks.starrocks.steps import Verdict

pytestmark = pytest.mark.unit


class Notes:
    def __init__(self) -> None:
        self.saved: list[PendingCommit] = []

    def save(self, pending: PendingCommit) -> None:
        self.saved.append(pending)


def pending(batch_id: int) -> PendingCommit:
    return PendingCommit("q", batch_id, f"t-q-{batch_id}-0")


def test_the_note_is_written_before_the_commit_starts_and_settle_waits_for_it():
    notes = Notes()
    behind = CommitBehind(notes)
    release = threading.Event()
    seen_notes: list[int] = []

    def commit() -> Verdict:
        seen_notes.append(len(notes.saved))
        release.wait(5)
        return Verdict.COMMITTED

    behind.submit(pending(7), commit)
    release.set()
    assert behind.settle() == pending(7)
    assert seen_notes == [1]
    assert behind.settle() is None  # nothing in flight any more
    behind.close(1)


def test_a_second_commit_before_the_first_is_settled_is_refused():
    behind = CommitBehind(Notes())
    behind.submit(pending(1), lambda: Verdict.COMMITTED)
    with pytest.raises(RuntimeError, match="not settled"):
        behind.submit(pending(2), lambda: Verdict.COMMITTED)
    behind.close(1)


@pytest.mark.parametrize("outcome", ["aborted", "raised"])
def test_a_commit_that_did_not_commit_fails_the_next_batch_naming_the_batch(outcome):
    behind = CommitBehind(Notes())

    def commit() -> Verdict:
        if outcome == "raised":
            raise RuntimeError("outcome unknown after 30s")
        return Verdict.ABORTED

    behind.submit(pending(4), commit)
    deadline = time.monotonic() + 5
    while behind.failure is None and time.monotonic() < deadline:
        time.sleep(0.01)
    # Known before any next batch asks (an idle query has none): app/main.py watches it.
    assert isinstance(behind.failure, CommitBehindError)
    with pytest.raises(CommitBehindError) as info:
        behind.settle()
    text = str(info.value)
    assert COMMIT_BEHIND_FAILED in text
    assert "batch 4" in text
    assert "t-q-4-0" in text
    assert "replay" in text
    behind.close(1)


def test_the_note_reads_back_and_refuses_what_is_not_one():
    assert PendingCommit.from_json(pending(3).as_json()) == pending(3)
    assert PendingCommit.from_json({"batch_id": "x"}) is None
    assert PendingCommit.from_json([1]) is None
