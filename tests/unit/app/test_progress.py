from __future__ import annotations

import pytest

from app.metrics import PipelineMetrics
from app.progress import BatchStats, ProgressReporter, _epoch_s

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


def _age(metrics: PipelineMetrics, partition: int = 0) -> float | None:
    return metrics.registry.get_sample_value(
        "cdc_oldest_open_transaction_seconds", {"topic": "cdc", "partition": str(partition)}
    )


def test_a_busy_partition_ages_only_the_transaction_open_now() -> None:
    # A batch every 10 s: each ends the transaction open at the previous batch's end (its END
    # emitted) and reads the BEGIN of the next, open at its own end.
    now = [1000.0]
    metrics = PipelineMetrics("p", clock=lambda: now[0])
    reporter = ProgressReporter(enabled=False, metrics=metrics)
    end = 10
    for batch_id in range(30):
        started = now[0]
        now[0] += 10.0
        if batch_id:
            reporter.record(BatchStats(batch_id=batch_id, emitted={("cdc", 0): end + 3}))
        end += 10
        reporter.on_progress(batch_id, 10, {"cdc": {"0": end}}, started_s=started)
        # The transaction open now began in this batch, at most a batch ago.
        assert _age(metrics) == 10.0
    assert reporter.open_transactions == 1


def test_a_transaction_left_open_ages_from_the_batch_that_read_its_begin() -> None:
    now = [1000.0]
    metrics = PipelineMetrics("p", clock=lambda: now[0])
    reporter = ProgressReporter(enabled=False, metrics=metrics)
    reporter.emitted_before({("cdc", 0): 9})
    reporter.on_progress(0, 0, {"cdc": {"0": 10}}, started_s=990.0)
    assert _age(metrics) == 0.0
    # Batch 1 (begun at 995) reads a BEGIN and rows; later batches read nothing new for it.
    reporter.on_progress(1, 3, {"cdc": {"0": 13}}, started_s=995.0)
    for batch_id, started in ((2, 1100.0), (3, 1200.0)):
        now[0] = started + 1
        reporter.on_progress(batch_id, 0, {"cdc": {"0": 13}}, started_s=started)
    now[0] = 1295.0
    assert _age(metrics) == 300.0
    # Its END (and the next transaction's BEGIN) arrive: the age starts again.
    reporter.record(BatchStats(batch_id=4, emitted={("cdc", 0): 14}))
    reporter.on_progress(4, 2, {"cdc": {"0": 16}}, started_s=1290.0)
    assert _age(metrics) == 5.0
    reporter.record(BatchStats(batch_id=5, emitted={("cdc", 0): 15}))
    reporter.on_progress(5, 0, {"cdc": {"0": 16}}, started_s=1294.0)
    assert _age(metrics) == 0.0


def test_a_progress_events_timestamp_is_its_batchs_start() -> None:
    assert _epoch_s("1970-01-01T00:01:40.500Z") == 100.5
    assert _epoch_s(None) is None
    assert _epoch_s("soon") is None
