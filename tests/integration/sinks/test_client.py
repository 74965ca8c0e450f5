"""The HTTP client against the emulator: 307s with auth, classification, state queries."""

import pytest

from sinks.starrocks import errors as errs
from sinks.starrocks.client import StarRocksClient
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.protocol import LoadState

from .conftest import DB, options

pytestmark = pytest.mark.integration


def client(sr, **overrides):
    return StarRocksClient(StarRocksSinkConfig.from_options(options(sr, **overrides)))


def test_multi_table_round_trip_follows_redirects_with_auth(sr):
    c = client(sr)
    c.begin("c-1", multi=True, timeout_s=30)
    # A begun multi-table label is not in the FE transaction manager yet (spec §4.3a).
    assert c.get_load_state("c-1") is LoadState.UNKNOWN
    # load is 307-redirected to the BE; it only works if Authorization and body are re-sent
    c.load(
        "c-1",
        "orders",
        b'[{"order_id":1,"item_count":0,"total_amount":0,"version":1,"__op":0}]',
        multi=True,
    )
    c.commit("c-1", multi=True)
    assert c.get_load_state("c-1").is_committed
    assert sr.sql(f"SELECT order_id FROM {DB}.orders") == [(1,)]
    # a repeated commit of a committed label is OK (spec §4.4)
    c.commit("c-1", multi=True)


def test_single_table_flow_with_prepare(sr):
    c = client(sr)
    c.begin("s-1", multi=False, table="orders")
    c.load(
        "s-1",
        "orders",
        b'[{"order_id":2,"item_count":0,"total_amount":0,"version":1}]',
        multi=False,
    )
    c.prepare("s-1", table="orders")
    assert c.get_load_state("s-1") is LoadState.PREPARED
    c.commit("s-1", multi=False, table="orders")
    assert c.get_load_state("s-1").is_committed


def test_label_already_exists(sr):
    c = client(sr)
    c.begin("dup", multi=True)
    with pytest.raises(errs.LabelAlreadyExistsError, match="dup"):
        c.begin("dup", multi=True)


def test_rollback_then_label_stays_blocked_in_multi_mode(sr):
    c = client(sr)
    c.begin("rb", multi=True)
    c.rollback("rb", multi=True)
    c.rollback("rb", multi=True)  # idempotent
    # Never registered, yet blocked: UNKNOWN does not mean "free" (spec §4.3a).
    assert c.get_load_state("rb") is LoadState.UNKNOWN
    with pytest.raises(errs.LabelAlreadyExistsError) as info:
        c.begin("rb", multi=True)
    assert info.value.context["existing_status"] == "CANCELLED"


def test_wrong_password_is_an_auth_error_without_the_password(sr):
    c = client(sr, password="not-the-password")
    with pytest.raises(errs.AuthError) as info:
        c.get_load_state("x")
    assert "not-the-password" not in str(info.value)
    assert "Basic" not in str(info.value)


def test_unknown_table_on_load(sr):
    c = client(sr)
    c.begin("ut", multi=True)
    with pytest.raises(errs.UnknownTableError, match="fix table-name"):
        c.load("ut", "nope", b"[]", multi=True)


def test_too_many_running_txns_is_terminal_with_advice(sr):
    sr.control.too_many_txns(1)
    with pytest.raises(errs.TooManyTransactionsError, match="max_running_txn_num_per_db"):
        client(sr).begin("tm", multi=True)


def test_txn_in_processing_is_waited_out_in_place_and_is_no_retry(sr, caplog):
    """A real TXN_IN_PROCESSING: a second load while the first (delayed) one holds the txn.

    Tasks loading one table of a multi-table transaction meet it all the time: the client
    waits for the other load in short steps, not counted against ``sink.max-retries``.
    """
    import logging
    import threading

    caplog.set_level(logging.DEBUG, logger="sinks.starrocks.client")

    c = client(sr, **{"sink.max-retries": "0"})
    c.begin("tip", multi=True)
    c.load(
        "tip",
        "orders",
        b'[{"order_id":30,"item_count":0,"total_amount":0,"version":1}]',
        multi=True,
    )
    sr.control.delay("load", 1.5, 1)
    first = threading.Thread(
        target=c.load,
        args=("tip", "orders", b'[{"order_id":31,"item_count":0,"total_amount":0,"version":1}]'),
        kwargs={"multi": True},
    )
    first.start()
    import time

    time.sleep(0.5)
    c2 = client(sr, **{"sink.max-retries": "0"})
    started = time.monotonic()
    c2.load(
        "tip",
        "orders",
        b'[{"order_id":32,"item_count":0,"total_amount":0,"version":1}]',
        multi=True,
    )
    waited = time.monotonic() - started
    first.join()
    busy = [r for r in caplog.records if "TXN_IN_PROCESSING" in r.getMessage()]
    assert len(busy) >= 5, len(busy)  # short steps, as often as it takes
    assert waited < 1.5  # the first load held the channel ~1 s more; no backoff of seconds
    c.commit("tip", multi=True)
    assert sr.sql(f"SELECT order_id FROM {DB}.orders ORDER BY 1") == [(30,), (31,), (32,)]


def test_5xx_on_load_is_not_retried_in_place(sr):
    c = client(sr)
    c.begin("l5", multi=True)
    sr.control.fail_next("load", 1, http_status=500, status="INTERNAL_ERROR", message="boom")
    with pytest.raises(errs.ServerBusyError):
        c.load("l5", "orders", b'[{"order_id":4}]', multi=True)


def test_5xx_on_commit_is_retried_in_place(sr):
    c = client(sr)
    c.begin("c5", multi=True)
    c.load(
        "c5", "orders", b'[{"order_id":5,"item_count":0,"total_amount":0,"version":1}]', multi=True
    )
    sr.control.fail_next("commit", 2, http_status=503, status="SERVICE_UNAVAILABLE", message="busy")
    c.commit("c5", multi=True)
    assert c.get_load_state("c5").is_committed


def test_connection_refused_is_transient(sr):
    cfg = options(sr)
    cfg["load-url"] = "127.0.0.1:1"
    c = StarRocksClient(StarRocksSinkConfig.from_options({**cfg, "sink.max-retries": "1"}))
    with pytest.raises(errs.ConnectionFailedError):
        c.get_load_state("x")


def test_failover_to_the_next_fe_address(sr):
    cfg = options(sr)
    cfg["load-url"] = f"127.0.0.1:1,{sr.host}:{sr.fe_port}"
    c = StarRocksClient(StarRocksSinkConfig.from_options(cfg))
    assert c.get_load_state("nothing") is LoadState.UNKNOWN


def test_a_netrc_entry_for_the_host_does_not_replace_the_configured_credentials(
    sr, tmp_path, monkeypatch
):
    # requests reads ~/.netrc for a request without its own auth, and its entry would
    # overwrite the Authorization header the client sets from username/password.
    netrc = tmp_path / ".netrc"
    netrc.write_text(f"machine {sr.host} login intruder password wrong\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(netrc))
    c = client(sr)
    c.begin("netrc-1", multi=True, timeout_s=30)
    c.load(
        "netrc-1",
        "orders",
        b'[{"order_id":7,"item_count":0,"total_amount":0,"version":1,"__op":0}]',
        multi=True,
    )
    c.commit("netrc-1", multi=True)
    assert sr.sql(f"SELECT order_id FROM {DB}.orders") == [(7,)]


def test_proxies_from_the_environment_still_apply(sr, monkeypatch):
    # Read once per origin now, not by requests per call: a proxy that does not exist makes
    # the call fail, so it was used; no_proxy for the host makes it pass again.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with pytest.raises(errs.StarRocksError):
        client(sr, **{"sink.max-retries": "0"}).begin("proxy-1", multi=True)
    monkeypatch.setenv("NO_PROXY", sr.host)
    client(sr).begin("proxy-2", multi=True)
