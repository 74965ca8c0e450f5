"""Spec §1/§3.3: 307 routing, Basic auth, BE-only rules, plain stream load, get_load_state."""

from __future__ import annotations

import json
import socket

import pytest
import requests

from devstack.starrocks.launcher import EmulatorHandle
from tests.integration.devstack.srclient import TxnClient, make_tables

pytestmark = pytest.mark.integration


def test_307_location_keeps_path_and_query(starrocks_emulator: EmulatorHandle) -> None:
    h = starrocks_emulator
    make_tables(h)
    r = requests.post(
        f"{h.fe_url}/api/transaction/begin?x=1&y=2",
        headers={"label": "r1", "db": "d", "table": "t1"},
        auth=(h.user, h.password),
        allow_redirects=False,
        timeout=10,
    )
    assert r.status_code == 307
    assert r.headers["Location"] == f"http://127.0.0.1:{h.be_port}/api/transaction/begin?x=1&y=2"
    # PUT is registered too.
    c = TxnClient(h, "d")
    r2 = c.call("begin", "r2", table="t1", method="PUT")
    assert r2.redirected
    assert r2.status == "OK"


def test_fe_auth_401(starrocks_emulator: EmulatorHandle) -> None:
    h = starrocks_emulator
    r = requests.post(
        f"{h.fe_url}/api/transaction/begin",
        headers={"label": "a", "db": "d"},
        allow_redirects=False,
        timeout=10,
    )
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"] == 'Basic realm=""'
    assert r.json() == {
        "status": "FAILED",
        "code": "1",
        "msg": "Need auth information.",
        "message": "Need auth information.",
    }
    r = requests.post(
        f"{h.fe_url}/api/transaction/begin",
        headers={"label": "a", "db": "d"},
        auth=("root", "wrong"),
        allow_redirects=False,
        timeout=10,
    )
    assert r.status_code == 401
    assert r.json()["msg"].startswith("Access denied for root@127.0.0.1")
    r = requests.get(f"{h.fe_url}/api/d/get_load_state?label=a", timeout=10)
    assert r.status_code == 401


def test_be_begin_needs_authorization(emu: EmulatorHandle, db: str) -> None:
    """A client that lets requests strip Authorization on the 8030->8040 hop fails like this."""
    h = emu
    r = requests.post(
        f"{h.fe_url}/api/transaction/begin",
        headers={"label": "noauth", "db": db, "table": "t1"},
        auth=(h.user, h.password),
        allow_redirects=True,
        timeout=10,
    )
    assert r.json() == {"Status": "INTERNAL_ERROR", "Message": "no valid Basic authorization"}
    assert r.text.startswith('{\n    "Status"')  # BE: 4-space PrettyWriter


def test_transaction_type_rejected_by_be(emu: EmulatorHandle, db: str) -> None:
    h = emu
    for op in ("begin", "commit", "prepare", "rollback"):
        r = requests.post(
            f"{h.be_url}/api/transaction/{op}",
            headers={"label": "x", "db": db, "transaction_type": "multi"},
            auth=(h.user, h.password),
            timeout=10,
        )
        assert r.json() == {
            "Status": "INVALID_ARGUMENT",
            "Message": "Multi-statement transaction requests can only be sent to FE nodes, "
            "not BE nodes",
        }


def test_direct_be_commit_after_prepare_is_txn_not_exists(emu: EmulatorHandle, db: str) -> None:
    h = emu
    c = TxnClient(h, db)
    assert c.call("begin", "p1", table="t1").status == "OK"
    assert c.load("p1", "t1", [{"id": 1}]).status == "OK"
    assert c.call("prepare", "p1").status == "OK"
    r = requests.post(
        f"{h.be_url}/api/transaction/commit",
        headers={"label": "p1", "db": db},
        auth=(h.user, h.password),
        timeout=10,
    )
    assert r.json() == {
        "Status": "TXN_NOT_EXISTS",
        "Message": "transaction with label p1 not exists",
    }
    assert c.call("commit", "p1").status == "OK"


def test_unknown_op_empty_label_and_unknown_db(emu: EmulatorHandle, db: str) -> None:
    h = emu
    c = TxnClient(h, db)
    r = c.call("frobnicate", "x")
    assert (r.status, r.message) == ("FAILED", "Unknown transaction operation: frobnicate")
    r = c.call("begin", "", table="t1")
    assert r.status == "FAILED"
    assert "Empty label." in r.message
    assert r.node == "fe"
    r = TxnClient(h, "nodb").call("begin", "x", multi=True)
    assert r.status == "FAILED"
    assert "Database[nodb] does not exist" in r.message
    r = c.call("begin", "x", table="missing")
    assert r.status == "ANALYSIS_ERROR"
    assert r.message == f'unknown table "{db}.missing"'


def test_fe_reads_body_before_307_keepalive(emu: EmulatorHandle, db: str) -> None:
    """One keep-alive connection: a load body sent to the FE must not poison the next request."""
    h = emu
    body = json.dumps([{"id": i, "v": "x" * 50} for i in range(2000)]).encode()
    with socket.create_connection((h.host, h.fe_port), timeout=10) as s:

        def send(op: str, payload: bytes) -> bytes:
            head = (
                f"PUT /api/transaction/{op} HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Basic cm9vdDo=\r\nlabel: ka\r\ndb: {db}\r\ntable: t1\r\n"
                "format: json\r\nstrip_outer_array: true\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n"
            ).encode()
            s.sendall(head + payload)
            resp = b""
            while b"\r\n\r\n" not in resp:
                resp += s.recv(65536)
            headers, _, rest = resp.partition(b"\r\n\r\n")
            length = int(
                next(
                    line.split(b":")[1]
                    for line in headers.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
            )
            while len(rest) < length:
                rest += s.recv(65536)
            return headers.split(b"\r\n")[0] + b" " + rest

        first = send("begin", b"")
        assert first.startswith(b"HTTP/1.1 307")
        second = send("load", body)  # label never begun on the BE: the FE answers itself
        assert second.startswith(b"HTTP/1.1 200")
        assert b"Can't find the transaction" in second
        third = send("frobnicate", b"")
        assert b"Unknown transaction operation" in third


def test_plain_stream_load(emu: EmulatorHandle, db: str) -> None:
    h = emu
    url = f"{h.fe_url}/api/{db}/t1/_stream_load"
    r = requests.put(
        url,
        headers={"label": "p"},
        data=b"1\ta\t1.5\n",
        auth=(h.user, h.password),
        allow_redirects=False,
        timeout=10,
    )
    assert "There is no 100-continue header" in r.json()["Message"]
    hdrs = {"label": "p", "Expect": "100-continue", "column_separator": "\\t"}
    r = requests.put(
        url,
        headers=hdrs,
        data=b"1\ta\t1.5\n",
        auth=(h.user, h.password),
        allow_redirects=False,
        timeout=10,
    )
    assert r.status_code == 307
    r = requests.put(
        r.headers["Location"],
        headers=hdrs,
        data=b"1\ta\t1.5\n",
        auth=(h.user, h.password),
        timeout=10,
    )
    body = r.json()
    assert body["Status"] == "Success"
    assert body["Message"] == "OK"
    assert body["NumberLoadedRows"] == 1
    r = requests.put(
        r.url, headers=hdrs, data=b"1\ta\t1.5\n", auth=(h.user, h.password), timeout=10
    )
    assert r.json()["Status"] == "Label Already Exists"
    assert r.json()["ExistingJobStatus"] == "FINISHED"
    assert h.sql(f"SELECT id, v, amt FROM {db}.t1")[0][:2] == (1, "a")


def test_get_load_state_errors(emu: EmulatorHandle, db: str) -> None:
    h = emu
    a = (h.user, h.password)
    r = requests.get(f"{h.fe_url}/api/nodb/get_load_state?label=x", auth=a, timeout=10).json()
    assert r["status"] == "FAILED"
    assert r["msg"] == "unknown database, database=nodb"
    r = requests.get(f"{h.fe_url}/api/{db}/get_load_state", auth=a, timeout=10).json()
    assert r["msg"] == "No label selected."
    r = requests.get(f"{h.fe_url}/api/{db}/get_load_state?label=x", auth=a, timeout=10).json()
    assert r["state"] == "UNKNOWN"
    assert r["status"] == "OK"
