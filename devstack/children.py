"""Processes the devstack launchers start (Kafka, PostgreSQL, Kafka Connect), by PID.

One registry for all of them, so that a stop reaps the child it started (no zombies) and never
signals a process it did not start; and the holder their fixtures keep across restarts
(:class:`Service`). Driver side only; nothing here reaches Spark executors.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import ClassVar, Generic, Protocol, Self, TypeVar

logger = logging.getLogger(__name__)

_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def track(proc: subprocess.Popen[bytes]) -> None:
    """Remember a process this module's callers started."""
    _CHILDREN[proc.pid] = proc


def abandon(proc: subprocess.Popen[bytes]) -> None:
    """A start that failed: kill the process if it still runs and forget it."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
    _CHILDREN.pop(proc.pid, None)


def is_running(pid: int) -> bool:
    """True while ``pid`` exists (reaping it if it is our child and has exited)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_exit(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` has exited; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid):
            return True
        time.sleep(0.05)
    return False


def stop(pid: int, sig: signal.Signals, timeout: float, what: str) -> None:
    """Send ``sig``, wait up to ``timeout``, then SIGKILL. Idempotent."""
    if is_running(pid):
        os.kill(pid, sig)
        if not wait_exit(pid, timeout):
            logger.warning(
                "%s did not stop on %s pid=%s timeout_s=%s", what, sig.name, pid, timeout
            )
            os.kill(pid, signal.SIGKILL)
            wait_exit(pid, timeout)
    _CHILDREN.pop(pid, None)


def kill(pid: int) -> None:
    """SIGKILL (a crash), then wait for the exit. Idempotent."""
    if is_running(pid):
        os.kill(pid, signal.SIGKILL)
        wait_exit(pid, 10.0)
    _CHILDREN.pop(pid, None)


def find_java() -> str | None:
    """``$JAVA_HOME/bin/java``, else ``java`` on the PATH, else None."""
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return str(Path(home, "bin", "java"))
    return shutil.which("java")


def read_from(path: Path, offset: int) -> str:
    """A log file's text from byte ``offset`` on (what this start wrote)."""
    with path.open("rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


class Held(Protocol):
    """What a launcher CLI keeps running: a started service with a PID."""

    @property
    def pid(self) -> int:
        """The service's process id."""
        ...

    def is_running(self) -> bool:
        """True while the process exists."""
        ...

    def stop(self) -> None:
        """Stop it by PID."""
        ...


class Stoppable(Protocol):
    """A started service's handle: stops or crashes its process by PID."""

    def stop(self) -> None:
        """Stop it (bounded wait, then SIGKILL)."""
        ...

    def kill(self) -> None:
        """Crash it."""
        ...


H = TypeVar("H", bound=Stoppable)


class Service(Generic[H]):
    """A service whose handle survives restarts; a context manager that stops it on exit.

    Fixtures hold one so that a restart keeps the same object valid for the test. A subclass
    names itself and its start error, and says how to launch (:meth:`_launch`).
    """

    what: ClassVar[str]
    start_error: ClassVar[type[Exception]]

    def __init__(self, data_dir: Path | str) -> None:
        self._data_dir = Path(data_dir)
        self._handle: H | None = None

    @property
    def handle(self) -> H:
        """The current handle; raises the start error if the service was never started."""
        if self._handle is None:
            msg = f"{self.what} for {self._data_dir} is not started: call start() first"
            raise self.start_error(msg)
        return self._handle

    def start(self) -> H:
        """Start it (a data dir used before resumes from what it holds)."""
        self._handle = self._launch()
        return self._handle

    def _launch(self) -> H:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop by PID (bounded wait, then SIGKILL); nothing if it was never started."""
        if self._handle is not None:
            self._handle.stop()

    def kill(self) -> None:
        """Crash it (its handle's ``kill``); :meth:`start` recovers it."""
        if self._handle is not None:
            self._handle.kill()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_on_signals() -> threading.Event:
    """An event SIGTERM and SIGINT set (install before starting, so no signal is missed)."""
    stop_requested = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop_requested


def hold(handle: Held, what: str, stop_requested: threading.Event) -> int:
    """Run until a stop signal (exit 0) or the service's own death (exit 1); stop it either way."""
    try:
        while not stop_requested.wait(0.5):
            if not handle.is_running():
                print(f"ERROR {what} pid={handle.pid} exited on its own", file=sys.stderr)
                return 1
    finally:
        handle.stop()
    return 0
