from __future__ import annotations

import pytest

from devstack.progress import Progress, fmt_duration, fmt_eta

pytestmark = pytest.mark.unit


class Clock:
    """A clock moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_durations_read_like_the_progress_line() -> None:
    assert fmt_duration(45.4) == "45s"
    assert fmt_duration(130) == "2m10s"
    assert fmt_duration(3900) == "1h05m"
    assert fmt_eta(40) == "~40s"
    assert fmt_eta(239) == "~4m"


def test_eta_scales_the_remaining_weight_by_the_pace_so_far() -> None:
    clock = Clock()
    lines: list[str] = []
    p = Progress([("a", 10), ("b", 10), ("pipeline (kafka)", 20)], emit=lines.append, clock=clock)
    p.step("a")
    # Nothing measured yet: the plan's weights are the guess.
    assert lines[-1] == "[1/3] a ... elapsed 0s, ETA ~40s"
    clock.now += 20  # twice as slow as planned
    p.step("b")
    assert lines[-1] == "[2/3] b ... elapsed 20s, ETA ~1m"  # 30 weight left x 2 s each
    clock.now += 110
    p.step("pipeline (kafka)")
    assert lines[-1] == "[3/3] pipeline (kafka) ... elapsed 2m10s, ETA ~2m"
    p.finish()
    assert p.eta_s() == 0


def test_unplanned_steps_still_print_and_count() -> None:
    lines: list[str] = []
    p = Progress([("a", 1)], emit=lines.append, clock=Clock())
    p.step("a")
    p.step("extra")
    assert lines[-1].startswith("[2/2] extra ... elapsed 0s")


def test_tally_counts_runs_and_estimates_the_rest_from_wall_time() -> None:
    from devstack.progress import Tally

    now = [0.0]
    lines: list[str] = []
    tally = Tally(4, emit=lines.append, clock=lambda: now[0])
    now[0] = 60.0
    tally.record(True)
    now[0] = 120.0
    tally.record(False)
    assert lines[-1] == "progress: 2/4 runs, 1 passed, 1 failed, elapsed 2m00s, ETA ~2m"
    tally.record(True)
    tally.record(True)
    assert lines[-1] == "progress: 4/4 runs, 3 passed, 1 failed, elapsed 2m00s"


def test_wait_with_progress_reports_rate_and_eta_until_the_goal() -> None:
    from devstack.progress import wait_with_progress

    now = [0.0]
    done = [0]
    lines: list[str] = []

    def measure() -> tuple[int, int]:
        return done[0], 100

    def sleep(s: float) -> None:
        now[0] += s
        done[0] += 1  # one unit per half second: 2 per second

    assert wait_with_progress(
        "rows", measure, 600, every_s=10, emit=lines.append, clock=lambda: now[0], sleep=sleep
    )
    assert lines[0] == "rows: 20/100, elapsed 10s, ETA ~40s"
    done[0] = 0
    now[0] = 0.0
    assert not wait_with_progress(
        "rows", lambda: (0, 5), 3, emit=lines.append, clock=lambda: now[0], sleep=sleep
    )
    assert lines[-1] == "rows: 0/5 after 3s: gave up"
