"""Spec §4.1/§4.3 timeouts, TXN_IN_PROCESSING and the running-txn limit."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from devstack.starrocks.launcher import EmulatorHandle, start_emulator
from tests.integration.devstack.srclient import Resp, TxnClient, make_tables

pytestmark = pytest.mark.integration


def _wait_state(c: TxnClient, label: str, want: str, limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while c.state(label) != want:
        assert time.monotonic() < deadline, f"{label} never reached {want}"
        time.sleep(0.05)


def test_single_timeout_aborts(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "t", table="t1", timeout="1").status == "OK"
    assert c.load("t", "t1", [{"id": 1}]).status == "OK"
    _wait_state(c, "t", "ABORTED")
    r = c.load("t", "t1", [{"id": 2}])
    assert r.status == "TXN_NOT_EXISTS"
    r = c.call("commit", "t")
    assert r.status == "FAILED"
    assert "Can not commit ABORTED transaction" in r.message
    txn = next(t for t in emu.control.transactions() if t["label"] == "t" and t["db"] == c.db)
    assert txn["reason"] == "timeout by txn manager"


def test_prepared_timeout_aborts(c: TxnClient) -> None:
    assert c.call("begin", "pt", table="t1").status == "OK"
    assert c.load("pt", "t1", [{"id": 1}]).status == "OK"
    r = c.call("prepare", "pt", prepared_timeout="1")
    assert r.status == "OK"
    assert c.state("pt") == "PREPARED"
    _wait_state(c, "pt", "ABORTED")
    r = c.call("commit", "pt")
    assert r.status == "FAILED"
    assert "Can not commit ABORTED" in r.message
    r = c.call("prepare", "pt2", prepared_timeout="abc")
    assert r.status == "FAILED"  # unknown label: FE answers before the header is parsed


def test_invalid_prepared_timeout_on_be(c: TxnClient) -> None:
    assert c.call("begin", "ipt", table="t1").status == "OK"
    assert c.load("ipt", "t1", [{"id": 1}]).status == "OK"
    r = c.call("prepare", "ipt", prepared_timeout="-3")
    assert (r.status, r.message) == ("INVALID_ARGUMENT", "Invalid prepared_timeout: -3")
    r = c.call("begin", "bad_to", table="t1", timeout="soon")
    assert (r.status, r.message) == ("INVALID_ARGUMENT", "Invalid timeout format")


def test_idle_timeout_aborts(c: TxnClient) -> None:
    assert c.call("begin", "idle", table="t1", idle_transaction_timeout="1").status == "OK"
    assert c.load("idle", "t1", [{"id": 1}]).status == "OK"
    _wait_state(c, "idle", "ABORTED")


def test_multi_timeout_cancels(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "mt", multi=True, timeout="1").status == "OK"
    assert c.load("mt", "t1", [{"id": 1}], multi=True).status == "OK"
    deadline = time.monotonic() + 5.0
    while emu.control.labels()["mt"] != "ABORTED":  # the task; get_load_state stays UNKNOWN
        assert time.monotonic() < deadline, "mt never cancelled"
        time.sleep(0.05)
    assert c.state("mt") == "UNKNOWN"
    r = c.load("mt", "t1", [{"id": 2}], multi=True)
    assert r.status == "FAILED"
    assert "has already been cancelled" in r.message
    r = c.call("commit", "mt", multi=True)
    assert r.status == "FAILED"
    assert "Can not commit CANCELLED" in r.message
    # Label stays blocked while the task is retained (spec §4.3).
    assert c.call("begin", "mt", multi=True).status == "LABEL_ALREADY_EXISTS"


def test_multi_default_timeout_is_20s_single_600s(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "m20", multi=True).status == "OK"
    assert c.call("begin", "s600", table="t1").status == "OK"
    txns = {t["label"]: t for t in emu.control.transactions() if t["db"] == c.db}
    assert txns["m20"]["timeout_s"] == 20
    assert txns["s600"]["timeout_s"] == 600


def test_txn_in_processing(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "busy", table="t1").status == "OK"
    emu.control.delay("load", 1.0)
    results: list[Resp] = []
    slow = threading.Thread(target=lambda: results.append(c.load("busy", "t1", [{"id": 1}])))
    slow.start()
    time.sleep(0.4)
    other = TxnClient(emu, c.db)
    r = other.load("busy", "t1", [{"id": 2}])
    assert r.body == {
        "Status": "TXN_IN_PROCESSING",
        "Label": "busy",
        "Message": "Transaction in processing, please retry later",
    }
    r = other.call("commit", "busy")
    assert r.status == "TXN_IN_PROCESSING"
    slow.join()
    assert results[0].status == "OK"
    assert c.call("commit", "busy").status == "OK"
    # Multi-table: one channel per (label, table); another table is not blocked.
    assert c.call("begin", "mbusy", multi=True, timeout="30").status == "OK"
    emu.control.delay("load", 1.0)
    slow = threading.Thread(
        target=lambda: results.append(c.load("mbusy", "t1", [{"id": 3}], multi=True))
    )
    slow.start()
    time.sleep(0.4)
    assert other.load("mbusy", "t1", [{"id": 4}], multi=True).status == "TXN_IN_PROCESSING"
    assert other.load("mbusy", "t2", [{"id": 4}], multi=True).status == "OK"
    slow.join()
    assert c.call("commit", "mbusy", multi=True).status == "OK"


def test_running_txn_limit(tmp_path: Path) -> None:
    proc = start_emulator(tmp_path / "d", extra_args=["--max-running-txns", "2"])
    try:
        h = proc.handle
        make_tables(h, "d")
        c = TxnClient(h, "d")
        assert c.call("begin", "a", table="t1").status == "OK"
        assert c.call("begin", "b", multi=True).status == "OK"
        r = c.call("begin", "c", table="t1")
        assert r.status == "ANALYSIS_ERROR"
        assert r.message == "current running txns on db 10001 is 2, larger than limit 2"
        r = c.call("begin", "c", multi=True)
        assert r.status == "FAILED"
        assert "current running txns on db 10001 is 2" in r.message
        assert c.call("rollback", "a").status == "OK"
        assert c.call("begin", "c", table="t1").status == "OK"
    finally:
        proc.stop()
