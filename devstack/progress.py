"""Progress lines with an ETA for long local work: benchmark steps, chaos and soak runs, demos.

    [3/11] pipeline (kafka) ... elapsed 2m10s, ETA ~4m

Each planned step carries a weight (its expected share of the run, in rough seconds). The ETA
scales the time spent so far by the weight still to come, so it corrects itself on a slow or
busy machine: after half the weight took 10 minutes, the rest is expected to take 10 more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


def fmt_duration(seconds: float) -> str:
    """``45s``, ``2m10s``, ``1h05m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def fmt_eta(seconds: float) -> str:
    """A rounded estimate: ``~40s``, ``~4m``, ``~1h05m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"~{s}s"
    if s < 3600:
        return f"~{round(s / 60)}m"
    return f"~{s // 3600}h{(s % 3600) // 60:02d}m"


class Progress:
    """Planned steps ``(label, weight)``; ``step(label)`` prints the line for the next one.

    Steps not in the plan (or run out of order) are still printed; the ETA then uses what is
    known. ``clock`` and ``emit`` are parameters so tests can drive it by hand.
    """

    def __init__(
        self,
        plan: Sequence[tuple[str, float]],
        emit: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.plan = list(plan)
        self.emit = emit
        self.clock = clock
        self.started = clock()
        self.done_weight = 0.0
        self.index = 0
        self._current: float | None = None

    @property
    def total_weight(self) -> float:
        """The sum of the planned steps' weights."""
        return sum(w for _, w in self.plan)

    def eta_s(self) -> float | None:
        """Seconds still to go, or None before any weight is done."""
        elapsed = self.clock() - self.started
        if self.done_weight <= 0 or elapsed <= 0:
            return None
        remaining = max(0.0, self.total_weight - self.done_weight)
        return elapsed * remaining / self.done_weight

    def step(self, label: str) -> str:
        """Close the running step, announce ``label``; returns the printed line."""
        self.finish()
        self.index += 1
        weight = next((w for name, w in self.plan if name == label), 0.0)
        self._current = weight
        elapsed = self.clock() - self.started
        eta = self.eta_s()
        if eta is None:
            # Nothing measured yet: the plan's own weights are the best guess (seconds).
            eta = max(0.0, self.total_weight - self.done_weight)
        total = max(len(self.plan), self.index)
        line = (
            f"[{self.index}/{total}] {label} ... elapsed {fmt_duration(elapsed)}, "
            f"ETA {fmt_eta(eta)}"
        )
        self.emit(line)
        return line

    def finish(self) -> None:
        """Count the running step as done (``step`` calls this; call it after the last)."""
        if self._current is not None:
            self.done_weight += self._current
            self._current = None

    def skip(self, label: str) -> None:
        """Drop a planned step that will not run (e.g. its part failed)."""
        self.plan = [(n, w) for n, w in self.plan if n != label]


class Tally:
    """Runs done of a known total, passed and failed so far, and an ETA from the wall time.

    For independent runs that finish in any order (``make soak`` runs two at once): the ETA is
    the wall time so far per finished run times the runs left.
    """

    def __init__(
        self,
        total: int,
        emit: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.emit = emit
        self.clock = clock
        self.started = clock()
        self.passed = 0
        self.failed = 0

    def record(self, passed: bool) -> str:
        """Count one finished run and emit the progress line."""
        if passed:
            self.passed += 1
        else:
            self.failed += 1
        done = self.passed + self.failed
        elapsed = self.clock() - self.started
        left = self.total - done
        eta = f", ETA {fmt_eta(elapsed / done * left)}" if left > 0 else ""
        line = (
            f"progress: {done}/{self.total} runs, {self.passed} passed, {self.failed} failed, "
            f"elapsed {fmt_duration(elapsed)}{eta}"
        )
        self.emit(line)
        return line


def wait_with_progress(
    label: str,
    measure: Callable[[], tuple[int, int]],
    timeout_s: float,
    every_s: float = 10.0,
    emit: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll ``measure() -> (done, goal)`` until done >= goal; a line with an ETA every ``every_s``.

    Returns whether the goal was reached within ``timeout_s``.
    """
    started = last = clock()
    first_done: int | None = None
    while True:
        done, goal = measure()
        now = clock()
        if done >= goal:
            return True
        if now - started >= timeout_s:
            emit(f"{label}: {done:,}/{goal:,} after {fmt_duration(now - started)}: gave up")
            return False
        if first_done is None:
            first_done = done
        if now - last >= every_s:
            last = now
            rate = (done - first_done) / max(now - started, 1e-9)
            eta = f", ETA {fmt_eta((goal - done) / rate)}" if rate > 0 else ""
            emit(f"{label}: {done:,}/{goal:,}, elapsed {fmt_duration(now - started)}{eta}")
        sleep(0.5)
