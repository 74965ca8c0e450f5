"""The protocol audit's findings as the emulator now answers them (spec §4.3a, §4.3b)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from devstack.starrocks.launcher import EmulatorHandle, start_emulator
from tests.integration.devstack.srclient import TxnClient, make_tables

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def first_load(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    d: Path = tmp_path_factory.mktemp("emu_first_load")
    proc = start_emulator(
        d / "data",
        stderr_path=d / "emulator.log",
        extra_args=["--multi-registration", "first_load"],
    )
    try:
        yield proc.handle
    finally:
        proc.stop()


def test_finding_1_commit_registration_begun_label_is_unknown_but_blocked(c: TxnClient) -> None:
    assert c.call("begin", "a1", multi=True, timeout="60").status == "OK"
    assert c.load("a1", "t1", [{"id": 1}], multi=True).status == "OK"
    assert c.state("a1") == "UNKNOWN"
    r = c.call("begin", "a1", multi=True, timeout="60")
    assert (r.status, r.body["ExistingJobStatus"]) == ("LABEL_ALREADY_EXISTS", "BEGIN")
    assert c.call("rollback", "a1", multi=True).status == "OK"
    assert c.state("a1") == "UNKNOWN"
    r = c.call("begin", "a1", multi=True, timeout="60")
    assert (r.status, r.body["ExistingJobStatus"]) == ("LABEL_ALREADY_EXISTS", "CANCELLED")


def test_finding_1_first_load_registration(first_load: EmulatorHandle) -> None:
    make_tables(first_load, "fl")
    c = TxnClient(first_load, "fl")
    assert c.call("begin", "b1", multi=True, timeout="60").status == "OK"
    assert c.state("b1") == "UNKNOWN"  # begin registers nothing
    assert c.load("b1", "t1", [{"id": 1}], multi=True).status == "OK"
    assert c.state("b1") == "PREPARE"  # the first load does
    assert c.call("rollback", "b1", multi=True).status == "OK"
    assert c.state("b1") == "ABORTED"


def test_finding_2_commit_ok_but_failed(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "c2", multi=True, timeout="60").status == "OK"
    assert c.load("c2", "t1", [{"id": 5}], multi=True).status == "OK"
    emu.control.commit_ok_but_failed()
    assert c.call("commit", "c2", multi=True).status == "OK"
    assert c.state("c2") == "ABORTED"  # registered by the commit, then rolled back
    r = c.call("commit", "c2", multi=True)
    assert "Can not commit CANCELLED" in r.message
    assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t1 WHERE id = 5") == [(0,)]


def test_finding_4_zero_load_commit_is_never_registered(c: TxnClient) -> None:
    assert c.call("begin", "z4", multi=True, timeout="60").status == "OK"
    assert c.call("commit", "z4", multi=True).status == "OK"
    assert c.state("z4") == "UNKNOWN"
    r = c.call("begin", "z4", multi=True, timeout="60")
    assert (r.status, r.body["ExistingJobStatus"]) == ("LABEL_ALREADY_EXISTS", "COMMITED")


def test_finding_8_fe_cancel_aborts_a_label_whose_be_context_is_gone(
    emu: EmulatorHandle, c: TxnClient
) -> None:
    assert c.call("begin", "p8", table="t1").status == "OK"
    assert c.load("p8", "t1", [{"id": 8}]).status == "OK"
    emu.control.restart()  # BE contexts gone; the FE keeps the label PREPARE
    assert c.call("rollback", "p8").status == "TXN_NOT_EXISTS"
    r = requests.post(
        f"{emu.fe_url}/api/{c.db}/t1/_cancel?label=p8",
        auth=(emu.user, emu.password),
        timeout=10,
    )
    assert r.json()["status"] == "OK"
    assert c.state("p8") == "ABORTED"


def test_fe_cancel_aborts_only_a_prepare_label_a_prepared_one_is_rolled_back(
    emu: EmulatorHandle, c: TxnClient
) -> None:
    """DatabaseTransactionMgr.abortTransaction(label) finds PREPARE transactions only; the FE
    rolls a PREPARED one back itself (review 12-08)."""
    assert c.call("begin", "p10", table="t1").status == "OK"
    assert c.load("p10", "t1", [{"id": 10}]).status == "OK"
    assert c.call("prepare", "p10", table="t1").status == "OK"
    r = requests.post(
        f"{emu.fe_url}/api/{c.db}/t1/_cancel?label=p10",
        auth=(emu.user, emu.password),
        timeout=10,
    )
    assert (r.json()["status"], r.json()["msg"]) == (
        "FAILED",
        "running transaction not found, label=p10",
    )
    assert c.state("p10") == "PREPARED"
    assert c.call("rollback", "p10", table="t1").status == "OK"
    assert c.state("p10") == "ABORTED"


def test_finding_9_labels_are_global_across_databases(emu: EmulatorHandle, c: TxnClient) -> None:
    make_tables(emu, f"{c.db}_other")
    other = TxnClient(emu, f"{c.db}_other")
    assert c.call("begin", "g9", multi=True, timeout="60").status == "OK"
    r = other.call("begin", "g9", multi=True, timeout="60")
    assert r.status == "LABEL_ALREADY_EXISTS"


def test_finding_9_db_is_checked_before_label(emu: EmulatorHandle) -> None:
    r = requests.post(
        f"{emu.fe_url}/api/transaction/begin",
        headers={"transaction_type": "multi"},
        auth=(emu.user, emu.password),
        timeout=10,
    )
    assert "No database selected." in r.json()["Message"]


def test_finding_9_committed_before_visible(tmp_path: Path) -> None:
    proc = start_emulator(tmp_path / "data", extra_args=["--publish-gap-ms", "1500"])
    try:
        h = proc.handle
        make_tables(h, "pg")
        c = TxnClient(h, "pg")
        assert c.call("begin", "v9", multi=True, timeout="60").status == "OK"
        assert c.load("v9", "t1", [{"id": 1}], multi=True).status == "OK"
        assert c.call("commit", "v9", multi=True).status == "OK"
        assert c.state("v9") == "COMMITTED"
        deadline = time.monotonic() + 10
        while c.state("v9") != "VISIBLE":
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        proc.stop()
