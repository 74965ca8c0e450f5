from __future__ import annotations

import urllib.request
from dataclasses import replace

import pytest

from app.metrics import PipelineMetrics
from app.progress import BatchStats

pytestmark = pytest.mark.unit


def value(m: PipelineMetrics, name: str, **labels: str) -> float:
    found = m.registry.get_sample_value(name, labels)
    return -1.0 if found is None else found


def test_a_committed_batch_counts_rows_txns_rejects_latency_and_offsets() -> None:
    m = PipelineMetrics("p")
    stats = BatchStats(
        batch_id=3,
        rows=10,
        transactions=4,
        rejected_records=3,
        rejected_transactions=1,
        label="p-q-3-1",
        sink_ms=120.0,
        emitted={("cdc", 0): 41, ("cdc", 1): 7},
        outcome="committed",
        attempt=1,
        rejects_by_reason={"txn-timeout": 3},
        source_ts_ms=[9_000, 9_500],
    )
    m.on_batch(stats, now_s=10.0)
    assert value(m, "cdc_batches_total", outcome="committed") == 1
    assert value(m, "cdc_rows_committed_total") == 10
    assert value(m, "cdc_transactions_committed_total") == 4
    assert value(m, "cdc_rejected_records_total", reason="txn-timeout") == 3
    assert value(m, "cdc_rejected_transactions_total") == 1
    assert value(m, "cdc_recovery_actions_total", action="rolled_back_attempt") == 1
    assert value(m, "cdc_commit_seconds_count") == 1
    assert value(m, "cdc_commit_seconds_sum") == pytest.approx(0.12)
    assert value(m, "cdc_begin_to_visible_seconds_count") == 2
    assert value(m, "cdc_begin_to_visible_seconds_sum") == pytest.approx(1.0 + 0.5)
    assert value(m, "cdc_last_committed_offset", topic="cdc", partition="0") == 41
    assert value(m, "cdc_last_commit_timestamp_seconds") == 10.0


def test_a_replayed_batch_is_a_recovery_action_and_counts_nothing_twice() -> None:
    m = PipelineMetrics("p")
    m.on_batch(
        BatchStats(batch_id=3, rows=10, transactions=4, outcome="already_applied", skipped=True)
    )
    assert value(m, "cdc_recovery_actions_total", action="skipped_batch") == 1
    assert value(m, "cdc_rows_committed_total") == 0


def test_a_batch_replayed_after_its_commit_behind_failed_is_counted_once() -> None:
    # sink.commit-behind: batch 7 is loaded and counted (committing); its commit fails,
    # app/main.py restarts the query, Spark replays batch 7 (same rows), which commits.
    m = PipelineMetrics("p")
    first = BatchStats(
        batch_id=7,
        rows=5,
        transactions=1,
        rejected_records=1,
        rejected_transactions=1,
        label="l-7-0",
        outcome="committing",
        rejects_by_reason={"undecodable": 1},
        source_ts_ms=[90_000],
        emitted={("cdc", 0): 12},
    )
    m.on_batch(first, now_s=100.0)
    m.on_batch(
        replace(first, label="l-7-1", outcome="committed", sink_ms=50.0, source_ts_ms=[90_000]),
        now_s=200.0,
    )
    assert value(m, "cdc_batches_total", outcome="committing") == 1
    assert value(m, "cdc_batches_total", outcome="committed") == 1
    assert value(m, "cdc_rows_committed_total") == 5
    assert value(m, "cdc_transactions_committed_total") == 1
    assert value(m, "cdc_rejected_records_total", reason="undecodable") == 1
    assert value(m, "cdc_rejected_transactions_total") == 1
    assert value(m, "cdc_begin_to_visible_seconds_count") == 1
    # The replay's commit is a commit: its time and the sink's are still seen.
    assert value(m, "cdc_last_commit_timestamp_seconds") == 200.0
    assert value(m, "cdc_commit_seconds_count") == 2
    # The next batch counts again.
    m.on_batch(BatchStats(batch_id=8, rows=3, label="l-8-0", outcome="committed"), now_s=201.0)
    assert value(m, "cdc_rows_committed_total") == 8


def test_open_transaction_age_per_partition_grows_between_batches() -> None:
    now = [100.0]
    m = PipelineMetrics("p", clock=lambda: now[0])
    # When each partition's open transaction began (app/progress.py), None: none open.
    m.on_open({("cdc", 0): 100.0, ("cdc", 1): None})
    now[0] = 130.0
    m.on_open({("cdc", 0): 100.0, ("cdc", 1): 130.0})
    assert value(m, "cdc_open_transactions") == 2
    assert value(m, "cdc_oldest_open_transaction_seconds", topic="cdc", partition="0") == 30
    assert value(m, "cdc_oldest_open_transaction_seconds", topic="cdc", partition="1") == 0
    # No batch runs while the pipeline is idle (pipeline.idle-batches: false); the age of an
    # abandoned transaction keeps growing at every scrape all the same.
    now[0] = 400.0
    assert value(m, "cdc_oldest_open_transaction_seconds", topic="cdc", partition="0") == 300
    m.on_open({("cdc", 0): None, ("cdc", 1): 130.0})
    now[0] = 410.0
    assert value(m, "cdc_oldest_open_transaction_seconds", topic="cdc", partition="0") == 0
    assert value(m, "cdc_oldest_open_transaction_seconds", topic="cdc", partition="1") == 280


def test_served_over_http() -> None:
    m = PipelineMetrics("p")
    port = m.serve(0, "127.0.0.1")
    m.on_batch(BatchStats(batch_id=0, rows=2, transactions=1, label="l", outcome="committed"))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert "cdc_rows_committed_total 2.0" in text
