"""Each fault kind has its intended observable effect on a client and on StarRocks."""

from __future__ import annotations

import time

import pytest
import requests

from devstack.faultproxy import FaultRuleError, Hop, ProxyHandle
from devstack.starrocks.launcher import EmulatorHandle
from tests.integration.faultproxy.txnclient import TxnClient, rows

pytestmark = pytest.mark.integration


def _open_with_data(client: TxnClient, label: str) -> None:
    assert client.status("begin", label, timeout=30) == "OK"
    r = client.call("load", label, table="t1", data=[{"id": 1, "v": "a"}])
    assert r.json()["Status"] == "OK", r.text


def test_drop_response_on_commit_applies_but_answer_is_lost(
    client: TxnClient, proxy: ProxyHandle, emulator: EmulatorHandle
) -> None:
    _open_with_data(client, "drop1")
    proxy.control.drop_response("commit")
    with pytest.raises(requests.ConnectionError):
        client.call("commit", "drop1")
    # The commit was applied: the label state (through the proxy) says so.
    assert client.state("drop1") in ("COMMITTED", "VISIBLE")
    assert rows(emulator, "t1") == [(1, "a")]
    assert proxy.control.injected("drop_response", "commit") == 1
    assert proxy.control.forwarded("commit") == 1
    # Retrying the commit is answered (the rule was for one request) and idempotent.
    assert client.status("commit", "drop1") == "OK"


def test_drop_response_skips_redirects(
    client: TxnClient, proxy: ProxyHandle, emulator: EmulatorHandle
) -> None:
    """A single-table begin is 307ed: the FE's 307 is relayed, the BE's answer is dropped."""
    proxy.control.drop_response("begin")
    with pytest.raises(requests.ConnectionError):
        client.call("begin", "drop2", table="t1", multi=False)
    assert client.last_location is not None  # the 307 got through
    assert proxy.control.injected("drop_response") == 1
    assert proxy.control.forwarded("begin", Hop.BE) == 1
    # The BE did begin the txn: a second begin of the label is refused.
    r = client.call("begin", "drop2", table="t1", multi=False)
    assert r.json()["Status"] == "LABEL_ALREADY_EXISTS", r.text


def test_http_error_503_is_not_forwarded(client: TxnClient, proxy: ProxyHandle) -> None:
    _open_with_data(client, "e503")
    body = '{"status": "FAILED", "msg": "injected"}'
    proxy.control.http_error("commit", status=503, body=body)
    r = client.call("commit", "e503")
    assert r.status_code == 503
    assert r.text == body
    assert r.headers["Content-Type"] == "application/json"
    assert proxy.control.forwarded("commit") == 0
    assert proxy.control.injected("http_error", "commit") == 1
    # Nothing reached StarRocks: a begun, loaded multi-table label is not registered before
    # its commit, so get_load_state says UNKNOWN (docs/starrocks-txn-protocol.md §4.3b).
    assert client.state("e503") == "UNKNOWN"
    assert client.status("commit", "e503") == "OK"  # count=1: the next one passes
    assert client.state("e503") == "VISIBLE"


def test_http_error_keeps_the_connection_usable(client: TxnClient, proxy: ProxyHandle) -> None:
    proxy.control.http_error("load", status=500, count=2, hop=Hop.BE)
    assert client.status("begin", "e500", timeout=30) == "OK"
    for _ in range(2):
        r = client.call("load", "e500", table="t1", data=[{"id": 2, "v": "b"}])
        assert r.status_code == 500
    # hop=be: the FE hop was forwarded (307) both times, the BE hop never was.
    assert proxy.control.forwarded("load", Hop.FE) == 2
    assert proxy.control.forwarded("load", Hop.BE) == 0
    r = client.call("load", "e500", table="t1", data=[{"id": 2, "v": "b"}])
    assert r.json()["Status"] == "OK", r.text


def test_delay_exceeds_client_timeout(client: TxnClient, proxy: ProxyHandle) -> None:
    _open_with_data(client, "slow")
    proxy.control.delay("commit", 2.0)
    t0 = time.monotonic()
    with pytest.raises(requests.ReadTimeout):
        client.call("commit", "slow", timeout=0.5)
    assert time.monotonic() - t0 < 2.0
    assert proxy.control.injected("delay", "commit") == 1
    # Documented: a delayed request is still forwarded afterwards, like a late packet.
    deadline = time.monotonic() + 20
    while client.state("slow") != "VISIBLE":
        assert time.monotonic() < deadline, "delayed commit never reached the FE"
        time.sleep(0.2)
    assert proxy.control.forwarded("commit") == 1


def test_reset_before_nothing_applied(
    client: TxnClient, proxy: ProxyHandle, emulator: EmulatorHandle
) -> None:
    _open_with_data(client, "rst")
    proxy.control.reset_before("commit")
    with pytest.raises(requests.ConnectionError):
        client.call("commit", "rst")
    assert proxy.control.forwarded("commit") == 0
    assert proxy.control.injected("reset_before", "commit") == 1
    assert client.state("rst") == "UNKNOWN"  # not committed: not registered yet
    assert rows(emulator, "t1") == []
    # BE hop: the FE's 307 is relayed, then the BE listener resets before forwarding.
    proxy.control.reset_before("load", hop=Hop.BE)
    with pytest.raises(requests.ConnectionError):
        client.call("load", "rst", table="t2", data=[{"id": 9, "v": "z"}])
    assert proxy.control.forwarded("load", Hop.BE) == 1  # only the first, successful load
    assert client.status("commit", "rst") == "OK"
    assert rows(emulator, "t1") == [(1, "a")]
    assert rows(emulator, "t2") == []


def test_jitter_for_n_requests(client: TxnClient, proxy: ProxyHandle) -> None:
    proxy.control.jitter(300, 400, count=2)
    took = []
    for i in range(3):
        t0 = time.monotonic()
        assert client.state(f"j{i}") == "UNKNOWN"
        took.append(time.monotonic() - t0)
    assert took[0] >= 0.3
    assert took[1] >= 0.3
    assert proxy.control.injected("jitter") == 2
    assert proxy.control.snapshot()["rules"] == []  # used up after 2 requests


def test_control_api_counters_and_reset(client: TxnClient, proxy: ProxyHandle) -> None:
    ctl = proxy.control
    with pytest.raises(FaultRuleError):
        ctl.add_raw({"kind": "explode"})
    with pytest.raises(FaultRuleError):
        ctl.add_raw({"kind": "delay", "op": "nope"})
    rid = ctl.http_error("get_load_state", status=503, count=None)
    for _ in range(3):
        r = client.session.get(
            f"{proxy.url}/api/fp/get_load_state", params={"label": "x"}, timeout=10
        )
        assert r.status_code == 503
    snap = ctl.snapshot()
    assert snap["rules"][0]["id"] == rid
    assert snap["rules"][0]["remaining"] is None  # count=None: armed until reset
    assert snap["injected"] == {"http_error": {"get_load_state": 3}}
    # An op-specific rule leaves other ops alone.
    assert client.status("begin", "ctl", timeout=30) == "OK"
    ctl.reset()
    snap = ctl.snapshot()
    assert snap["rules"] == []
    assert snap["injected"] == {}
    assert snap["forwarded"] == {}
    assert client.state("ctl") == "UNKNOWN"  # not committed: not registered yet
