"""Every cell of spec §4.2 (single-table) and §4.3 (multi-table), over real HTTP.

One emulator serves the whole module (each cell uses its own label, so cells are independent);
each cell drives a label into the row's state, sends the column's operation and asserts the
status, the message, which node answered and the state afterwards.
"""

from __future__ import annotations

import itertools

import pytest

from devstack.starrocks.launcher import EmulatorHandle
from tests.integration.devstack.srclient import Resp, TxnClient

pytestmark = pytest.mark.integration

_counter = itertools.count()
ROW = [{"id": 1, "v": "a", "amt": "1.50"}]


def _ok(r: Resp) -> Resp:
    assert r.status == "OK", r.text
    return r


def single_setup(c: TxnClient, state: str) -> str:
    label = f"s{next(_counter)}_{state.lower()}"
    if state == "none":
        return label
    _ok(c.call("begin", label, table="t1"))
    if state == "PREPARE_nodata":
        return label
    _ok(c.load(label, "t1", ROW))
    if state == "PREPARE_data":
        return label
    if state == "ABORTED":
        _ok(c.call("rollback", label))
        return label
    _ok(c.call("prepare", label, table="t1"))
    if state == "PREPARED":
        return label
    assert state == "VISIBLE"
    _ok(c.call("commit", label))
    return label


# (state, op) -> (status, message substring, answering node, state afterwards)
SINGLE = {
    ("none", "begin"): ("OK", "", "be", "PREPARE"),
    ("none", "load"): (
        "FAILED",
        "Can't find the transaction with db [{db}] and label[",
        "fe",
        "UNKNOWN",
    ),
    ("none", "prepare"): (
        "FAILED",
        "No transaction found with db[{db}] and label[",
        "fe",
        "UNKNOWN",
    ),
    ("none", "commit"): (
        "FAILED",
        "No transaction found with db[{db}] and label[",
        "fe",
        "UNKNOWN",
    ),
    ("none", "rollback"): (
        "FAILED",
        "No transaction found with db[{db}] and label[",
        "fe",
        "UNKNOWN",
    ),
    ("PREPARE_nodata", "begin"): ("LABEL_ALREADY_EXISTS", "", "be", "PREPARE"),
    ("PREPARE_nodata", "load"): ("OK", "", "be", "PREPARE"),
    ("PREPARE_nodata", "prepare"): ("INTERNAL_ERROR", "hasn't send any data yet", "be", "ABORTED"),
    ("PREPARE_nodata", "commit"): ("INTERNAL_ERROR", "hasn't send any data yet", "be", "ABORTED"),
    ("PREPARE_nodata", "rollback"): ("OK", "", "be", "ABORTED"),
    ("PREPARE_data", "begin"): ("LABEL_ALREADY_EXISTS", "", "be", "PREPARE"),
    ("PREPARE_data", "load"): ("OK", "", "be", "PREPARE"),
    ("PREPARE_data", "prepare"): ("OK", "", "be", "PREPARED"),
    ("PREPARE_data", "commit"): ("OK", "", "be", "VISIBLE"),
    ("PREPARE_data", "rollback"): ("OK", "", "be", "ABORTED"),
    ("PREPARED", "begin"): ("LABEL_ALREADY_EXISTS", "has already been used.", "be", "PREPARED"),
    ("PREPARED", "load"): ("TXN_NOT_EXISTS", "Transaction with label", "be", "PREPARED"),
    ("PREPARED", "prepare"): ("TXN_NOT_EXISTS", "transaction with label", "be", "PREPARED"),
    ("PREPARED", "commit"): ("OK", "", "fe", "VISIBLE"),
    ("PREPARED", "rollback"): ("OK", "", "fe", "ABORTED"),
    ("VISIBLE", "begin"): ("LABEL_ALREADY_EXISTS", "has already been used.", "be", "VISIBLE"),
    ("VISIBLE", "load"): ("TXN_NOT_EXISTS", "Transaction with label", "be", "VISIBLE"),
    ("VISIBLE", "prepare"): ("TXN_NOT_EXISTS", "transaction with label", "be", "VISIBLE"),
    ("VISIBLE", "commit"): ("OK", "has already committed, label is", "fe", "VISIBLE"),
    ("VISIBLE", "rollback"): ("FAILED", "Can not abort VISIBLE transaction", "fe", "VISIBLE"),
    ("ABORTED", "begin"): ("OK", "", "be", "PREPARE"),
    ("ABORTED", "load"): ("TXN_NOT_EXISTS", "Transaction with label", "be", "ABORTED"),
    ("ABORTED", "prepare"): ("TXN_NOT_EXISTS", "transaction with label", "be", "ABORTED"),
    ("ABORTED", "commit"): ("FAILED", "Can not commit ABORTED transaction", "fe", "ABORTED"),
    ("ABORTED", "rollback"): ("OK", "has already aborted, label is", "fe", "ABORTED"),
}


def single_op(c: TxnClient, op: str, label: str) -> Resp:
    if op == "load":
        return c.load(label, "t1", ROW)
    return c.call(op, label, table="t1" if op in ("begin", "prepare") else None)


@pytest.mark.parametrize(("state", "op"), list(SINGLE), ids=[f"{s}-{o}" for s, o in SINGLE])
def test_single_table_matrix(c: TxnClient, state: str, op: str) -> None:
    status, message, node, after = SINGLE[(state, op)]
    message = message.replace("{db}", c.db)
    label = single_setup(c, state)
    r = single_op(c, op, label)
    assert r.http == 200
    assert r.status == status, r.text
    assert message in r.message, r.text
    assert r.node == node, r.text
    assert c.state(label) == after
    if state == "none":
        return
    if status == "OK" and op in ("prepare", "commit") and node == "be":
        assert r.body["NumberTotalRows"] == 1
        assert r.body["NumberLoadedRows"] == 1
        assert list(r.body)[:3] == ["Status", "Message", "Label"]
    if status == "LABEL_ALREADY_EXISTS" and state != "PREPARE_nodata" and state != "PREPARE_data":
        assert r.body["ExistingJobStatus"] == ("RUNNING" if state == "PREPARED" else "FINISHED")
        assert r.message == f"Label [{label}] has already been used."
    if status == "LABEL_ALREADY_EXISTS" and state.startswith("PREPARE_"):
        assert r.body == {"Status": "LABEL_ALREADY_EXISTS", "ExistingJobStatus": "", "Message": ""}
    if status == "FAILED":
        assert r.message.startswith("class com.starrocks.common.StarRocksException: ")
    if op == "commit" and state == "PREPARED":
        assert r.body == {"Label": label, "Status": "OK", "TxnId": r.body["TxnId"], "Message": ""}
    if (state, op) == ("VISIBLE", "commit"):
        assert r.message == f"Transaction {r.body['TxnId']} has already committed, label is {label}"


def multi_setup(c: TxnClient, state: str) -> str:
    label = f"m{next(_counter)}_{state.lower()}"
    if state == "none":
        return label
    _ok(c.call("begin", label, multi=True, timeout="60"))
    if state == "BEGIN":
        return label
    _ok(c.load(label, "t1", ROW, multi=True))
    if state == "COMMITED":
        _ok(c.call("commit", label, multi=True))
    else:
        assert state == "CANCELLED"
        _ok(c.call("rollback", label, multi=True))
    return label


# The last column is what get_load_state answers afterwards. With the default
# --multi-registration=commit (4.0) a multi-table label enters the FE transaction manager only
# when a commit with data registers it: begun, rolled-back and zero-load-committed labels stay
# UNKNOWN while the task still blocks the label (spec §4.3a; StreamLoadMultiStmtTask.beginTxn).
MULTI = {
    ("none", "begin"): ("OK", "", "fe", "UNKNOWN"),
    ("none", "load"): ("FAILED", "stream load task {l} does not exist", "fe", "UNKNOWN"),
    ("none", "commit"): ("FAILED", "stream load task {l} does not exist", "fe", "UNKNOWN"),
    ("none", "rollback"): ("FAILED", "stream load task{l}does not exist", "fe", "UNKNOWN"),
    ("none", "prepare"): ("FAILED", "Unsupported operation: TXN_PREPARE", "fe", "UNKNOWN"),
    ("BEGIN", "begin"): (
        "LABEL_ALREADY_EXISTS",
        "Transaction already started with label [{l}]",
        "fe",
        "UNKNOWN",
    ),
    ("BEGIN", "load"): ("OK", "", "be", "UNKNOWN"),
    ("BEGIN", "commit"): ("OK", "", "fe", "UNKNOWN"),
    ("BEGIN", "rollback"): ("OK", "", "fe", "UNKNOWN"),
    ("BEGIN", "prepare"): ("FAILED", "Unsupported operation: TXN_PREPARE", "fe", "UNKNOWN"),
    ("COMMITED", "begin"): (
        "LABEL_ALREADY_EXISTS",
        "Label [{l}] has already been used.",
        "fe",
        "VISIBLE",
    ),
    ("COMMITED", "load"): (
        "FAILED",
        "stream load task {l} has already been commited",
        "fe",
        "VISIBLE",
    ),
    ("COMMITED", "commit"): ("OK", "has already committed, label is {l}", "fe", "VISIBLE"),
    ("COMMITED", "rollback"): ("FAILED", "Can not abort VISIBLE transaction", "fe", "VISIBLE"),
    ("COMMITED", "prepare"): ("FAILED", "Unsupported operation: TXN_PREPARE", "fe", "VISIBLE"),
    ("CANCELLED", "begin"): (
        "LABEL_ALREADY_EXISTS",
        "Transaction already started with label [{l}]",
        "fe",
        "UNKNOWN",
    ),
    ("CANCELLED", "load"): (
        "FAILED",
        "stream load task {l} has already been cancelled",
        "fe",
        "UNKNOWN",
    ),
    ("CANCELLED", "commit"): ("FAILED", "Can not commit CANCELLED transaction", "fe", "UNKNOWN"),
    ("CANCELLED", "rollback"): ("OK", "has already aborted, label is {l}", "fe", "UNKNOWN"),
    ("CANCELLED", "prepare"): ("FAILED", "Unsupported operation: TXN_PREPARE", "fe", "UNKNOWN"),
}


@pytest.mark.parametrize(("state", "op"), list(MULTI), ids=[f"{s}-{o}" for s, o in MULTI])
def test_multi_table_matrix(c: TxnClient, state: str, op: str) -> None:
    status, message, node, after = MULTI[(state, op)]
    label = multi_setup(c, state)
    if op == "load":
        r = c.load(label, "t2", [{"id": 7, "ref": 1}], multi=True)
    else:
        r = c.call(op, label, multi=True, timeout="60")
    assert r.http == 200
    assert r.status == status, r.text
    assert message.format(l=label) in r.message, r.text
    assert r.node == node, r.text
    assert c.state(label) == after
    if (state, op) == ("none", "begin"):
        assert r.body == {"Status": "OK", "Message": ""}
        assert r.text == '{\n  "Status": "OK",\n  "Message": ""\n}'
    if status == "LABEL_ALREADY_EXISTS":
        assert r.body["ExistingJobStatus"] == state
    if (state, op) == ("BEGIN", "commit"):
        # Zero loads: still OK (spec §2.3, [T2] empty_commit).
        assert r.body["TxnId"] > 0
    if (state, op) == ("BEGIN", "load"):
        assert list(r.body) == [
            "Status",
            "Message",
            "Label",
            "TxnId",
            "LoadBytes",
            "StreamLoadPlanTimeMs",
            "ReceivedDataTimeMs",
        ]


def test_multi_commit_body_and_data(c: TxnClient, emu: EmulatorHandle) -> None:
    label = f"mc{next(_counter)}"
    _ok(c.call("begin", label, multi=True, timeout="60"))
    _ok(c.load(label, "t1", [{"id": 100, "v": "x", "amt": 2}], multi=True))
    _ok(c.load(label, "t2", [{"id": 100, "ref": 100, "note": "n"}], multi=True))
    r = _ok(c.call("commit", label, multi=True))
    assert r.body["Label"] == label
    assert r.body["ChannelId"] == 0
    assert r.body["Prepared Channel Num"] == 1
    assert r.body["Message"] == ""
    assert emu.sql(f"SELECT t1.id, t2.note FROM {c.db}.t1 JOIN {c.db}.t2 ON t1.id = t2.ref") == [
        (100, "n")
    ]


def test_single_label_reuse_after_abort_only(c: TxnClient) -> None:
    label = f"reuse{next(_counter)}"
    _ok(c.call("begin", label, table="t1"))
    _ok(c.call("rollback", label))
    _ok(c.call("begin", label, table="t1"))
    _ok(c.load(label, "t1", ROW))
    _ok(c.call("commit", label))
    r = c.call("begin", label, table="t1")
    assert r.status == "LABEL_ALREADY_EXISTS"
    assert r.body["ExistingJobStatus"] == "FINISHED"
