"""HTTP client for the Stream Load transaction API (driver and executors).

One :class:`StarRocksClient` per process; it is cheap, holds a ``requests.Session`` and is
created lazily on executors (a session is not picklable, the config is).

Why the settings are what they are:

* ``allow_redirects=False`` and manual 307 following: ``requests`` drops ``Authorization``
  when the port changes (FE 8030 -> BE 8040) and a BE ``begin`` without it fails with
  ``no valid Basic authorization`` (spec §1). We re-send method, every header and the body.
* Bounded connect/read timeouts on every call: a hung FE must not hang a micro-batch.
* No ``Expect: 100-continue``: ``requests`` does not implement the handshake and the
  transaction endpoints do not need it (spec §2.1).
* Responses are judged by :func:`sinks.starrocks.errors.classify` only.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import requests

from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.errors import (
    ProtocolError,
    StarRocksError,
    TxnInProcessingError,
    classify,
    retry_in_place,
)
from sinks.starrocks.protocol import LoadState, TxnOp, TxnResponse
from sinks.starrocks.retry import RetryPolicy

logger = logging.getLogger(__name__)

_MAX_REDIRECTS = 5
# TXN_IN_PROCESSING: another request holds the channel, e.g. another task's load of the same
# table in a multi-table transaction; that one ends in tens of milliseconds, not seconds.
_BUSY = RetryPolicy(base_s=0.01, cap_s=0.2)


class StarRocksClient:
    """Transaction API calls against the FE listed in ``load-url`` (failover in order).

    Methods raise :class:`sinks.starrocks.errors.StarRocksError` subclasses; after a
    ``Transient`` error from ``begin``/``load`` the caller may *not* assume that nothing
    happened on the server: it must decide with :meth:`get_load_state`.
    """

    def __init__(
        self, config: StarRocksSinkConfig, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._config = config
        self._sleep = sleep
        self._policy = RetryPolicy(
            max_retries=config.max_retries,
            base_s=config.retry_backoff_s,
            cap_s=config.retry_max_backoff_s,
            sleep=sleep,
        )
        self._session = requests.Session()
        # The environment is read once per origin (_environment), not by requests on every
        # call (~0.6 ms of CPU each), and ~/.netrc never: an entry for a StarRocks host would
        # replace the Authorization header, the configured credentials, with its own.
        self._session.trust_env = False
        self._environment: dict[str, dict[str, Any]] = {}
        self._host_index = 0
        self._lock = threading.Lock()
        token = f"{config.username}:{config.password.reveal()}".encode()
        self._auth_header = "Basic " + base64.b64encode(token).decode("ascii")

    def close(self) -> None:
        """Close pooled connections."""
        self._session.close()

    def _environment_of(self, url: str) -> dict[str, Any]:
        """What the environment sets for ``url``'s origin: proxies (and no_proxy), CA bundle."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        found = self._environment.get(origin)
        if found is None:
            with requests.Session() as env:  # trust_env: as requests reads it, netrc aside
                read = env.merge_environment_settings(origin, {}, None, None, None)
            found = {key: read[key] for key in ("proxies", "verify", "cert")}
            self._environment[origin] = found
        return found

    # -- operations -------------------------------------------------------------------------

    def begin(
        self, label: str, *, multi: bool, table: str | None = None, timeout_s: int | None = None
    ) -> TxnResponse:
        """Begin a transaction (multi-table: no ``table``; single-table: ``table`` required)."""
        headers = self._txn_headers(label, multi=multi, table=table)
        headers["timeout"] = str(timeout_s or self._config.txn_timeout_s)
        return self._call(TxnOp.BEGIN, "POST", self._txn_path(TxnOp.BEGIN), headers, label, table)

    def load(
        self,
        label: str,
        table: str,
        body: bytes,
        *,
        multi: bool,
        properties: Mapping[str, str] | None = None,
    ) -> TxnResponse:
        """Send one JSON-array chunk of ``table`` inside transaction ``label``."""
        headers = dict(properties if properties is not None else self._config.properties_for(table))
        headers.update(self._txn_headers(label, multi=multi, table=table))
        headers["Content-Type"] = "application/json"
        return self._call(
            TxnOp.LOAD, "PUT", self._txn_path(TxnOp.LOAD), headers, label, table, body=body
        )

    def prepare(self, label: str, *, table: str | None = None) -> TxnResponse:
        """Pre-commit a single-table transaction (multi-table mode has no prepare)."""
        headers = self._txn_headers(label, multi=False, table=table)
        if self._config.prepared_timeout_s:
            headers["prepared_timeout"] = str(self._config.prepared_timeout_s)
        response = self._call(
            TxnOp.PREPARE, "POST", self._txn_path(TxnOp.PREPARE), headers, label, table
        )
        _report_filtered(response, label, table)
        return response

    def commit(self, label: str, *, multi: bool, table: str | None = None) -> TxnResponse:
        """Commit; a repeated commit of a committed label answers OK (spec §4.4)."""
        headers = self._txn_headers(label, multi=multi, table=table)
        response = self._call(
            TxnOp.COMMIT, "POST", self._txn_path(TxnOp.COMMIT), headers, label, table
        )
        _report_filtered(response, label, table)
        return response

    def rollback(self, label: str, *, multi: bool, table: str | None = None) -> TxnResponse:
        """Roll back; idempotent on an ABORTED label."""
        headers = self._txn_headers(label, multi=multi, table=table)
        return self._call(
            TxnOp.ROLLBACK, "POST", self._txn_path(TxnOp.ROLLBACK), headers, label, table
        )

    def cancel(self, label: str, table: str) -> TxnResponse:
        """FE cancel API ``POST /api/{db}/{table}/_cancel?label=`` (single-table labels).

        The fallback of the Flink connector's lingering-transaction aborter: a PREPARE
        label whose BE context is gone answers TXN_NOT_EXISTS to ``rollback`` (the FE 307s
        it to that BE) until the FE times it out; the FE aborts it here (spec §2.5).
        """
        db = quote(self._config.database, safe="")
        path = f"/api/{db}/{quote(table, safe='')}/_cancel?label={quote(label, safe='')}"
        return self._call(TxnOp.ROLLBACK, "POST", path, {}, label, table)

    def get_load_state(self, label: str) -> LoadState:
        """Current FE status of ``label``; UNKNOWN if the FE never saw it (or forgot it)."""
        db = quote(self._config.database, safe="")
        path = f"/api/{db}/get_load_state?label={quote(label, safe='')}"
        response = self._call(TxnOp.GET_LOAD_STATE, "GET", path, {}, label, None)
        return response.state

    # -- mechanics --------------------------------------------------------------------------

    def _txn_path(self, op: TxnOp) -> str:
        return f"/api/transaction/{op.value}"

    def _txn_headers(self, label: str, *, multi: bool, table: str | None) -> dict[str, str]:
        headers = {"label": label, "db": self._config.database}
        if table is not None:
            headers["table"] = table
        if multi:
            headers["transaction_type"] = "multi"
        return headers

    def _call(
        self,
        op: TxnOp,
        method: str,
        path: str,
        headers: dict[str, str],
        label: str,
        table: str | None,
        *,
        body: bytes | None = None,
    ) -> TxnResponse:
        """Send with bounded in-place retries (only where :func:`retry_in_place` allows)."""
        retries = self._config.max_retries
        attempt = 0
        busy = 0
        # One logical call never outlives its deadline, whatever the retries: a hung FE
        # (socket open, no answer) would otherwise hold a batch for retries x socket timeout.
        deadline = time.monotonic() + self._config.call_deadline_s
        while True:
            started = time.monotonic()
            read_timeout = max(0.001, min(self._config.socket_timeout_s, deadline - started))
            result = self._send_once(
                op, method, path, headers, label, table, body, read_timeout=read_timeout
            )
            if isinstance(result, TxnResponse):
                logger.debug(
                    "starrocks call op=%s label=%s table=%s status=%s ms=%d",
                    op,
                    label,
                    table,
                    result.status,
                    (time.monotonic() - started) * 1000,
                )
                return result
            if isinstance(result, TxnInProcessingError):
                # The server did nothing (spec §6.3): wait for the other request, briefly
                # and as often as the call's deadline allows, not counted as a retry.
                delay = _BUSY.delay(busy)
                if time.monotonic() + delay >= deadline:
                    raise result
                logger.debug(
                    "starrocks busy op=%s label=%s table=%s waits=%d delay_s=%.3f error=%s",
                    op,
                    label,
                    table,
                    busy + 1,
                    delay,
                    result,
                )
                busy += 1
                self._sleep(delay)
                continue
            if attempt >= retries or not retry_in_place(op, result):
                raise result
            delay = self._policy.delay(attempt)
            if time.monotonic() + delay >= deadline:
                logger.warning(
                    "starrocks call gave up op=%s label=%s table=%s attempts=%d "
                    "sink.call.deadline-ms=%d error=%s",
                    op,
                    label,
                    table,
                    attempt + 1,
                    self._config.call_deadline_s * 1000,
                    result,
                )
                raise result
            logger.warning(
                "starrocks retry op=%s label=%s table=%s attempt=%d delay_s=%.2f error=%s",
                op,
                label,
                table,
                attempt + 1,
                delay,
                result,
            )
            self._sleep(delay)
            attempt += 1

    def _send_once(
        self,
        op: TxnOp,
        method: str,
        path: str,
        headers: dict[str, str],
        label: str,
        table: str | None,
        body: bytes | None,
        *,
        read_timeout: float | None = None,
    ) -> TxnResponse | StarRocksError:
        base = self._current_host()
        url = base + path
        full_headers = dict(headers)
        full_headers["Authorization"] = self._auth_header
        read = self._config.socket_timeout_s if read_timeout is None else read_timeout
        timeout = (min(self._config.connect_timeout_s, read), read)
        for _hop in range(_MAX_REDIRECTS + 1):
            try:
                response = self._session.request(
                    method,
                    url,
                    headers=full_headers,
                    data=body,
                    timeout=timeout,
                    allow_redirects=False,
                    **self._environment_of(url),
                )
            except requests.RequestException as e:
                not_sent = _not_sent(e)
                if not_sent and url.startswith(base):
                    self._rotate_host(base)
                err = classify(op, None, None, label=label, table=table, detail=_describe(e))
                if isinstance(err, StarRocksError):
                    err.context["not_sent"] = not_sent
                    err.__cause__ = e
                return err
            if response.status_code in (301, 302, 303, 307, 308):
                location = response.headers.get("Location")
                response.close()
                if not location:
                    return ProtocolError(
                        f"StarRocks {op} label={label}: HTTP {response.status_code} "
                        "without Location",
                        op=str(op),
                        label=label,
                        table=table,
                    )
                target = urljoin(url, location)
                refused = self._refuse_redirect(response.status_code, url, target)
                if refused is not None:
                    return ProtocolError(
                        f"StarRocks {op} label={label}: HTTP {response.status_code} from {url} "
                        f"to {target} not followed ({refused}); the credentials were not sent "
                        "there",
                        op=str(op),
                        label=label,
                        table=table,
                    )
                # Same method, same headers (Authorization included), same body: spec §1.
                url = target
                continue
            return classify(op, response.status_code, response.content, label=label, table=table)
        return ProtocolError(
            f"StarRocks {op} label={label}: more than {_MAX_REDIRECTS} redirects",
            op=str(op),
            label=label,
            table=table,
        )

    def _refuse_redirect(self, status: int, source: str, target: str) -> str | None:
        """Why a redirect must not be followed with our credentials, or ``None``.

        StarRocks' FE answers 307 (never 301/302/303, which clients may turn into a body-less
        GET) to one of its BEs, over the scheme the client used. Anything else is not
        StarRocks: following it would hand ``Authorization`` to another host and trust its
        answers (a forged ``VISIBLE`` would skip a batch).
        """
        if status not in (307, 308):
            return "StarRocks redirects with 307 only"
        src, dst = urlsplit(source), urlsplit(target)
        if dst.scheme != src.scheme:
            return f"scheme changes from {src.scheme} to {dst.scheme}"
        host = dst.hostname or ""
        if not self._config.allows_redirect_to(host):
            return (
                f"host {host!r} is neither a load-url FE nor in sink.redirect.allowed-hosts; "
                "add your BE hosts there (or '*')"
            )
        return None

    def _current_host(self) -> str:
        with self._lock:
            return self._config.load_urls[self._host_index % len(self._config.load_urls)]

    def _rotate_host(self, failed: str) -> None:
        with self._lock:
            if self._config.load_urls[self._host_index % len(self._config.load_urls)] == failed:
                self._host_index += 1


def _report_filtered(response: TxnResponse, label: str, table: str | None) -> None:
    """Rows StarRocks dropped (only possible with sink.allow-filtered-rows): never silent."""
    try:
        filtered = int(response.get("NumberFilteredRows") or 0)
    except (TypeError, ValueError):
        return
    if filtered > 0:
        logger.warning(
            "starrocks dropped rows label=%s table=%s filtered=%d loaded=%s error_url=%s "
            "(max_filter_ratio > 0 with sink.allow-filtered-rows=true)",
            label,
            table or "*",
            filtered,
            response.get("NumberLoadedRows"),
            response.get("ErrorURL"),
        )


def _not_sent(error: requests.RequestException) -> bool:
    """True when the request certainly never reached the server (safe to re-send)."""
    if isinstance(error, requests.ConnectTimeout):
        return True
    if isinstance(error, requests.ConnectionError):
        text = repr(error)
        return "NewConnectionError" in text or "Connection refused" in text
    return False


def _describe(error: requests.RequestException) -> str:
    """Exception class and reason, without the request (which carries headers)."""
    return f"{type(error).__name__}: {str(error)[:300]}"
