"""A process restart on the same data dir keeps data, labels and PREPARED transactions."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from devstack.starrocks.launcher import EmulatorHandle, start_emulator
from tests.integration.devstack.srclient import TxnClient, make_tables

pytestmark = pytest.mark.integration


def test_fixture_contract(starrocks_emulator: EmulatorHandle) -> None:
    h = starrocks_emulator
    assert h.fe_url == f"http://127.0.0.1:{h.fe_port}"
    assert h.be_url == f"http://127.0.0.1:{h.be_port}"
    assert (h.user, h.password) == ("root", "")
    assert h.data_dir.is_dir()
    os.kill(h.pid, 0)  # the PID is the emulator's own
    assert h.sql("SELECT current_version()") == [("4.0.0-emulator",)]
    assert h.control.faults() == []


def test_restart_keeps_data_labels_and_prepared(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = start_emulator(data)
    h = proc.handle
    make_tables(h, "d")
    c = TxnClient(h, "d")
    assert c.call("begin", "done", multi=True, timeout="60").status == "OK"
    assert c.load("done", "t1", [{"id": 1, "amt": "1.10"}], multi=True).status == "OK"
    assert c.call("commit", "done", multi=True).status == "OK"
    assert c.call("begin", "prep", table="t1").status == "OK"
    assert c.load("prep", "t1", [{"id": 2, "amt": "2.20"}]).status == "OK"
    assert c.call("prepare", "prep").status == "OK"
    assert c.call("begin", "open", table="t1").status == "OK"
    assert c.load("open", "t1", [{"id": 3}]).status == "OK"
    assert c.call("begin", "mopen", multi=True, timeout="60").status == "OK"
    # A crash, not a clean stop.
    os.kill(h.pid, signal.SIGKILL)
    proc.proc.wait(10)
    proc.stop()

    proc2 = start_emulator(data)
    try:
        h2 = proc2.handle
        c2 = TxnClient(h2, "d")
        assert h2.sql("SELECT id FROM d.t1") == [(1,)]
        assert c2.state("done") == "VISIBLE"
        loaded = {t["label"]: t["loaded_rows"] for t in h2.control.transactions()}
        assert loaded["done"] == {"t1": 1}  # what the loads brought, kept across the crash
        assert c2.call("begin", "done", multi=True).status == "LABEL_ALREADY_EXISTS"
        # The replayed edit log holds only the task's creation: the committed task is back
        # CANCELLED, its label VISIBLE (restart(journal=True) in test_starrocks_faults.py).
        assert "Can not commit CANCELLED" in c2.call("commit", "done", multi=True).message
        assert c2.state("mopen") == "UNKNOWN"  # cancelAfterRestart; never registered
        assert c2.call("begin", "mopen", multi=True).body["ExistingJobStatus"] == "CANCELLED"
        assert c2.state("open") == "PREPARE"  # FE state kept, BE context gone
        assert c2.load("open", "t1", [{"id": 3}]).status == "TXN_NOT_EXISTS"
        assert c2.state("prep") == "PREPARED"
        r = c2.call("commit", "prep")
        assert r.status == "OK", r.text
        assert h2.sql("SELECT id, amt FROM d.t1 ORDER BY id")[1][0] == 2
        # New txn ids do not collide with recovered ones.
        assert c2.call("begin", "new", table="t1").status == "OK"
        ids = [t["txn_id"] for t in h2.control.transactions()]
        assert len(ids) == len(set(ids))
    finally:
        assert proc2.stop() == 0  # SIGTERM => clean exit 0


def test_custom_password_on_http_and_query_port(tmp_path: Path) -> None:
    with start_emulator(tmp_path / "d", password="s3cret") as h:
        assert h.sql("SELECT 1") == [(1,)]
        make_tables(h, "d")
        c = TxnClient(h, "d")
        assert c.call("begin", "pw", table="t1").status == "OK"
        c.auth = ("root", "")
        r = c.call("commit", "pw")
        assert r.http == 401
        assert r.body["msg"].startswith("Access denied for root@")


def test_chunked_request_body(emu: EmulatorHandle, db: str) -> None:
    c = TxnClient(emu, db)
    assert c.call("begin", "chunked", table="t1").status == "OK"

    def body() -> Iterator[bytes]:
        yield b'[{"id": 1, "v": "a"},'
        yield b'{"id": 2, "v": "b"}]'

    hdrs = {
        "label": "chunked",
        "db": db,
        "table": "t1",
        "format": "json",
        "strip_outer_array": "true",
    }
    r = requests.put(
        f"{emu.be_url}/api/transaction/load",
        headers=hdrs,
        data=body(),
        auth=(emu.user, emu.password),
        timeout=10,
    )
    assert r.json()["Status"] == "OK", r.text
    assert c.call("commit", "chunked").status == "OK"
    assert emu.sql(f"SELECT COUNT(*) FROM {db}.t1") == [(2,)]
