from __future__ import annotations

import pytest

from app.metrics import PipelineMetrics
from app.progress import BatchStats, OpenTxn, ProgressReporter

pytestmark = pytest.mark.unit


def test_open_transactions_are_the_partitions_the_assembler_says_hold_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reporter = ProgressReporter(enabled=True)
    stats = BatchStats(batch_id=4, rows=7, transactions=2, label="cdc-q-4-0")
    stats.status = {("cdc", 0): None, ("cdc", 1): OpenTxn(4, 1_000), ("cdc", 2): OpenTxn(0, 900)}
    reporter.record(stats)
    reporter.on_progress(4, 16)
    line = capsys.readouterr().out
    assert reporter.open_transactions == 2
    assert line.startswith("batch      4")
    assert "open   2" in line
    assert "in      16" in line
    assert "label cdc-q-4-0" in line
    assert (reporter.batches, reporter.rows, reporter.transactions) == (1, 7, 2)


def test_a_partition_keeps_its_status_until_the_assembler_says_otherwise() -> None:
    reporter = ProgressReporter(enabled=False)
    reporter.record(BatchStats(batch_id=0, status={("cdc", 0): OpenTxn(10, 1), ("cdc", 1): None}))
    # Batch 1 gave partition 0's slot no records: its transaction is still open.
    reporter.record(BatchStats(batch_id=1, status={("cdc", 1): OpenTxn(7, 2)}))
    assert reporter.open_transactions == 2
    reporter.record(BatchStats(batch_id=2, status={("cdc", 0): None}))
    assert reporter.open_transactions == 1


def test_a_progress_event_without_a_written_batch_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reporter = ProgressReporter(enabled=True)
    reporter.on_progress(0, 0)
    assert capsys.readouterr().out == ""
    assert reporter.open_transactions == 0


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


def test_an_open_transaction_ages_from_the_batch_that_opened_it_and_stops_when_it_ends() -> None:
    now = [1000.0]
    metrics = PipelineMetrics("p", clock=lambda: now[0])
    reporter = ProgressReporter(enabled=False, metrics=metrics)
    # The batch begun at 995 s read its BEGIN; later batches gave its slot nothing.
    reporter.record(BatchStats(batch_id=1, status={("cdc", 0): OpenTxn(10, 995_000)}))
    assert _age(metrics) == 5.0
    now[0] = 1295.0
    reporter.record(BatchStats(batch_id=2, status={("cdc", 1): None}))
    assert _age(metrics) == 300.0  # aged at scrape time
    assert metrics.registry.get_sample_value("cdc_open_transactions") == 1
    # Its END and the next transaction's BEGIN arrive in the batch begun at 1290 s.
    reporter.record(BatchStats(batch_id=3, status={("cdc", 0): OpenTxn(14, 1_290_000)}))
    assert _age(metrics) == 5.0
    reporter.record(BatchStats(batch_id=4, status={("cdc", 0): None}))
    assert _age(metrics) == 0.0
    assert metrics.registry.get_sample_value("cdc_open_transactions") == 0
