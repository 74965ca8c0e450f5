"""The proxy is transparent: 307 rewriting, Authorization, big bodies, keep-alive, subprocess."""

from __future__ import annotations

import base64
import http.client
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from devstack.faultproxy import Hop, ProxyHandle, spawn_proxy
from devstack.starrocks.launcher import EmulatorHandle
from tests.integration.faultproxy.txnclient import DB, TxnClient, rows

pytestmark = pytest.mark.integration


def test_multi_table_txn_through_proxy(
    client: TxnClient, proxy: ProxyHandle, emulator: EmulatorHandle
) -> None:
    assert client.status("begin", "mt1", timeout=30) == "OK"
    assert client.last_location is None  # multi-table begin: answered by the FE itself

    r = client.call("load", "mt1", table="t1", data=[{"id": 1, "v": "a"}], query="?probe=1")
    assert r.json()["Status"] == "OK", r.text
    be_port = proxy.control.snapshot()["listeners"]["be"][f"127.0.0.1:{emulator.be_port}"]
    assert be_port not in (emulator.be_port, proxy.port)
    # The client's next hop is the proxy's BE listener, same path and query.
    assert client.last_location == f"http://127.0.0.1:{be_port}/api/transaction/load?probe=1"

    r = client.call("load", "mt1", table="t2", data=[{"id": 7, "v": "b"}, {"id": 8, "v": "c"}])
    assert r.json()["Status"] == "OK", r.text
    assert client.status("commit", "mt1") == "OK"
    assert client.state("mt1") == "VISIBLE"
    assert rows(emulator, "t1") == [(1, "a")]
    assert rows(emulator, "t2") == [(7, "b"), (8, "c")]
    ctl = proxy.control
    assert ctl.forwarded("load", Hop.BE) == 2
    assert ctl.forwarded("load", Hop.FE) == 2
    assert ctl.forwarded("commit") == 1
    assert ctl.snapshot()["injected"] == {}


def test_authorization_kept_over_the_307_hop(
    client: TxnClient, proxy: ProxyHandle, emulator: EmulatorHandle
) -> None:
    # Single-table begin is 307ed to the BE, which needs Authorization (spec §1).
    assert client.status("begin", "st1", table="t1", multi=False) == "OK"
    assert client.last_location is not None
    assert client.last_location.startswith("http://127.0.0.1:")
    assert f":{emulator.be_port}/" not in client.last_location
    # Fidelity: the hop still changes port, so `requests` drops Authorization on it exactly
    # as it does against StarRocks directly (the proxy must not hide that client bug).
    r = requests.post(
        f"{proxy.url}/api/transaction/begin",
        headers={"label": "st2", "db": DB, "table": "t1"},
        auth=(emulator.user, emulator.password),
        allow_redirects=True,
        timeout=10,
    )
    assert r.json() == {"Status": "INTERNAL_ERROR", "Message": "no valid Basic authorization"}
    # FE auth errors pass through untouched.
    r = requests.get(f"{proxy.url}/api/{DB}/get_load_state?label=x", timeout=10)
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"] == 'Basic realm=""'


def _json_rows(n: int, start: int = 0) -> bytes:
    return json.dumps([{"id": i, "v": f"value-{i:012d}"} for i in range(start, start + n)]).encode()


def test_multi_megabyte_bodies_and_chunked_upload(
    client: TxnClient, emulator: EmulatorHandle
) -> None:
    big = _json_rows(120_000)
    assert len(big) > 4_000_000
    assert client.status("begin", "big", timeout=60) == "OK"
    r = client.call("load", "big", table="t1", data=big, timeout=60)
    assert r.json()["Status"] == "OK", r.text
    assert r.json()["LoadBytes"] == len(big)

    second = _json_rows(1000, start=200_000)

    def pieces() -> Iterator[bytes]:  # a generator body: requests sends it chunked
        for i in range(0, len(second), 4096):
            yield second[i : i + 4096]

    # A generator cannot be replayed on the 307 hop: send it straight to the BE listener.
    assert client.last_location is not None
    r = client.session.put(
        client.last_location,
        headers={
            "label": "big",
            "db": DB,
            "table": "t1",
            "transaction_type": "multi",
            "format": "json",
            "strip_outer_array": "true",
        },
        data=pieces(),
        auth=client.auth,
        timeout=60,
    )
    assert r.json()["Status"] == "OK", r.text
    assert r.json()["LoadBytes"] == len(second)
    assert client.status("commit", "big", timeout=60) == "OK"
    assert emulator.sql(f"SELECT count(*) FROM {DB}.t1") == [(121_000,)]


def test_keep_alive_on_client_side(proxy: ProxyHandle, emulator: EmulatorHandle) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    headers = {"Authorization": "Basic " + _b64(f"{emulator.user}:{emulator.password}")}
    conn.request("GET", f"/api/{DB}/get_load_state?label=none", headers=headers)
    first = conn.getresponse()
    assert json.loads(first.read())["state"] == "UNKNOWN"
    sock = conn.sock
    assert sock is not None
    conn.request("GET", f"/api/{DB}/get_load_state?label=none2", headers=headers)
    second = conn.getresponse()
    assert json.loads(second.read())["state"] == "UNKNOWN"
    assert conn.sock is sock  # same TCP connection, no reconnect
    conn.close()
    assert proxy.control.forwarded("get_load_state", Hop.FE) == 2


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_subprocess_proxy(emulator: EmulatorHandle, tmp_path: Path) -> None:
    handle = spawn_proxy(emulator.fe_url, control_port=0, stderr_path=tmp_path / "proxy.log")
    try:
        assert handle.pid != os.getpid()
        assert handle.control_port is not None
        assert handle.control_port != handle.port
        c = TxnClient(handle.url, (emulator.user, emulator.password))
        handle.control.http_error("begin", status=500, body="boom")
        r = c.call("begin", "sp1")
        assert (r.status_code, r.text) == (500, "boom")
        assert c.status("begin", "sp1") == "OK"
        assert c.status("commit", "sp1") == "OK"
        # A multi-table commit with no load is never registered: UNKNOWN, as on StarRocks.
        assert c.state("sp1") == "UNKNOWN"
        assert handle.control.injected("http_error", "begin") == 1
        # The control listener serves only /__faults.
        r = requests.get(f"{handle.control_url}/api/{DB}/get_load_state?label=x", timeout=10)
        assert r.status_code == 404
    finally:
        handle.stop()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{handle.url}/__faults", timeout=5)
