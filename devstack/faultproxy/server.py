"""The proxy itself: threaded HTTP/1.1 listeners that forward to StarRocks and inject faults.

Topology. One listener stands for the FE (``--fe``). Whenever any upstream answers a redirect,
the ``Location`` target (``http://<be_host>:<be_port>``, spec §1) gets its own listener on the
proxy, created on first sight, and the ``Location`` is rewritten to
``http://<proxy host>:<that listener's port><same path>?<same query>``. A per-target port,
rather than a path prefix on one port, keeps the host:port change of the real 8030 -> 8040 hop:
a client that loses ``Authorization`` on a cross-port redirect (``requests`` does, spec §1)
fails through the proxy exactly as it does without it.

Per request: jitter, then one pre-forward rule (delay / http_error / reset_before), then the
request is forwarded with the same method, path, query, headers (``Authorization`` included)
and a streamed body; a final (non-redirect) answer may be swallowed by ``drop_response``.
Each client connection keeps its own keep-alive connection to its upstream.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from devstack.faultproxy.errors import FaultRuleError, ProxyLaunchError
from devstack.faultproxy.rules import FaultBook, FaultKind, FaultRule, Hop, Op, classify_path

logger = logging.getLogger(__name__)

_PIECE = 64 * 1024
#: RFC 9110 §7.6.1 hop-by-hop headers: never forwarded. ``Host`` is re-set per upstream.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
    }
)
_CONTROL_PATH = "/__faults"


@dataclass(frozen=True, order=True)
class Target:
    """An upstream ``host:port`` (plain HTTP: StarRocks' FE/BE HTTP ports)."""

    host: str
    port: int

    @property
    def netloc(self) -> str:
        """``host:port`` with IPv6 literals bracketed, as in a URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, default_port: int = 80) -> Target:
        """Parse ``host:port`` or ``http://host:port[/...]``.

        Raises:
            ProxyLaunchError: not an http URL / host:port.
        """
        url = text if "://" in text else f"http://{text}"
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            msg = f"{text!r}: expected http://host:port or host:port (https is not supported)"
            raise ProxyLaunchError(msg)
        return cls(parts.hostname, parts.port or default_port)


@dataclass(frozen=True)
class ProxyConfig:
    """Settings of one proxy; see ``python -m devstack.faultproxy --help``.

    Attributes:
        fe: the FE the FE listener forwards to.
        listen_host: bind address of every listener (loopback by default).
        listen_port: FE listener port (0 = ephemeral).
        control_port: extra listener serving only ``/__faults`` (None = none).
        advertise_host: host written into rewritten ``Location`` headers; default: the host
            the client used to reach the proxy (its ``Host`` header).
        be_ports: fixed listener port per redirect target (else ephemeral), so that ports
            can be published from a container.
        upstream_map: connect to the value when a ``Location`` names the key (a BE that
            registered under a name the proxy cannot resolve).
        upstream_timeout: socket timeout towards upstreams, seconds.
        client_idle_timeout: an idle client keep-alive connection is closed after this.
    """

    fe: Target
    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    control_port: int | None = None
    advertise_host: str | None = None
    be_ports: dict[Target, int] = field(default_factory=dict)
    upstream_map: dict[Target, Target] = field(default_factory=dict)
    upstream_timeout: float = 300.0
    client_idle_timeout: float = 300.0


class _Listener(ThreadingHTTPServer):
    """One listening socket; ``upstream`` None means control-only."""

    daemon_threads = True

    def __init__(self, proxy: FaultProxy, port: int, upstream: Target | None, hop: Hop) -> None:
        self.proxy = proxy
        self.upstream = upstream
        self.hop = hop
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__((proxy.config.listen_host, port), _Handler)
        self.thread = threading.Thread(
            target=self.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"faultproxy-{hop.value}-{self.port}",
            daemon=True,
        )

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self.server_address[1])

    def track(self, conn: socket.socket, alive: bool) -> None:
        """Remember open client connections so :meth:`close_all` can end them."""
        with self._conns_lock:
            if alive:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def close_all(self) -> None:
        """Stop accepting, then shut every open client connection (handler threads exit)."""
        self.shutdown()
        self.server_close()
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class FaultProxy:
    """The listeners and the fault book; :meth:`start` / :meth:`stop` from any thread."""

    def __init__(self, config: ProxyConfig, book: FaultBook | None = None) -> None:
        self.config = config
        self.book = book or FaultBook()
        self._lock = threading.Lock()
        self._fe: _Listener | None = None
        self._control: _Listener | None = None
        self._be: dict[Target, _Listener] = {}

    @property
    def port(self) -> int:
        """The FE listener's port (after :meth:`start`)."""
        if self._fe is None:
            msg = "fault proxy not started"
            raise ProxyLaunchError(msg)
        return self._fe.port

    @property
    def control_port(self) -> int | None:
        """The control-only listener's port, if one was asked for."""
        return None if self._control is None else self._control.port

    def start(self) -> None:
        """Bind the FE (and control) listener and serve them in daemon threads.

        Raises:
            ProxyLaunchError: a port could not be bound.
        """
        try:
            self._fe = _Listener(self, self.config.listen_port, self.config.fe, Hop.FE)
            if self.config.control_port is not None:
                self._control = _Listener(self, self.config.control_port, None, Hop.ANY)
        except OSError as e:
            self.stop()
            msg = f"fault proxy could not bind {self.config.listen_host}: {e}"
            raise ProxyLaunchError(msg) from e
        for listener in (self._fe, self._control):
            if listener is not None:
                listener.thread.start()
        logger.info(
            "faultproxy listening port=%s fe=%s control_port=%s",
            self.port,
            self.config.fe.netloc,
            self.control_port,
        )

    def stop(self) -> None:
        """Close every listener and client connection; idempotent."""
        with self._lock:
            listeners = [self._fe, self._control, *self._be.values()]
            self._fe, self._control, self._be = None, None, {}
        for listener in listeners:
            if listener is not None and listener.thread.is_alive():
                listener.close_all()
            elif listener is not None:
                listener.server_close()

    def listener_port(self, target: Target) -> int:
        """The proxy port standing for ``target``; a BE listener is started on first use."""
        with self._lock:
            if self._fe is None:
                msg = "fault proxy stopped"
                raise ProxyLaunchError(msg)
            if target == self.config.fe:
                return self._fe.port
            listener = self._be.get(target)
            if listener is None:
                port = self.config.be_ports.get(target, 0)
                listener = _Listener(self, port, target, Hop.BE)
                listener.thread.start()
                self._be[target] = listener
                logger.info("faultproxy be listener port=%s be=%s", listener.port, target.netloc)
            return listener.port

    def listeners(self) -> dict[str, Any]:
        """``{"fe": port, "control": port|None, "be": {"host:port": port}}``."""
        with self._lock:
            return {
                "fe": None if self._fe is None else self._fe.port,
                "control": self.control_port,
                "be": {t.netloc: lst.port for t, lst in sorted(self._be.items())},
            }

    def connect_target(self, target: Target) -> Target:
        """Where to open a socket for ``target`` (after ``upstream_map``)."""
        return self.config.upstream_map.get(target, target)


class _BadRequestError(Exception):
    """The client's framing is broken; answer 400 and close."""


class _ClientGoneError(Exception):
    """Reading the client's body failed; the half-sent upstream request must be dropped.

    Deliberately not an ``OSError``, so it is never mistaken for an upstream failure.
    """


class _Handler(BaseHTTPRequestHandler):
    """Serves one client connection (keep-alive: many requests) for one listener."""

    protocol_version = "HTTP/1.1"  # keep-alive, like the FE and BE
    server: _Listener

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.proxy.config.client_idle_timeout)
        self._upstream: http.client.HTTPConnection | None = None
        self.server.track(self.connection, alive=True)

    def finish(self) -> None:
        self.server.track(self.connection, alive=False)
        if self._upstream is not None:
            self._upstream.close()
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        # http.server pre-formats its access log; keep it at debug level.
        logger.debug("faultproxy %s %s", self.address_string(), format % args)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = (  # noqa: N815
        lambda self: self._dispatch()
    )

    # -- dispatch ---------------------------------------------------------------------------

    def _dispatch(self) -> None:
        path = urlsplit(self.path).path
        if path == _CONTROL_PATH or path.startswith(_CONTROL_PATH + "/"):
            self._control(path)
            return
        upstream = self.server.upstream
        if upstream is None:
            self._reply(404, {"error": f"control listener: only {_CONTROL_PATH}"})
            return
        try:
            self._proxy(upstream, classify_path(path), self.server.hop)
        except _BadRequestError as e:
            self.close_connection = True
            self._reply(400, {"error": str(e)})
        except _ClientGoneError as e:
            logger.debug("faultproxy client body error path=%s err=%s", self.path, e)
            self.close_connection = True
            if self._upstream is not None:
                self._upstream.close()
        except OSError as e:
            # The client went away (e.g. it timed out during an injected delay).
            logger.debug("faultproxy client connection error path=%s err=%s", self.path, e)
            self.close_connection = True

    def _proxy(self, upstream: Target, op: Op, hop: Hop) -> None:
        book = self.server.proxy.book
        pause = book.take_jitter(op, hop)
        if pause:
            time.sleep(pause)
        rule = book.take_pre(op, hop)
        if rule is not None:
            logger.info("faultproxy inject kind=%s op=%s hop=%s", rule.kind, op, hop)
            if rule.kind is FaultKind.RESET_BEFORE:
                self._abort()
                return
            if rule.kind is FaultKind.HTTP_ERROR:
                for _ in self._body():  # keep the connection's framing intact
                    pass
                self._send_error(rule)
                return
            time.sleep(rule.seconds)  # DELAY: then forward anyway, like a late packet
        resp = self._forward(upstream, op, hop)
        if resp is None:
            return
        with contextlib.closing(resp):
            status = resp.status
            location = resp.getheader("Location")
            if 300 <= status < 400 and location:
                location = self._rewrite_location(upstream, location)
            elif book.take_post(op, hop) is not None:
                logger.info("faultproxy inject kind=drop_response op=%s hop=%s", op, hop)
                resp.read()  # let the upstream finish; its connection stays reusable
                self.close_connection = True  # FIN without a status line
                return
            self._relay(resp, location)

    # -- upstream ---------------------------------------------------------------------------

    def _forward(self, upstream: Target, op: Op, hop: Hop) -> http.client.HTTPResponse | None:
        """Send the request upstream; None after aborting the client on upstream failure."""
        conn = self._connection(upstream)
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        dropped = {h.strip().lower() for h in self.headers.get("Connection", "").split(",")}
        body = self._body()
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", upstream.netloc)
            for name, value in self.headers.items():
                low = name.lower()
                if low in _HOP_BY_HOP or low in dropped:
                    continue
                conn.putheader(name, value)
            if chunked:
                conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            self.server.proxy.book.count_forwarded(op, hop)
            for piece in body:
                conn.send(b"%x\r\n%b\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                conn.send(b"0\r\n\r\n")
        except OSError as e:
            # An upstream may answer (e.g. 307) before reading the whole body: still try.
            logger.debug("faultproxy upstream send error target=%s err=%s", upstream.netloc, e)
            for _ in body:
                pass
        try:
            return conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            logger.warning(
                "faultproxy upstream failed target=%s op=%s err=%s; resetting client",
                upstream.netloc,
                op,
                e,
            )
            conn.close()
            # The client sees what it would see without the proxy: a broken connection.
            self._abort()
            return None

    def _connection(self, upstream: Target) -> http.client.HTTPConnection:
        conn = self._upstream
        if conn is not None and conn.sock is not None and _dropped(conn.sock):
            conn.close()  # the upstream closed our idle keep-alive: reconnect, never re-send
        if conn is None:
            real = self.server.proxy.connect_target(upstream)
            conn = http.client.HTTPConnection(
                real.host, real.port, timeout=self.server.proxy.config.upstream_timeout
            )
            self._upstream = conn
        return conn

    def _rewrite_location(self, upstream: Target, location: str) -> str:
        absolute = urljoin(f"http://{upstream.netloc}{self.path}", location)
        parts = urlsplit(absolute)
        if parts.scheme != "http" or not parts.hostname:
            return location
        target = Target(parts.hostname, parts.port or 80)
        port = self.server.proxy.listener_port(target)
        host = self.server.proxy.config.advertise_host or self._client_host()
        if ":" in host:
            host = f"[{host}]"
        return urlunsplit(("http", f"{host}:{port}", parts.path, parts.query, parts.fragment))

    def _client_host(self) -> str:
        """The host name the client used for us, so the next hop resolves the same way."""
        host_header = self.headers.get("Host")
        if host_header:
            name = urlsplit(f"//{host_header}").hostname
            if name:
                return name
        return str(self.server.server_address[0])

    # -- client side ------------------------------------------------------------------------

    def _body(self) -> Iterator[bytes]:
        """The request body, streamed in pieces (de-chunked if the client sent chunks)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._chunks()
        raw = self.headers.get("Content-Length") or "0"
        try:
            length = int(raw)
        except ValueError as e:
            msg = f"bad Content-Length {raw!r}"
            raise _BadRequestError(msg) from e
        return self._fixed(length)

    def _fixed(self, length: int) -> Iterator[bytes]:
        while length > 0:
            try:
                piece = self.rfile.read(min(_PIECE, length))
            except OSError as e:
                msg = f"reading the request body: {e}"
                raise _ClientGoneError(msg) from e
            if not piece:
                msg = "client closed the connection mid-body"
                raise _ClientGoneError(msg)
            length -= len(piece)
            yield piece

    def _chunks(self) -> Iterator[bytes]:
        while True:
            try:
                line = self.rfile.readline(1024)
            except OSError as e:
                msg = f"reading a chunk header: {e}"
                raise _ClientGoneError(msg) from e
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as e:
                msg = f"bad chunk size line {line!r}"
                raise _BadRequestError(msg) from e
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers: dropped (hop-by-hop)
                return
            yield from self._fixed(size)
            self.rfile.readline(8)  # CRLF after the chunk

    def _relay(self, resp: http.client.HTTPResponse, location: str | None) -> None:
        self.send_response_only(resp.status, resp.reason)
        for name, value in resp.getheaders():
            low = name.lower()
            if low in _HOP_BY_HOP or low == "content-length":
                continue
            self.send_header(name, location if low == "location" and location else value)
        no_body = self.command == "HEAD" or resp.status in (204, 304) or resp.status < 200
        length = resp.getheader("Content-Length")
        chunked_out = False
        if length is not None and not resp.chunked:
            self.send_header("Content-Length", length)
        elif not no_body:
            self.send_header("Transfer-Encoding", "chunked")
            chunked_out = True
        self.end_headers()
        if no_body:
            return
        while piece := resp.read(_PIECE):
            self.wfile.write(b"%x\r\n%b\r\n" % (len(piece), piece) if chunked_out else piece)
        if chunked_out:
            self.wfile.write(b"0\r\n\r\n")

    def _send_error(self, rule: FaultRule) -> None:
        data = rule.body.encode()
        try:
            json.loads(rule.body)
            ctype = "application/json"
        except ValueError:
            ctype = "text/plain; charset=utf-8"
        self.send_response_only(rule.status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _abort(self) -> None:
        """Reset the client connection (RST, not FIN): "connection reset by peer"."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # rfile holds a reference to the socket: close both so the fd really closes now.
        with contextlib.suppress(OSError):
            self.rfile.close()
            self.connection.close()

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, indent=2, sort_keys=True).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- control ----------------------------------------------------------------------------

    def _control(self, path: str) -> None:
        proxy = self.server.proxy
        raw = b"".join(self._body())
        if path == _CONTROL_PATH and self.command == "GET":
            self._reply(200, {**proxy.book.snapshot(), "listeners": proxy.listeners()})
        elif (path == _CONTROL_PATH and self.command == "DELETE") or (
            path == _CONTROL_PATH + "/reset" and self.command == "POST"
        ):
            proxy.book.reset()
            self._reply(200, {"reset": True})
        elif path == _CONTROL_PATH and self.command == "POST":
            try:
                data = json.loads(raw or b"null")
                items = data["rules"] if isinstance(data, dict) and "rules" in data else [data]
                rules = [FaultRule.from_json(item) for item in items]
            except (ValueError, TypeError, FaultRuleError) as e:
                self._reply(400, {"error": str(e)})
                return
            self._reply(200, {"ids": [proxy.book.add(r) for r in rules]})
        else:
            self._reply(
                404,
                {
                    "error": f"{self.command} {path}: use GET|POST|DELETE {_CONTROL_PATH}, "
                    f"POST {_CONTROL_PATH}/reset"
                },
            )


def _dropped(sock: socket.socket) -> bool:
    """True if an idle keep-alive socket is readable, i.e. the peer closed it (or sent junk)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
