"""devstack.postgres: a real PostgreSQL from the Debian binaries, fresh data dir, by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

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
    try:
        with psycopg.connect(first.conninfo(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (id int primary key)")
            conn.execute("INSERT INTO kept VALUES (1)")
        open_txn = psycopg.connect(first.conninfo())
        open_txn.execute("INSERT INTO kept VALUES (2)")  # never committed
        backend = open_txn.info.backend_pid
        backend_started = _start_time(backend)
        server.kill()
        assert not first.is_running()
        with pytest.raises(ProcessLookupError):
            os.killpg(first.pid, 0)  # the backends died with the postmaster
        assert not _alive(backend, backend_started)
        second = server.start()
        assert second.port == first.port
        with psycopg.connect(second.conninfo()) as conn:
            assert conn.execute("SELECT id FROM kept").fetchall() == [(1,)]
        log = (tmp_path / "pg" / "postgres.log").read_text()
        assert "was interrupted" in log  # crash recovery, not a clean start
    finally:
        server.stop()


def _alive(pid: int, started: str) -> bool:
    """True while the process ``pid`` that started at ``started`` (:func:`_start_time`) runs.

    A zombie waiting for its new parent to reap it does not. Nor does another process that got
    the pid since (pids wrap at 32,768 here, and a test run starts thousands of processes).
    """
    try:
        fields = _stat(pid)
    except FileNotFoundError:
        return False
    return fields[0] != "Z" and fields[19] == started


def _start_time(pid: int) -> str:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat`` field 22)."""
    return _stat(pid)[19]


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
