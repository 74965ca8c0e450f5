"""The one retry policy every protocol step uses (begin, load, prepare, commit, rollback, state).

Two questions are kept apart (STYLE.md, dlt's split): *may* an error be retried is the
:class:`common.errors.Transient` mixin on the error; *how often and how long* is this object.
It is plain data plus an injected ``sleep`` and ``clock``, so unit tests run the protocol's
waits in zero wall time.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds and pacing of every retry the committer makes.

    Attributes:
        max_retries: Re-sends of one request after a transient error (0 = send once).
        base_s: First backoff delay; doubles per retry (full jitter in the upper half).
        cap_s: Largest backoff delay.
        check_timeout_s: How long an unclear commit (or a settling label) may be watched
            through ``get_load_state`` / the begin probe before the batch stops with an
            "outcome unknown" error (recovery then decides on the next run).
        batch_max_attempts: Fresh labels one ``run()`` may use after transient failures.
        sleep: Injected for tests.
        clock: Monotonic clock, injected for tests.
    """

    max_retries: int = 5
    base_s: float = 0.5
    cap_s: float = 10.0
    check_timeout_s: float = 60.0
    batch_max_attempts: int = 3
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        ceiling = min(self.cap_s, self.base_s * (2 ** min(retry, 30)))
        # Jitter spreads the retries of parallel executors; not security relevant.
        return float(ceiling * (0.5 + random.random() / 2))  # noqa: S311

    def pause(self, retry: int) -> None:
        """Sleep the backoff of retry number ``retry``."""
        self.sleep(self.delay(retry))

    def deadline(self) -> float:
        """Clock value after which an unclear outcome stops being watched."""
        return self.clock() + self.check_timeout_s

    def expired(self, deadline: float) -> bool:
        """Whether ``deadline`` (from :meth:`deadline`) has passed."""
        return self.clock() >= deadline
