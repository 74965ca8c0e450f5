"""The HTTP client's guards against servers that are not (or no longer) StarRocks.

Credentials follow only StarRocks-shaped redirects: a 307/308, same scheme, to a load-url FE or
an allow-listed BE host; anything else fails without sending Authorization anywhere new (review
finding 4: a 302 to another host got the password and its forged answers were trusted). A hung
FE fails a call at ``sink.call.deadline-ms``, not after every retry's socket timeout (finding 13).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from sinks.starrocks import errors as errs
from sinks.starrocks.client import StarRocksClient
from sinks.starrocks.config import StarRocksSinkConfig

pytestmark = pytest.mark.integration

OK = b'{"Status": "OK", "Message": "", "Label": "r-1", "TxnId": 1}'


class Server:
    """A loopback HTTP server answering every request with ``reply(path)``; records requests."""

    def __init__(self, reply: Any) -> None:
        self.requests: list[dict[str, str]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                outer.requests.append(dict(self.headers))
                status, headers, body = reply(self.path)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_PUT = do_GET = _any  # noqa: N815 - http.server's names

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def elsewhere() -> Iterator[Server]:
    """The redirect target: answers OK (a forged success) to whatever reaches it."""
    s = Server(lambda path: (200, {"Content-Type": "application/json"}, OK))
    yield s
    s.close()


def fe_redirecting(status: int, location: str) -> Server:
    return Server(lambda path: (status, {"Location": location + path}, b""))


def client(fe: Server, **extra: str) -> StarRocksClient:
    options = {
        "load-url": f"127.0.0.1:{fe.port}",
        "jdbc-url": "jdbc:mysql://127.0.0.1:9030",
        "database-name": "demo",
        "table-name": "orders",
        "username": "root",
        "password": "s3cret",
        "sink.max-retries": "0",
        **extra,
    }
    return StarRocksClient(StarRocksSinkConfig.from_options(options))


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_non_307_redirect_is_not_followed(status: int, elsewhere: Server) -> None:
    fe = fe_redirecting(status, f"http://127.0.0.1:{elsewhere.port}")
    try:
        with pytest.raises(errs.ProtocolError, match=r"307 only.*credentials were not sent"):
            client(fe).begin("r-1", multi=True)
    finally:
        fe.close()
    assert elsewhere.requests == []


def test_a_307_to_a_host_not_allowed_is_not_followed(elsewhere: Server) -> None:
    # "localhost" is not the load-url host 127.0.0.1, whatever it resolves to.
    fe = fe_redirecting(307, f"http://localhost:{elsewhere.port}")
    try:
        with pytest.raises(errs.ProtocolError, match=r"sink\.redirect\.allowed-hosts"):
            client(fe).begin("r-1", multi=True)
        assert elsewhere.requests == []
        # Allow-listed, the same redirect is followed, credentials included.
        client(fe, **{"sink.redirect.allowed-hosts": "localhost"}).begin("r-1", multi=True)
    finally:
        fe.close()
    assert [r.get("Authorization", "").startswith("Basic ") for r in elsewhere.requests] == [True]


def test_a_307_to_another_scheme_is_not_followed(elsewhere: Server) -> None:
    fe = fe_redirecting(307, f"https://127.0.0.1:{elsewhere.port}")
    try:
        with pytest.raises(errs.ProtocolError, match="scheme changes from http to https"):
            client(fe, **{"sink.redirect.allowed-hosts": "*"}).begin("r-1", multi=True)
    finally:
        fe.close()
    assert elsewhere.requests == []


def test_a_hung_fe_fails_a_call_at_its_deadline_not_after_every_retry() -> None:
    # Accepts connections and never answers (review finding 13: 300 s x 6 tries = 30 min).
    import socket
    import time

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)
    port = hung.getsockname()[1]
    options = {
        "load-url": f"127.0.0.1:{port}",
        "jdbc-url": "jdbc:mysql://127.0.0.1:9030",
        "database-name": "demo",
        "table-name": "orders",
        "username": "root",
        "password": "",
        "sink.socket.timeout-ms": "1000",
        "sink.max-retries": "10",
        "sink.retry.backoff-ms": "10",
        "sink.retry.max-backoff-ms": "10",
        "sink.call.deadline-ms": "2500",
    }
    c = StarRocksClient(StarRocksSinkConfig.from_options(options))
    started = time.monotonic()
    try:
        with pytest.raises(errs.StarRocksError):
            c.get_load_state("hung-1")  # idempotent: retried in place until the deadline
    finally:
        hung.close()
    elapsed = time.monotonic() - started
    assert 2.0 < elapsed < 4.5, elapsed  # 10 retries x 1 s would be 11 s
