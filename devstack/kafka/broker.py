"""Start, stop and restart a noida-db broker that speaks only the Kafka protocol.

noida-db (PyPI) ships a Rust binary that can serve several protocols; we start the binary
directly with ``--only kafka`` so that the PID we hold is the broker's own (its Python wrapper
would put a second process in between) and no other service opens a port. ``SIGTERM`` makes it
save its data to ``<data dir>/kafka.json`` and exit, so a restart on the same data dir and port
sees the same topics and records.

Who calls this: test fixtures (``tests/fixtures/kafka.py``), the ``python -m devstack.kafka`` CLI
and benchmarks. Everything runs on the test driver; nothing here is shipped to Spark executors.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from types import TracebackType

from devstack.kafka.admin import wait_until_ready
from devstack.kafka.errors import BrokerStartError

logger = logging.getLogger(__name__)

_LOG_NAME = "noida-db.log"
# The binary prints one line per service once its listener is bound: "  kafka   127.0.0.1:PORT".
_KAFKA_LINE = re.compile(r"^\s*kafka\s+(\S+):(\d+)\s*$", re.MULTILINE)

# Children we started, by PID, so that stop() can reap them (no zombies) and never signals a
# process it did not start.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def broker_binary() -> Path:
    """Path of the noida-db binary inside the installed wheel.

    Raises:
        BrokerStartError: the ``noida-db`` package is not installed.
    """
    try:
        path = Path(str(files("noida_db").joinpath("noida-db")))
    except ModuleNotFoundError as e:
        msg = "noida-db is not installed: pip install -e '.[devstack]'"
        raise BrokerStartError(msg) from e
    if not path.is_file():
        msg = f"noida-db binary not found at {path}: reinstall with pip install -e '.[devstack]'"
        raise BrokerStartError(msg)
    return path


@dataclass(frozen=True)
class BrokerHandle:
    """A running broker: where to connect, which process it is, where its data lives.

    Frozen: a restart yields a new handle (new PID, same port and data dir).
    """

    bootstrap: str
    port: int
    pid: int
    data_dir: Path

    def is_running(self) -> bool:
        """True while the broker process exists (reaping it if it has exited)."""
        child = _CHILDREN.get(self.pid)
        if child is not None:
            return child.poll() is None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the broker: SIGTERM by PID (it saves its data), wait, then SIGKILL.

        Idempotent: stopping a stopped broker does nothing.
        """
        if not self.is_running():
            _CHILDREN.pop(self.pid, None)
            return
        os.kill(self.pid, signal.SIGTERM)
        if not _wait_exit(self.pid, timeout):
            logger.warning("broker did not stop on SIGTERM pid=%s timeout_s=%s", self.pid, timeout)
            os.kill(self.pid, signal.SIGKILL)
            _wait_exit(self.pid, timeout)
        _CHILDREN.pop(self.pid, None)

    def kill(self) -> None:
        """SIGKILL the broker (a crash: whatever it had not saved is lost)."""
        if self.is_running():
            os.kill(self.pid, signal.SIGKILL)
            _wait_exit(self.pid, 10.0)
        _CHILDREN.pop(self.pid, None)

    def restart(self, timeout: float = 30.0) -> BrokerHandle:
        """Stop (if running), start on the same port and data dir; returns the new handle."""
        self.stop()
        return start_broker(self.data_dir, port=self.port, timeout=timeout)


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    child = _CHILDREN.get(pid)
    while time.monotonic() < deadline:
        if child is not None:
            if child.poll() is not None:
                return True
        else:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
        time.sleep(0.05)
    return False


def start_broker(data_dir: Path | str, port: int = 0, timeout: float = 30.0) -> BrokerHandle:
    """Start a Kafka-only noida-db broker on 127.0.0.1 and wait until it answers metadata.

    Args:
        data_dir: where the broker keeps its data; use a fresh one per test.
        port: Kafka port; 0 picks a free one (read back from the broker's own output).
        timeout: seconds to wait for the listener and a successful metadata call.

    Raises:
        BrokerStartError: the process exited or did not become ready in time; the message
            carries the tail of its log.
    """
    data = Path(data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    log_path = data / _LOG_NAME
    cmd = [
        str(broker_binary()),
        "start",
        "--data-dir",
        str(data),
        "--host",
        "127.0.0.1",
        "--only",
        "kafka",
        "--kafka-port",
        str(port),
    ]
    with log_path.open("ab") as log:
        offset = log.tell()
        # Output goes to a file, not a pipe: nobody drains a pipe for the broker's lifetime.
        proc = subprocess.Popen(  # noqa: S603 - fixed argv, our own binary
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    _CHILDREN[proc.pid] = proc
    handle: BrokerHandle | None = None
    try:
        deadline = time.monotonic() + timeout
        bound_port = _wait_for_port(proc, log_path, offset, deadline)
        handle = BrokerHandle(
            bootstrap=f"127.0.0.1:{bound_port}", port=bound_port, pid=proc.pid, data_dir=data
        )
        wait_until_ready(handle.bootstrap, max(1.0, deadline - time.monotonic()))
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        _CHILDREN.pop(proc.pid, None)
        raise
    logger.info("broker ready bootstrap=%s pid=%s data_dir=%s", handle.bootstrap, proc.pid, data)
    return handle


def _wait_for_port(
    proc: subprocess.Popen[bytes], log_path: Path, offset: int, deadline: float
) -> int:
    while True:
        text = _read_from(log_path, offset)
        match = _KAFKA_LINE.search(text)
        if match:
            return int(match.group(2))
        if proc.poll() is not None:
            code = proc.returncode
            msg = f"noida-db exited with code {code} before listening; log:\n{text[-2000:]}"
            raise BrokerStartError(msg)
        if time.monotonic() > deadline:
            msg = f"noida-db did not report its Kafka port in time; log:\n{text[-2000:]}"
            raise BrokerStartError(msg)
        time.sleep(0.05)


def _read_from(path: Path, offset: int) -> str:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


class KafkaBroker:
    """A broker whose handle survives restarts; a context manager that stops it on exit.

    Fixtures hold one of these so that ``restart()`` keeps the same object valid for the test.
    """

    def __init__(self, data_dir: Path | str, port: int = 0) -> None:
        self._data_dir = Path(data_dir)
        self._port = port
        self._handle: BrokerHandle | None = None

    @property
    def handle(self) -> BrokerHandle:
        """The current handle; raises if the broker was never started."""
        if self._handle is None:
            msg = f"broker for {self._data_dir} is not started: call start() first"
            raise BrokerStartError(msg)
        return self._handle

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers``; stable across restarts."""
        return self.handle.bootstrap

    def start(self) -> BrokerHandle:
        """Start the broker (port 0 is resolved once and then kept for restarts)."""
        self._handle = start_broker(self._data_dir, port=self._port)
        self._port = self._handle.port
        return self._handle

    def stop(self) -> None:
        """Stop the broker by PID (SIGTERM, bounded wait, then SIGKILL)."""
        if self._handle is not None:
            self._handle.stop()

    def restart(self) -> BrokerHandle:
        """Stop and start on the same port and data dir; data survives."""
        self._handle = self.handle.restart()
        return self._handle

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
