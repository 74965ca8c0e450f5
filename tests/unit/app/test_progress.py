from __future__ import annotations

import pytest

from app.progress import BatchStats, ProgressReporter

pytestmark = pytest.mark.unit


def test_open_transactions_are_partitions_consumed_past_their_last_emitted_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reporter = ProgressReporter(enabled=True)
    stats = BatchStats(batch_id=4, rows=7, transactions=2, label="cdc-q-4-0")
    stats.emitted = {("cdc", 0): 9, ("cdc", 1): 3}
    reporter.record(stats)
    # Partition 0 consumed up to offset 9 (end 10): closed. Partition 1 consumed to 5: open.
    # Partition 2 consumed records but emitted nothing yet: open.
    reporter.on_progress(4, 16, {"cdc": {"0": 10, "1": 6, "2": 2}})
    line = capsys.readouterr().out
    assert reporter.open_transactions == 2
    assert line.startswith("batch      4")
    assert "open   2" in line
    assert "in      16" in line
    assert "label cdc-q-4-0" in line
    assert (reporter.batches, reporter.rows, reporter.transactions) == (1, 7, 2)


def test_a_progress_event_without_a_written_batch_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reporter = ProgressReporter(enabled=True)
    reporter.on_progress(0, 0, {})
    assert capsys.readouterr().out == ""
    assert reporter.open_transactions == 0


def test_what_an_earlier_run_made_visible_is_not_open_after_a_restart() -> None:
    reporter = ProgressReporter(enabled=False)
    reporter.emitted_before({("cdc", 0): 9, ("cdc", 1): 3})
    # A replayed batch (already committed) emits nothing of its own; partition 0 is idle.
    reporter.record(BatchStats(batch_id=5, label="cdc-q-5-0", skipped=True))
    reporter.on_progress(5, 4, {"cdc": {"0": 10, "1": 4, "2": 1}})
    assert reporter.open_transactions == 1  # partition 2 only: it emitted nothing yet


def test_a_batch_replayed_after_its_commit_behind_failed_adds_to_the_totals_once() -> None:
    reporter = ProgressReporter(enabled=False)
    reporter.record(BatchStats(batch_id=7, rows=5, transactions=1, outcome="committing"))
    # Its commit failed; the query restarted in process and Spark replayed batch 7.
    reporter.record(BatchStats(batch_id=7, rows=5, transactions=1, outcome="committed"))
    reporter.record(BatchStats(batch_id=8, rows=2, transactions=1, outcome="committing"))
    assert (reporter.batches, reporter.rows, reporter.transactions) == (3, 7, 2)
