"""The demo's BEGIN->visible samples split around a pipeline's kill and catch-up."""

from __future__ import annotations

from devstack.stack import split_by_outage


def test_transactions_waiting_out_the_kill_are_apart_from_the_running_pipelines():
    samples = [
        (0.0, 9_000.0),  # produced before the first start was visible: neither
        (9_500.0, 600.0),  # running: visible at 10,100, before the kill at 12,000
        (10_000.0, 800.0),  # running: visible at 10,800
        (11_500.0, 12_500.0),  # produced before the kill, visible after the restart
        (14_000.0, 9_800.0),  # produced while the pipeline was down
        (23_000.0, 2_000.0),  # produced during the catch-up, which ends at 24,000
        (24_000.0, 700.0),  # running again
        (25_000.0, 900.0),  # running again
    ]
    split = split_by_outage(samples, down_ms=12_000.0, up_ms=24_000.0)
    assert split["across_outage"]["n"] == 3
    assert split["across_outage"]["max"] == 12_500.0
    assert split["running"]["n"] == 4
    assert split["running"]["max"] == 900.0


def test_without_samples_after_the_kill_all_are_running():
    samples = [(0.0, 1_000.0), (1_500.0, 500.0), (2_000.0, 700.0)]
    split = split_by_outage(samples, down_ms=5_000.0, up_ms=9_000.0)
    assert split["across_outage"] == {}
    assert split["running"]["n"] == 2
    assert split_by_outage([], 1.0, 2.0) == {"running": {}, "across_outage": {}}
