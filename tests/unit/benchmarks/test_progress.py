from __future__ import annotations

import pytest

from benchmarks.progress import Progress, fmt_duration, fmt_eta

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
