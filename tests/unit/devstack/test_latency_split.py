"""The demo's BEGIN->visible samples split around the outages it causes (kills, restarts)."""

from __future__ import annotations

from devstack.stack import split_by_outages


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
    split = split_by_outages(samples, {"kill": (12_000.0, 24_000.0)})
    assert split["kill"]["n"] == 3
    assert split["kill"]["max"] == 12_500.0
    assert split["running"]["n"] == 4
    assert split["running"]["max"] == 900.0


def test_each_outage_keeps_its_own_samples():
    samples = [
        (9_500.0, 600.0),  # seen first of all, at 10,100: the pipeline's start, neither
        (10_000.0, 800.0),  # produced before 10,100 too: neither
        (11_500.0, 12_500.0),  # the pipeline's kill (12,000-24,000)
        (14_000.0, 9_800.0),  # the pipeline's kill
        (25_000.0, 900.0),  # running
        (29_000.0, 6_000.0),  # produced before Connect's kill at 30,000, seen after it
        (31_000.0, 5_000.0),  # produced while Connect was down (until 34,000)
        (35_000.0, 700.0),  # running
        (36_000.0, 800.0),  # running
    ]
    split = split_by_outages(
        samples, {"kill": (12_000.0, 24_000.0), "connect": (30_000.0, 34_000.0)}
    )
    assert (split["kill"]["n"], split["kill"]["max"]) == (2, 12_500.0)
    assert (split["connect"]["n"], split["connect"]["max"]) == (2, 6_000.0)
    assert (split["running"]["n"], split["running"]["max"]) == (3, 900.0)


def test_without_samples_after_the_kill_all_are_running():
    samples = [(0.0, 1_000.0), (1_500.0, 500.0), (2_000.0, 700.0)]
    split = split_by_outages(samples, {"kill": (5_000.0, 9_000.0)})
    assert split["kill"] == {}
    assert split["running"]["n"] == 2
    assert split_by_outages([], {"kill": (1.0, 2.0)}) == {"running": {}, "kill": {}}
