"""Start the proxy in this process (a thread) or as a subprocess, and describe it.

In-process is cheapest for tests; the subprocess form is what a real-stack run uses (and lets
a test kill the proxy independently of the client under test).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from devstack.faultproxy.control import FaultProxyControl
from devstack.faultproxy.errors import ProxyLaunchError
from devstack.faultproxy.server import FaultProxy, ProxyConfig, Target
from devstack.ready import read_ready_line

_READY = re.compile(r"^READY proxy=(\d+)(?: control=(\d+))?$")


@dataclass(frozen=True)
class ProxyHandle:
    """How to reach a running proxy; :meth:`stop` ends it (thread or process)."""

    host: str
    port: int
    control_port: int | None
    pid: int
    _stop: Callable[[], None] = field(repr=False, compare=False)

    @property
    def url(self) -> str:
        """``http://host:port``: what a client uses as its StarRocks ``load-url``."""
        return f"http://{self.host}:{self.port}"

    @property
    def control_url(self) -> str:
        """Base URL of ``/__faults`` (the control listener if any, else the FE listener)."""
        port = self.control_port if self.control_port is not None else self.port
        return f"http://{self.host}:{port}"

    @property
    def control(self) -> FaultProxyControl:
        """Typed fault API."""
        return FaultProxyControl(self.control_url)

    def stop(self) -> None:
        """Stop the proxy and close its connections; idempotent."""
        self._stop()

    def __enter__(self) -> ProxyHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _client_host(listen_host: str) -> str:
    return "127.0.0.1" if listen_host in ("", "0.0.0.0") else listen_host  # noqa: S104


def start_proxy(
    fe_url: str,
    *,
    listen_host: str = "127.0.0.1",
    port: int = 0,
    control_port: int | None = None,
    advertise_host: str | None = None,
    be_ports: Mapping[str, int] | None = None,
    upstream_map: Mapping[str, str] | None = None,
    upstream_timeout: float = 300.0,
) -> ProxyHandle:
    """Run a proxy in front of ``fe_url`` in daemon threads of this process.

    ``be_ports`` maps a BE ``host:port`` (as it appears in ``Location``) to a fixed proxy port;
    ``upstream_map`` maps it to the address the proxy should really connect to.

    Raises:
        ProxyLaunchError: bad address, or a port could not be bound.
    """
    config = ProxyConfig(
        fe=Target.parse(fe_url),
        listen_host=listen_host,
        listen_port=port,
        control_port=control_port,
        advertise_host=advertise_host,
        be_ports={Target.parse(k): v for k, v in (be_ports or {}).items()},
        upstream_map={Target.parse(k): Target.parse(v) for k, v in (upstream_map or {}).items()},
        upstream_timeout=upstream_timeout,
    )
    proxy = FaultProxy(config)
    proxy.start()
    return ProxyHandle(
        host=_client_host(listen_host),
        port=proxy.port,
        control_port=proxy.control_port,
        pid=os.getpid(),
        _stop=proxy.stop,
    )


def spawn_proxy(
    fe_url: str,
    *,
    listen_host: str = "127.0.0.1",
    port: int = 0,
    control_port: int | None = None,
    extra_args: list[str] | None = None,
    ready_timeout: float = 15.0,
    stderr_path: Path | None = None,
) -> ProxyHandle:
    """Start ``python -m devstack.faultproxy`` and wait for its READY line.

    ``stop()`` sends SIGTERM to that PID (SIGKILL after 10 s).

    Raises:
        ProxyLaunchError: the process exited or stayed silent for ``ready_timeout`` seconds.
    """
    cmd = [
        sys.executable,
        "-m",
        "devstack.faultproxy",
        "--fe",
        fe_url,
        "--listen-host",
        listen_host,
        "--listen-port",
        str(port),
        *(["--control-port", str(control_port)] if control_port is not None else []),
        *(extra_args or []),
    ]
    repo_root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (repo_root, os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    err: IO[bytes] | None = stderr_path.open("ab") if stderr_path is not None else None
    try:
        proc = subprocess.Popen(  # noqa: S603 (our own module, argv list, no shell)
            cmd,
            stdout=subprocess.PIPE,
            stderr=err if err is not None else subprocess.DEVNULL,
            env=env,
        )
    finally:
        if err is not None:
            err.close()
    try:
        line = read_ready_line(proc, ready_timeout, "fault proxy", ProxyLaunchError)
    except BaseException:
        _terminate(proc)
        raise
    m = _READY.match(line)
    if not m:
        _terminate(proc)
        msg = f"unexpected first line from fault proxy: {line!r} (cmd: {' '.join(cmd)})"
        raise ProxyLaunchError(msg)
    return ProxyHandle(
        host=_client_host(listen_host),
        port=int(m.group(1)),
        control_port=int(m.group(2)) if m.group(2) else None,
        pid=proc.pid,
        _stop=lambda: _terminate(proc),
    )


def _terminate(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM the proxy by PID, SIGKILL it if it does not exit within 10 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if proc.stdout is not None:
        proc.stdout.close()
