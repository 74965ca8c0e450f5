"""Every fault knob of EmulatorControl, and the admin API behind it."""

from __future__ import annotations

import time

import pytest
import requests

from devstack.starrocks.faults import write_lock_timeout
from devstack.starrocks.launcher import EmulatorHandle
from tests.integration.devstack.srclient import TxnClient

pytestmark = pytest.mark.integration


def test_fail_next_each_op(c: TxnClient, emu: EmulatorHandle) -> None:
    ctl = emu.control
    ctl.fail_next("begin", status="INTERNAL_ERROR", message="boom")
    r = c.call("begin", "f", table="t1")
    assert (r.status, r.message, r.node) == ("INTERNAL_ERROR", "boom", "be")
    assert c.state("f") == "UNKNOWN"  # a failed op does nothing
    assert c.call("begin", "f", table="t1").status == "OK"  # count=1: consumed
    ctl.fail_next("load", count=2, status="TXN_IN_PROCESSING", message="busy")
    assert c.load("f", "t1", [{"id": 1}]).status == "TXN_IN_PROCESSING"
    assert c.load("f", "t1", [{"id": 1}]).status == "TXN_IN_PROCESSING"
    assert c.load("f", "t1", [{"id": 1}]).status == "OK"
    ctl.fail_next("prepare", message="nope")
    assert c.call("prepare", "f").message == "nope"
    assert c.call("prepare", "f").status == "OK"
    ctl.fail_next("commit", status="FAILED", message="fe says no", http_status=503)
    r = c.call("commit", "f")  # PREPARED: answered by the FE
    assert (r.http, r.status, r.node) == (503, "FAILED", "fe")
    assert c.state("f") == "PREPARED"
    ctl.fail_next("rollback")
    assert c.call("rollback", "f").status == "INTERNAL_ERROR"
    ctl.fail_next("get_load_state", status="FAILED")
    raw = requests.get(
        f"{emu.fe_url}/api/{c.db}/get_load_state?label=f", auth=(emu.user, emu.password), timeout=10
    )
    assert raw.json()["Status"] == "FAILED"
    assert c.state("f") == "PREPARED"
    assert c.call("commit", "f").status == "OK"
    assert ctl.faults() == []


def test_delay(c: TxnClient, emu: EmulatorHandle) -> None:
    emu.control.delay("begin", 0.5)
    t0 = time.monotonic()
    assert c.call("begin", "d", multi=True).status == "OK"
    assert time.monotonic() - t0 >= 0.5


def test_drop_commit_response_still_commits(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "drop", multi=True, timeout="30").status == "OK"
    assert c.load("drop", "t1", [{"id": 1}], multi=True).status == "OK"
    emu.control.drop_commit_response()
    with pytest.raises(requests.ConnectionError):
        c.call("commit", "drop", multi=True)
    assert c.state("drop") == "VISIBLE"
    assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t1") == [(1,)]
    r = c.call("commit", "drop", multi=True)
    assert r.status == "OK"
    assert "has already committed" in r.message


def test_publish_timeout(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "pub", table="t1").status == "OK"
    assert c.load("pub", "t1", [{"id": 1}]).status == "OK"
    assert c.call("prepare", "pub").status == "OK"
    emu.control.publish_timeout()
    r = c.call("commit", "pub", timeout="7")
    assert r.status == "FAILED"
    assert r.message == "class com.starrocks.common.StarRocksException: publish timeout: 7000"
    assert c.state("pub") == "COMMITTED"
    r = c.call("commit", "pub")
    assert r.status == "OK"
    assert "has already committed" in r.message
    time.sleep(0.9)
    assert c.state("pub") == "VISIBLE"
    # BE-path commit (txn still PREPARE): PUBLISH_TIMEOUT status.
    assert c.call("begin", "pub2", table="t1").status == "OK"
    assert c.load("pub2", "t1", [{"id": 2}]).status == "OK"
    emu.control.publish_timeout()
    r = c.call("commit", "pub2")
    assert (r.status, r.node) == ("PUBLISH_TIMEOUT", "be")
    assert "Publish timeout" in r.message
    # Multi-table.
    assert c.call("begin", "pub3", multi=True, timeout="30").status == "OK"
    assert c.load("pub3", "t2", [{"id": 3}], multi=True).status == "OK"
    emu.control.publish_timeout()
    r = c.call("commit", "pub3", multi=True)
    # The multi-table commit that waits for publish answers OK with the txn COMMITTED.
    assert r.status == "OK", r.text
    assert c.state("pub3") in ("COMMITTED", "VISIBLE")
    assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t2") == [(1,)]


def test_too_many_txns(c: TxnClient, emu: EmulatorHandle) -> None:
    emu.control.too_many_txns(2)
    r = c.call("begin", "tm", table="t1")
    assert r.status == "ANALYSIS_ERROR"
    assert "larger than limit 100" in r.message
    assert r.message.startswith("current running txns on db ")
    r = c.call("begin", "tm", multi=True)
    assert r.status == "FAILED"
    assert "current running txns on db" in r.message
    assert c.call("begin", "tm", multi=True).status == "OK"


def test_restart_knob_cancels_multi_and_drops_be_contexts(
    c: TxnClient, emu: EmulatorHandle
) -> None:
    assert c.call("begin", "rm", multi=True, timeout="60").status == "OK"
    assert c.load("rm", "t1", [{"id": 1}], multi=True).status == "OK"
    assert c.call("begin", "rs", table="t1").status == "OK"
    assert c.load("rs", "t1", [{"id": 2}]).status == "OK"
    assert c.call("begin", "rp", table="t1").status == "OK"
    assert c.load("rp", "t1", [{"id": 3}]).status == "OK"
    assert c.call("prepare", "rp").status == "OK"
    emu.control.restart()
    assert c.state("rm") == "UNKNOWN"  # never registered (4.0: at commit), yet blocked
    assert emu.control.labels()["rm"] == "ABORTED"
    assert c.call("begin", "rm", multi=True).body["ExistingJobStatus"] == "CANCELLED"
    r = c.call("commit", "rm", multi=True)
    assert r.status == "FAILED"
    assert "Can not commit CANCELLED" in r.message
    assert c.state("rs") == "PREPARE"
    assert c.load("rs", "t1", [{"id": 2}]).status == "TXN_NOT_EXISTS"
    assert c.call("commit", "rs").status == "TXN_NOT_EXISTS"
    assert c.call("commit", "rp").status == "OK"  # PREPARED survives
    assert emu.sql(f"SELECT id FROM {c.db}.t1") == [(3,)]


def test_journal_restart_cancels_committed_multi_tasks_and_keeps_their_labels_visible(
    c: TxnClient, emu: EmulatorHandle
) -> None:
    assert c.call("begin", "jr", multi=True, timeout="60").status == "OK"
    assert c.load("jr", "t1", [{"id": 7}], multi=True).status == "OK"
    assert c.call("commit", "jr", multi=True).status == "OK"
    emu.control.restart()  # as an image holds it: the task stays committed
    assert "has already committed" in c.call("commit", "jr", multi=True).message
    emu.control.restart(journal=True)  # the journal holds only the task's creation
    r = c.call("commit", "jr", multi=True)
    assert r.status == "FAILED"
    assert "Can not commit CANCELLED" in r.message
    r = c.call("rollback", "jr", multi=True)
    assert (r.status, "has already aborted" in r.message) == ("OK", True)
    assert "has already been cancelled" in c.load("jr", "t1", [{"id": 8}], multi=True).message
    assert c.call("begin", "jr", multi=True).body["ExistingJobStatus"] == "CANCELLED"
    assert c.state("jr") == "VISIBLE"  # the transaction manager keeps the outcome
    assert emu.sql(f"SELECT id FROM {c.db}.t1") == [(7,)]


def test_journal_restart_fault_commits_then_loses_the_answer(
    c: TxnClient, emu: EmulatorHandle
) -> None:
    assert c.call("begin", "jf", multi=True, timeout="60").status == "OK"
    assert c.load("jf", "t1", [{"id": 9}], multi=True).status == "OK"
    emu.control.journal_restart_after_commit(1)
    with pytest.raises(requests.ConnectionError):
        c.call("commit", "jf", multi=True)
    assert "Can not commit CANCELLED" in c.call("commit", "jf", multi=True).message
    assert c.state("jf") == "VISIBLE"
    assert emu.sql(f"SELECT id FROM {c.db}.t1") == [(9,)]


def test_commit_failed_rolls_a_multi_table_task_back_and_leaves_a_prepared_txn_open(
    c: TxnClient, emu: EmulatorHandle
) -> None:
    """As ``StreamLoadMultiStmtTask.commitTxn`` does when ``commitStmt`` fails (ABORTING,
    then CANCELLED), while a single-table commit that fails leaves the txn PREPARED."""
    lock_timeout = write_lock_timeout(c.db)
    assert c.call("begin", "cf", multi=True, timeout="60").status == "OK"
    assert c.load("cf", "t1", [{"id": 5}], multi=True).status == "OK"
    emu.control.commit_failed(lock_timeout)
    r = c.call("commit", "cf", multi=True)
    assert (r.status, r.message) == ("FAILED", lock_timeout)
    assert "Can not commit CANCELLED" in c.call("commit", "cf", multi=True).message
    assert c.call("begin", "cf", multi=True).body["ExistingJobStatus"] == "CANCELLED"
    assert c.state("cf") == "ABORTED"
    assert c.call("begin", "cs", table="t1").status == "OK"
    assert c.load("cs", "t1", [{"id": 6}]).status == "OK"
    assert c.call("prepare", "cs").status == "OK"
    emu.control.commit_failed(lock_timeout)
    r = c.call("commit", "cs")
    assert (r.status, r.message, r.node) == ("FAILED", lock_timeout, "fe")
    assert c.state("cs") == "PREPARED"
    assert c.call("commit", "cs").status == "OK"
    assert emu.sql(f"SELECT id FROM {c.db}.t1") == [(6,)]
    assert emu.control.faults() == []


def test_admin_api_validation_and_listing(c: TxnClient, emu: EmulatorHandle) -> None:
    r = requests.post(
        f"{emu.fe_url}/_emulator/faults", json={"op": "nope", "kind": "fail"}, timeout=10
    )
    assert r.status_code == 400
    emu.control.fail_next("commit", count=3)
    assert emu.control.faults()[0]["count"] == 3
    emu.control.reset()
    assert emu.control.faults() == []
    assert c.call("begin", "lst", table="t1").status == "OK"
    assert emu.control.labels(c.db) == {"lst": "PREPARE"}
