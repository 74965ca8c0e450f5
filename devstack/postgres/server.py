"""Start and stop a real PostgreSQL server (the machine's binaries) in a fresh data dir.

Debian installs each major version side by side under ``/usr/lib/postgresql/<major>/bin``
(``initdb``, ``postgres``, ``pg_isready`` are not on ``PATH``); :func:`find_pg_bin` picks the
newest major there that is at least 15, or ``PG_BIN`` when set. The cluster is made by
``initdb`` (trust authentication, superuser ``postgres``: a local throw-away database) and
run by starting ``postgres`` itself as our child, so its PID is the postmaster's and
stopping is a signal to a process we started.

Layout of ``data_dir``: ``pgdata/`` (the cluster; its unix socket lives there too),
``postgres.log`` (server output), ``port`` (the port chosen at the first start, kept for
restarts).

Root: PostgreSQL refuses to run as root, so when this runs as root (containers) ``initdb`` and
``postgres`` run as the ``postgres`` OS user that Debian's package creates, ``pgdata`` is
handed to that user, and the directories above it get search permission (``o+x``, not read)
so that it can reach its data dir.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from devstack import children
from devstack.kafka.broker import free_port
from devstack.pipeline_process import descendant_pids
from devstack.postgres.errors import PostgresStartError

logger = logging.getLogger(__name__)

DEBIAN_ROOT = Path("/usr/lib/postgresql")
MIN_MAJOR = 15
SUPERUSER = "postgres"
_LOG_NAME = "postgres.log"
_PORT_NAME = "port"
# sockaddr_un.sun_path is 108 bytes on Linux, NUL included.
_MAX_SOCKET_PATH = 107

# Server settings passed with -c (postgresql.conf stays initdb's). Each carries its why.
_SETTINGS = (
    # Debezium's pgoutput plugin needs logical decoding.
    ("wal_level", "logical"),
    # One replication slot and WAL sender per connector, plus room for a restart's overlap.
    ("max_wal_senders", "4"),
    ("max_replication_slots", "4"),
    # A throw-away database on a shared 2-core machine: small, and no fsync (a crash of the
    # machine loses the cluster, which a test recreates anyway; a kill -9 of postgres is
    # still crash-safe because the WAL is written, only not flushed).
    ("shared_buffers", "32MB"),
    ("fsync", "off"),
    ("full_page_writes", "off"),
    ("max_connections", "40"),
    # Commit timestamps in Debezium's source.ts_ms are the commit's, whatever this says; the
    # log line prefix makes the log readable next to the other processes' logs.
    ("log_line_prefix", "%m [%p] "),
    ("listen_addresses", "127.0.0.1"),
)


def find_pg_bin(min_major: int = MIN_MAJOR) -> Path:
    """The ``bin`` folder of the newest installed PostgreSQL ``>= min_major``.

    ``PG_BIN`` overrides the search (any layout); otherwise Debian's
    ``/usr/lib/postgresql/<major>/bin`` is searched.

    Raises:
        PostgresStartError: nothing usable is installed.
    """
    given = os.environ.get("PG_BIN")
    if given:
        folder = Path(given)
        if not (folder / "postgres").is_file() or not (folder / "initdb").is_file():
            msg = f"PG_BIN={given} has no postgres/initdb binaries"
            raise PostgresStartError(msg)
        return folder
    majors: list[tuple[int, Path]] = []
    if DEBIAN_ROOT.is_dir():
        for entry in DEBIAN_ROOT.iterdir():
            if re.fullmatch(r"\d+", entry.name) and (entry / "bin" / "initdb").is_file():
                majors.append((int(entry.name), entry / "bin"))
    usable = sorted(m for m in majors if m[0] >= min_major)
    if not usable:
        found = ", ".join(str(m) for m, _ in sorted(majors)) or "none"
        msg = (
            f"no PostgreSQL >= {min_major} under {DEBIAN_ROOT}/<major>/bin (found: {found}): "
            f"apt-get install postgresql-{min_major}, or set PG_BIN to a folder with "
            "initdb and postgres"
        )
        raise PostgresStartError(msg)
    return usable[-1][1]


@dataclass(frozen=True)
class PostgresHandle:
    """A running server: where to connect, which process it is, where its data lives."""

    host: str
    port: int
    pid: int
    data_dir: Path
    socket_dir: Path
    user: str = SUPERUSER

    def conninfo(self, dbname: str = "postgres") -> str:
        """A libpq connection string over TCP (what Debezium uses too)."""
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname}"

    def is_running(self) -> bool:
        """True while the postmaster exists (reaping it if it has exited)."""
        return children.is_running(self.pid)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop by PID: SIGINT (fast shutdown), bounded wait, then SIGKILL. Idempotent.

        Fast, not smart (SIGTERM): a smart shutdown waits for every client to leave, and
        Debezium's replication connection never does.
        """
        children.stop(self.pid, signal.SIGINT, timeout, "postgres")

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL every process of the server at once: a crash. Idempotent.

        The postmaster and every process it forked (backends, WAL senders, writers), as a crash
        of the machine would, not the postmaster alone: a backend notices its postmaster's death
        only later (a busy one after its statement), and while it keeps the shared memory
        attached the next start refuses to run. Not by process group either: PostgreSQL makes
        each child the leader of a session of its own (``setsid`` in ``InitPostmasterChild``),
        so the postmaster's group holds only itself. It is stopped first, so that it forks
        nothing between the listing of its children and their kill. What the server had written
        survives (the kernel still holds it); the next start replays the WAL.

        Raises:
            PostgresStartError: a process of the server outlived ``timeout`` seconds.
        """
        if not children.is_running(self.pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGSTOP)
        server = {
            pid: started
            for pid in [self.pid, *descendant_pids(self.pid)]
            if (started := _started(pid))
        }
        for pid in server:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        children.kill(self.pid)  # reaps the postmaster, our child
        deadline = time.monotonic() + timeout
        while left := [pid for pid, started in server.items() if _started(pid) == started]:
            if time.monotonic() > deadline:
                msg = (
                    f"postgres pid={self.pid}: server processes {left} outlived SIGKILL {timeout}s"
                )
                raise PostgresStartError(msg)
            time.sleep(0.05)


def _started(pid: int) -> str | None:
    """When the live process ``pid`` started; ``None`` once it is gone or a zombie.

    The start (``/proc/PID/stat`` field 22, clock ticks since boot) tells a PID reused since
    apart. A zombie has released its memory; its new parent reaps it when it will.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _run_as() -> pwd.struct_passwd | None:
    """The OS user to run PostgreSQL as: ``None`` (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SUPERUSER)
    except KeyError as e:
        msg = (
            "PostgreSQL refuses to run as root and there is no 'postgres' OS user to run it "
            "as: run as another user or create one (the Debian package does)"
        )
        raise PostgresStartError(msg) from e


def _make_reachable(path: Path) -> None:
    """Give ``path`` and its ancestors search permission for others (root only, see above)."""
    for folder in (*reversed(path.parents), path):
        mode = folder.stat().st_mode
        if not mode & 0o001:
            folder.chmod(mode | 0o001)


def _port(data: Path, port: int) -> int:
    saved = data / _PORT_NAME
    if saved.is_file():
        kept = int(saved.read_text().strip())
        return kept if port in (0, kept) else port
    chosen = port or free_port()
    saved.write_text(f"{chosen}\n")
    return chosen


def start_postgres(data_dir: Path | str, port: int = 0, timeout: float = 60.0) -> PostgresHandle:
    """Start PostgreSQL on 127.0.0.1 (``initdb`` first if new) and wait until it accepts.

    Args:
        data_dir: where the cluster, its socket and its log live; a fresh one per test. A
            data dir started before is restarted with its data and port.
        port: TCP port; 0 picks a free one (kept for restarts of this data dir).
        timeout: seconds to wait for ``pg_isready``.

    Raises:
        PostgresStartError: no binaries, ``initdb`` failed, the server exited or did not
            accept connections in time; the message carries the tail of its log.
    """
    data = Path(data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    bin_dir = find_pg_bin()
    pgdata = data / "pgdata"
    socket_path = pgdata / f".s.PGSQL.{port or 65535}"
    if len(str(socket_path)) > _MAX_SOCKET_PATH:
        msg = (
            f"data dir {data} is too long for a unix socket path ({len(str(socket_path))} > "
            f"{_MAX_SOCKET_PATH} bytes): use a shorter one"
        )
        raise PostgresStartError(msg)
    port = _port(data, port)
    user = _run_as()
    log_path = data / _LOG_NAME
    log_path.touch()
    if user is not None:
        _make_reachable(data)
        os.chown(log_path, user.pw_uid, user.pw_gid)
    if not (pgdata / "PG_VERSION").is_file():
        _initdb(bin_dir, pgdata, log_path, user)
    argv = [str(bin_dir / "postgres"), "-D", str(pgdata), "-p", str(port)]
    argv += ["-c", f"unix_socket_directories={pgdata}"]
    for key, value in _SETTINGS:
        argv += ["-c", f"{key}={value}"]
    with log_path.open("ab") as log:
        offset = log.tell()
        # Output to a file, not a pipe: nobody drains a pipe for the server's lifetime.
        proc = subprocess.Popen(  # noqa: S603 - fixed argv: the installed postgres binary
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            user=user.pw_uid if user is not None else None,
            group=user.pw_gid if user is not None else None,
            extra_groups=[] if user is not None else None,
            # Its own process group: a Ctrl-C in the terminal reaches our CLI, which then
            # stops the server in order, instead of killing it behind our back.
            start_new_session=True,
        )
    children.track(proc)
    handle = PostgresHandle(
        host="127.0.0.1", port=port, pid=proc.pid, data_dir=data, socket_dir=pgdata
    )
    try:
        _wait_ready(bin_dir, proc, handle, log_path, offset, time.monotonic() + timeout)
    except BaseException:
        children.abandon(proc)
        raise
    logger.info("postgres ready port=%s pid=%s data_dir=%s", port, proc.pid, data)
    return handle


def _initdb(bin_dir: Path, pgdata: Path, log_path: Path, user: pwd.struct_passwd | None) -> None:
    pgdata.mkdir(mode=0o700, exist_ok=True)
    if user is not None:
        os.chown(pgdata, user.pw_uid, user.pw_gid)
    argv = [
        str(bin_dir / "initdb"),
        "-D",
        str(pgdata),
        "-U",
        SUPERUSER,
        # A local throw-away cluster: trust on localhost and the socket, replication included.
        "--auth=trust",
        "--encoding=UTF8",
        "--locale=C",
        "--no-sync",
    ]
    with log_path.open("ab") as log:
        done = subprocess.run(  # noqa: S603 - fixed argv: the installed initdb binary
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            user=user.pw_uid if user is not None else None,
            group=user.pw_gid if user is not None else None,
            extra_groups=[] if user is not None else None,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        text = log_path.read_text(errors="replace")
        msg = f"initdb of {pgdata} failed (exit {done.returncode}); log:\n{text[-2000:]}"
        raise PostgresStartError(msg)


def _wait_ready(
    bin_dir: Path,
    proc: subprocess.Popen[bytes],
    handle: PostgresHandle,
    log_path: Path,
    offset: int,
    deadline: float,
) -> None:
    isready = [str(bin_dir / "pg_isready"), "-q", "-h", handle.host, "-p", str(handle.port)]
    while True:
        if proc.poll() is not None:
            text = children.read_from(log_path, offset)
            msg = f"postgres exited ({proc.returncode}) while starting; log:\n{text[-2000:]}"
            raise PostgresStartError(msg)
        if time.monotonic() > deadline:
            text = children.read_from(log_path, offset)
            msg = f"postgres did not accept connections on port {handle.port}; log:\n{text[-2000:]}"
            raise PostgresStartError(msg)
        # Exit 0 = accepting connections (1 = starting up / rejecting, 2 = no answer).
        done = subprocess.run(isready, check=False, timeout=10)  # noqa: S603 - fixed argv
        if done.returncode == 0:
            return
        time.sleep(0.1)


def pg_bin_tool(name: str) -> Path:
    """Path of one of the installed client tools (``psql``, ``pg_isready``, ...)."""
    tool = find_pg_bin() / name
    if not tool.is_file():
        found = shutil.which(name)
        if found is None:
            msg = f"{name} not found next to postgres in {tool.parent} nor on PATH"
            raise PostgresStartError(msg)
        return Path(found)
    return tool


class PostgresServer(children.Service[PostgresHandle]):
    """A server whose handle survives restarts; a context manager that stops it on exit."""

    what = "postgres"
    start_error = PostgresStartError

    def __init__(self, data_dir: Path | str, port: int = 0) -> None:
        super().__init__(data_dir)
        self._port = port

    def _launch(self) -> PostgresHandle:
        # Port 0 is resolved once and then kept for restarts.
        handle = start_postgres(self._data_dir, port=self._port)
        self._port = handle.port
        return handle
