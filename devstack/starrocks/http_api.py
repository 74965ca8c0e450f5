"""The FE and BE HTTP listeners (spec §1-§3) and the FE admin endpoint ``/_emulator/*``.

Both are ``ThreadingHTTPServer`` on HTTP/1.1 with keep-alive. Every request body is read in
full before answering, a 307 included, because clients that do not implement
``Expect: 100-continue`` (``requests``) upload the body to the FE anyway (spec §1).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from devstack.starrocks.faults import Fault
from devstack.starrocks.txns import Reply, be, fe, rest_fail

if TYPE_CHECKING:
    from devstack.starrocks.server import Emulator

log = logging.getLogger(__name__)
TXN_OPS = ("begin", "load", "prepare", "commit", "rollback")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], role: str, emu: Emulator) -> None:
        self.role = role
        self.emu = emu
        super().__init__(addr, _Handler)


def make_server(host: str, port: int, role: str, emu: Emulator) -> ThreadingHTTPServer:
    """Bind a listener for ``role`` ("fe" or "be")."""
    return _Server((host, port), role, emu)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without TCP_NODELAY the second one waits for the
    # client's delayed ACK (~40 ms per request).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
        log.debug("%s %s", self.server.role, format % args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -- plumbing --------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            chunks = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, reply: Reply) -> None:
        if reply.drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if reply.text is not None:
            data = reply.text.encode()
            ctype = "text/plain"
        else:
            indent = 4 if reply.style == "be" else 2
            data = json.dumps(reply.body, indent=indent).encode()
            ctype = "application/json"
        self.send_response(reply.http_status)
        self.send_header("Content-Type", ctype)
        if reply.http_status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm=""')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _redirect(self, path: str, query: str) -> None:
        emu = self.server.emu
        location = f"http://{emu.host}:{emu.be_port}{path}" + (f"?{query}" if query else "")
        self.send_response(307)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _auth(self) -> tuple[str, str] | None:
        raw = self.headers.get("Authorization") or ""
        if not raw.lower().startswith("basic "):
            return None
        try:
            user, _, pw = base64.b64decode(raw[6:].strip()).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return user, pw

    def _fe_auth_error(self) -> Reply | None:
        emu = self.server.emu
        cred = self._auth()
        if cred is None:
            msg = "Need auth information."
        elif cred != (emu.user, emu.password):
            msg = f"Access denied for {cred[0]}@{self.client_address[0]}"
        else:
            return None
        r = rest_fail(msg)
        r.http_status = 401
        return r

    # -- dispatch --------------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        try:
            body = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            return
        url = urlsplit(self.path)
        path = unquote(url.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            reply = self._route(method, path, url.query, headers, body)
        except Exception as e:
            log.exception("unexpected error role=%s path=%s", self.server.role, path)
            reply = Reply({"status": "FAILED", "msg": str(e)}, "rest", http_status=500)
        if reply is None or reply.redirect:
            self._redirect(url.path, url.query)
        else:
            self._send(reply)

    def _route(
        self, method: str, path: str, query: str, h: dict[str, str], body: bytes
    ) -> Reply | None:
        parts = [p for p in path.split("/") if p]
        role = self.server.role
        if role == "fe" and parts[:1] == ["_emulator"]:
            return self._admin(method, parts[1:], body)
        if len(parts) == 3 and parts[:2] == ["api", "transaction"]:
            if method not in ("POST", "PUT"):
                return Reply({"status": "FAILED", "msg": "method not allowed"}, "rest", 405)
            op = parts[2].lower()
            if role == "fe":
                return self._fe_txn(op, h, body)
            return self._be_txn(op, h, body)
        if len(parts) == 3 and parts[0] == "api" and parts[2] == "get_load_state":
            if role != "fe":
                return Reply({"status": "FAILED", "msg": "not found"}, "rest", 404)
            err = self._fe_auth_error()
            if err is not None:
                return err
            fault = self.server.emu.faults.take("get_load_state")
            early = self._apply_fault(fault, "fe")
            if early is not None:
                return early
            label = (parse_qs(query).get("label") or [""])[0]
            return self.server.emu.txns.get_load_state(parts[1], label)
        if len(parts) == 4 and parts[0] == "api" and parts[3] == "_cancel" and role == "fe":
            if method != "POST":
                return Reply({"status": "FAILED", "msg": "method not allowed"}, "rest", 405)
            err = self._fe_auth_error()
            if err is not None:
                return err
            label = (parse_qs(query).get("label") or [""])[0]
            return self.server.emu.txns.fe_cancel(parts[1], parts[2], label)
        if len(parts) == 4 and parts[0] == "api" and parts[3] == "_stream_load":
            return self._stream_load(method, parts[1], parts[2], h, body)
        if role == "be" and parts == ["api", "_load_error_log"]:
            key = (parse_qs(query).get("file") or [""])[0].removeprefix("error_log_")
            text = self.server.emu.txns.error_logs.get(key)
            if text is None:
                return Reply({"status": "FAILED", "msg": "no such error log"}, "rest", 404)
            return Reply(text=text)
        return Reply({"status": "FAILED", "msg": f"no handler for {path}"}, "rest", 404)

    def _apply_fault(self, fault: Fault | None, style: str, label: str = "") -> Reply | None:
        """Fail or delay per an armed fault; None means go on with the real operation."""
        if fault is None:
            return None
        if fault.kind == "fail":
            if style == "be" and fault.status == "TXN_IN_PROCESSING":
                reply = be(fault.status, fault.message, Label=label)
            elif style == "be":
                reply = be(fault.status, fault.message)
            else:
                reply = fe(fault.status, fault.message)
            if fault.http_status is not None:
                reply.http_status = fault.http_status
            return reply
        if fault.kind == "delay":
            time.sleep(fault.seconds)
        return None

    def _fe_txn(self, op: str, h: dict[str, str], body: bytes) -> Reply | None:
        err = self._fe_auth_error()
        if err is not None:
            return err
        emu = self.server.emu
        txns = emu.txns
        if op not in TXN_OPS:
            return fe("FAILED", f"Unknown transaction operation: {op}")
        if not txns.fe_answers(op, h):
            # The real FE re-validates on the BE hop; a multi-table load still plans here.
            if op == "load":
                return txns.fe_load(h)
            return None
        fault = emu.faults.take(op)
        early = self._apply_fault(fault, "fe")
        if early is not None:
            return early
        kind = fault.kind if fault is not None else ""
        reply: Reply | None
        if op == "begin":
            reply = txns.fe_begin(h, too_many=kind == "too_many_txns")
        elif op == "load":
            reply = txns.fe_load(h)
        elif op == "prepare":
            reply = txns.fe_prepare(h)
        elif op == "commit":
            reply = txns.fe_commit(
                h,
                publish_timeout=kind == "publish_timeout",
                ok_but_failed=kind == "commit_ok_but_failed",
                failed=fault.message if fault is not None and kind == "commit_failed" else None,
            )
        else:
            reply = txns.fe_rollback(h)
        if reply is not None and reply.redirect:
            return None
        if kind == "journal_restart":
            txns.restart(journal=True)
        if reply is not None and kind in ("drop_response", "journal_restart"):
            reply.drop = True
        return reply

    def _be_txn(self, op: str, h: dict[str, str], body: bytes) -> Reply:
        emu = self.server.emu
        txns = emu.txns
        if op == "list":
            return Reply({"Status": "OK", "Message": "", "Transactions": txns.list_txns()}, "be")
        if op not in TXN_OPS:
            return be("INVALID_ARGUMENT", f"Unknown transaction operation: {op}")
        fault = emu.faults.take(op)
        kind = fault.kind if fault is not None else ""
        delay = fault.seconds if fault is not None and kind == "delay" else 0.0
        if kind == "fail":
            early = self._apply_fault(fault, "be", h.get("label", ""))
            if early is not None:
                return early
        if op == "begin":
            cred = self._auth()
            authorized = cred is not None and cred == (emu.user, emu.password)
            if delay:
                time.sleep(delay)
            reply = txns.be_begin(h, authorized=authorized, too_many=kind == "too_many_txns")
        elif op == "load":
            reply = txns.be_load(h, body, delay_s=delay)
        else:
            reply = txns.be_finish(op, h, delay_s=delay, publish_timeout=kind == "publish_timeout")
        if kind == "drop_response":
            reply.drop = True
        return reply

    def _stream_load(
        self, method: str, db: str, table: str, h: dict[str, str], body: bytes
    ) -> Reply | None:
        if method != "PUT":
            return Reply({"status": "FAILED", "msg": "method not allowed"}, "rest", 405)
        emu = self.server.emu
        if self.server.role == "fe":
            err = self._fe_auth_error()
            if err is not None:
                return err
            if (h.get("expect") or "").lower() != "100-continue":
                return fe(
                    "FAILED",
                    "class com.starrocks.common.DdlException: There is no 100-continue header",
                )
            return None
        cred = self._auth()
        if cred is None or cred != (emu.user, emu.password):
            return Reply({"TxnId": -1, "Status": "Fail", "Message": "Access denied"}, "be")
        return emu.txns.plain_stream_load(db, table, h, body)

    # -- admin -----------------------------------------------------------------------------

    def _admin(self, method: str, parts: list[str], body: bytes) -> Reply:
        emu = self.server.emu
        what = parts[0] if parts else ""
        if what == "faults" and method == "GET":
            return Reply({"faults": emu.faults.snapshot()}, "fe")
        if what == "faults" and method == "POST":
            try:
                emu.faults.add(Fault.from_json(json.loads(body or b"{}")))
            except (ValueError, TypeError, KeyError) as e:
                return Reply({"ok": False, "error": str(e)}, "fe", 400)
            return Reply({"ok": True}, "fe")
        if what == "reset-faults" and method == "POST":
            emu.faults.reset()
            return Reply({"ok": True}, "fe")
        if what == "discard" and method == "POST":
            try:
                names = json.loads(body or b"{}")["tables"]
                pairs = [tuple(str(name).split(".")) for name in names]
                if not isinstance(names, list) or any(len(p) != 2 or not all(p) for p in pairs):
                    msg = f"tables must be a list of 'db.table' names, not {names!r}"
                    raise ValueError(msg)
            except (ValueError, TypeError, KeyError) as e:
                return Reply({"ok": False, "error": str(e)}, "fe", 400)
            emu.storage.discard_rows((db, table) for db, table in pairs)
            return Reply({"ok": True}, "fe")
        if what == "restart" and method == "POST":
            try:
                journal = bool(json.loads(body or b"{}").get("journal", False))
            except (ValueError, AttributeError) as e:
                return Reply({"ok": False, "error": str(e)}, "fe", 400)
            emu.txns.restart(journal=journal)
            return Reply({"ok": True}, "fe")
        if what == "txns" and method == "GET":
            return Reply({"txns": emu.txns.list_txns()}, "fe")
        if what == "health":
            return Reply({"ok": True}, "fe")
        return Reply({"ok": False, "error": f"unknown admin call {method} {what}"}, "fe", 404)
