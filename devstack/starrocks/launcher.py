"""Start the emulator as a subprocess and describe it (pytest fixture, ``make demo``).

The emulator runs in its own process, as the real cluster would, so a client under test cannot
share state with it by accident and can be killed independently of it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from devstack.ready import read_ready_line
from devstack.starrocks.control import EmulatorControl
from devstack.starrocks.errors import LaunchError

_READY = re.compile(r"^READY fe=(\d+) be=(\d+) query=(\d+)$")


@dataclass(frozen=True)
class EmulatorHandle:
    """How to reach a running emulator."""

    host: str
    fe_port: int
    be_port: int
    query_port: int
    user: str
    password: str
    data_dir: Path
    pid: int

    @property
    def fe_url(self) -> str:
        """``http://host:fe_port``, the load URL a client is configured with."""
        return f"http://{self.host}:{self.fe_port}"

    @property
    def be_url(self) -> str:
        """``http://host:be_port`` (clients normally reach it through a 307)."""
        return f"http://{self.host}:{self.be_port}"

    @property
    def control(self) -> EmulatorControl:
        """Fault knobs and introspection."""
        return EmulatorControl(self.fe_url)

    def connect(self, **kwargs: Any) -> Any:
        """A pymysql connection to the query port (autocommit on).

        TLS is off by default: pymysql's "preferred" TLS builds a default SSL context (loading
        the CA store, ~0.1 s) on every connect, and the emulator does not offer TLS anyway.
        """
        kwargs.setdefault("ssl_disabled", True)
        return pymysql.connect(
            host=self.host,
            port=self.query_port,
            user=self.user,
            password=self.password,
            autocommit=True,
            **kwargs,
        )

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        """Run one statement over the query port; returns its rows (empty for DDL)."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
                return [tuple(r) for r in cur.fetchall()]
        finally:
            conn.close()


class EmulatorProcess:
    """A started emulator subprocess; use as a context manager or call :meth:`stop`."""

    def __init__(self, proc: subprocess.Popen[bytes], handle: EmulatorHandle) -> None:
        self.proc = proc
        self.handle = handle

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM the emulator (by PID), SIGKILL it if it does not exit in ``timeout``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return int(self.proc.returncode or 0)

    def __enter__(self) -> EmulatorHandle:
        return self.handle

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_emulator(
    data_dir: Path | str,
    *,
    host: str = "127.0.0.1",
    fe_port: int = 0,
    be_port: int = 0,
    query_port: int = 0,
    user: str = "root",
    password: str = "",
    extra_args: list[str] | None = None,
    ready_timeout: float = 15.0,
    stderr_path: Path | None = None,
) -> EmulatorProcess:
    """Start ``python -m devstack.starrocks`` and wait for its READY line.

    Raises:
        LaunchError: the process exited or stayed silent for ``ready_timeout`` seconds.
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "devstack.starrocks",
        "--host",
        host,
        "--fe-port",
        str(fe_port),
        "--be-port",
        str(be_port),
        "--query-port",
        str(query_port),
        "--data-dir",
        str(data_dir),
        "--user",
        user,
        "--password",
        password,
        *(extra_args or []),
    ]
    err_target: Any = subprocess.DEVNULL
    err_file = None
    if stderr_path is not None:
        err_file = stderr_path.open("ab")
        err_target = err_file
    repo_root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (repo_root, os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_target, env=env)  # noqa: S603
    if err_file is not None:
        err_file.close()
    try:
        line = read_ready_line(proc, ready_timeout, "emulator", LaunchError)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        raise
    m = _READY.match(line)
    if not m:
        proc.kill()
        msg = f"unexpected first line from emulator: {line!r}"
        raise LaunchError(msg)
    handle = EmulatorHandle(
        host=host,
        fe_port=int(m.group(1)),
        be_port=int(m.group(2)),
        query_port=int(m.group(3)),
        user=user,
        password=password,
        data_dir=data_dir,
        pid=proc.pid,
    )
    return EmulatorProcess(proc, handle)
