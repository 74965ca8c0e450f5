"""devstack.postgres: a real PostgreSQL from the Debian binaries, fresh data dir, by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from devstack.pipeline_process import descendant_pids
from devstack.postgres import PostgresServer, PostgresStartError, find_pg_bin, start_postgres
from devstack.ready import read_ready_line

pytestmark = pytest.mark.integration


def test_server_is_logical_and_reachable_over_tcp_and_socket(
    postgres_server: PostgresServer,
) -> None:
    handle = postgres_server.handle
    with psycopg.connect(handle.conninfo()) as conn:
        assert conn.execute("SHOW wal_level").fetchone() == ("logical",)
        port = conn.execute("SHOW port").fetchone()
        version = conn.execute("SHOW server_version_num").fetchone()
        assert port is not None
        assert version is not None
        assert int(port[0]) == handle.port
        major = int(version[0]) // 10000
    assert major == int(find_pg_bin().parent.name)
    assert (handle.socket_dir / f".s.PGSQL.{handle.port}").is_socket()
    with psycopg.connect(host=str(handle.socket_dir), port=handle.port, user="postgres") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_restart_keeps_data_and_port(tmp_path: Path) -> None:
    first = start_postgres(tmp_path / "pg")
    try:
        with psycopg.connect(first.conninfo(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (id int primary key)")
            conn.execute("INSERT INTO kept VALUES (7)")
    finally:
        first.stop()
    assert not first.is_running()
    second = start_postgres(tmp_path / "pg")
    try:
        assert second.port == first.port
        assert second.pid != first.pid
        with psycopg.connect(second.conninfo()) as conn:
            assert conn.execute("SELECT id FROM kept").fetchall() == [(7,)]
    finally:
        second.stop()


def test_kill_crashes_every_server_process_and_start_recovers_committed_work(
    tmp_path: Path,
) -> None:
    server = PostgresServer(tmp_path / "pg")
    first = server.start()
    busy_query = None
    backends: dict[int, str] = {}
    try:
        with psycopg.connect(first.conninfo(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (id int primary key)")
            conn.execute("INSERT INTO kept VALUES (1)")
        open_txn = psycopg.connect(first.conninfo())
        open_txn.execute("INSERT INTO kept VALUES (2)")  # never committed
        # A backend busy in a statement notices its postmaster's death only after it: each
        # child is a session of its own, so a kill of the postmaster's group alone left it.
        busy = psycopg.connect(first.conninfo(), autocommit=True)
        busy_query = threading.Thread(target=_run_until_killed, args=(busy,), daemon=True)
        busy_query.start()
        _wait_active(first.conninfo(), busy.info.backend_pid)
        backends.update(_server_processes(first.pid))
        assert open_txn.info.backend_pid in backends
        assert busy.info.backend_pid in backends
        server.kill()
        assert not first.is_running()
        alive = [pid for pid, started in backends.items() if _alive(pid, started)]
        assert alive == [], "server processes outlived kill()"
        second = server.start()
        assert second.port == first.port
        with psycopg.connect(second.conninfo()) as conn:
            assert conn.execute("SELECT id FROM kept").fetchall() == [(1,)]
        log = (tmp_path / "pg" / "postgres.log").read_text()
        assert "was interrupted" in log  # crash recovery, not a clean start
    finally:
        server.stop()
        for pid, started in backends.items():  # what a failed kill() left, busy for minutes
            if _alive(pid, started):
                os.kill(pid, signal.SIGKILL)
        if busy_query is not None:
            busy_query.join(timeout=10)


def _run_until_killed(conn: psycopg.Connection) -> None:
    """A statement that runs for minutes, ended only by the server's death."""
    with contextlib.suppress(psycopg.OperationalError):
        conn.execute("SELECT count(*) FROM generate_series(1, 10000000000)")


def _wait_active(conninfo: str, backend: int) -> None:
    deadline = time.monotonic() + 30
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while time.monotonic() < deadline:
            query = "SELECT state FROM pg_stat_activity WHERE pid = %s"
            if conn.execute(query, (backend,)).fetchone() == ("active",):
                return
            time.sleep(0.05)
    raise AssertionError(f"backend {backend} never started its statement")


def _server_processes(postmaster: int) -> dict[int, str]:
    """The postmaster and every live process below it, each with its start time (the
    ``/proc/PID/stat`` field 22, clock ticks since boot). A child that exits between the
    listing and its read is left out: a connection just closed, an autovacuum worker.
    """
    out: dict[int, str] = {}
    for pid in [postmaster, *descendant_pids(postmaster)]:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            out[pid] = _stat(pid)[19]
    return out


def _alive(pid: int, started: str) -> bool:
    """True while the process ``pid`` that started at ``started`` runs.

    A zombie waiting for its new parent to reap it does not. Nor does another process that got
    the pid since (pids wrap at 32,768 here, and a test run starts thousands of processes).
    """
    try:
        fields = _stat(pid)
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] != "Z" and fields[19] == started


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name (the process state first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def test_cli_prints_ready_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "devstack.postgres", "--data-dir", str(tmp_path / "pg")],
        stdout=subprocess.PIPE,
    )
    try:
        line = read_ready_line(proc, 90, "postgres CLI", RuntimeError)
        fields = dict(f.split("=", 1) for f in line.split()[1:])
        assert line.startswith("READY ")
        pid = int(fields["pid"])
        with psycopg.connect(f"host={fields['host']} port={fields['port']} user=postgres") as c:
            assert c.execute("SHOW wal_level").fetchone() == ("logical",)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_pg_bin_override_must_hold_binaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PG_BIN", str(tmp_path))
    with pytest.raises(PostgresStartError, match="no postgres/initdb"):
        find_pg_bin()
