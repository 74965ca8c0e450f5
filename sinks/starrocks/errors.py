"""StarRocks sink errors and the ONE function that maps protocol responses to them.

"What failed" is the class; "may I retry" is the :class:`common.errors.Transient` /
:class:`common.errors.Terminal` mixin. Two retry levels use it:

* the HTTP client retries a request in place only when that is safe for the operation
  (see :func:`retry_in_place`);
* the sink retries the whole batch under a new label attempt for any other ``Transient``
  error, after the old label is known ABORTED.

The texts matched below are the server's own (``docs/starrocks-txn-protocol.md`` §3.3).
Messages never contain credentials: only op, label, table, server status/message and advice.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sinks.exceptions import SinkError, SinkTerminalError, SinkTransientError
from sinks.starrocks.protocol import TxnOp, TxnResponse


class StarRocksError(SinkError):
    """Any failure talking to StarRocks; ``context`` holds op/label/table/status."""


class StarRocksTransientError(SinkTransientError, StarRocksError):
    """Retrying (the request when safe, else the batch under a new attempt) may help."""


class StarRocksTerminalError(SinkTerminalError, StarRocksError):
    """A person must act; the message says what to do."""


class LabelError(StarRocksTerminalError):
    """A label would violate StarRocks' label rule (length / characters)."""


class ConnectionFailedError(StarRocksTransientError):
    """No HTTP response: connect error, read timeout, connection reset."""


class ServerBusyError(StarRocksTransientError):
    """5xx, SERVICE_UNAVAILABLE, MEM_LIMIT_EXCEEDED, INTERNAL_ERROR or an unparseable body."""


class TxnInProcessingError(StarRocksTransientError):
    """TXN_IN_PROCESSING: another request holds the transaction; the server did nothing."""


class CommitOutcomeUnknownError(StarRocksTransientError):
    """The commit may or may not have happened (publish timeout, lock timeout, committing).

    Only ``get_load_state`` can decide; never begin a new label before it does.
    """


class TransactionNotFoundError(StarRocksTransientError):
    """The server holds no running transaction for the label (timed out, cleaned, or gone).

    Transient at the batch level: once the label is known ABORTED/UNKNOWN the batch is
    retried under the next attempt.
    """


class TransactionAbortedError(StarRocksTransientError):
    """The transaction was aborted (timeout, failed load, rollback); retry the batch."""


class AuthError(StarRocksTerminalError):
    """401 / access denied / credentials lost on a redirect."""


class LabelAlreadyExistsError(StarRocksTerminalError):
    """``begin`` on a label that is already used (``context['existing_status']``)."""


class TooManyTransactionsError(StarRocksTerminalError):
    """``current running txns on db ... larger than limit``."""


class FilteredRowsError(StarRocksTerminalError):
    """Rows rejected by the table schema beyond ``max_filter_ratio``."""


class UnknownDatabaseError(StarRocksTerminalError):
    """The database does not exist."""


class UnknownTableError(StarRocksTerminalError):
    """A target table does not exist."""


class DataTooLargeError(StarRocksTerminalError):
    """A load body exceeded a BE size limit."""


class TransactionCommittedError(StarRocksTerminalError):
    """The label is already COMMITTED/VISIBLE (rollback refused, load after commit)."""


class InvalidRequestError(StarRocksTerminalError):
    """The server rejected the request itself (bad header, unsupported operation, ...)."""


class ProtocolError(StarRocksTerminalError):
    """An answer this client does not understand (bad redirect, unknown status)."""


_TOO_MANY_ADVICE = (
    "StarRocks refuses new transactions on this database: raise the FE setting "
    'max_running_txn_num_per_db (ADMIN SET FRONTEND CONFIG ("max_running_txn_num_per_db" = '
    '"...")), or lower the number of pipelines/parallel writers on this database; leaked '
    "transactions of crashed writers show in SHOW PROC '/transactions/<db_id>/running'"
)
_FILTERED_ADVICE = (
    "rows do not fit the table schema: open the error URL to see them, fix the data or the "
    "schema (or route such rows to the dead-letter table upstream); raise "
    "sink.properties.max_filter_ratio with sink.allow-filtered-rows=true only if dropping "
    "rows is acceptable"
)
_AUTH_ADVICE = (
    "check username/password and that the user has INSERT on the target tables; if this "
    "comes from a BE, credentials were lost on a 307 redirect"
)


_TRACKING_URL = re.compile(r"tracking_url:\s*(\S+)")


def _parse_body(body: bytes | str | None) -> dict[str, Any] | None:
    if body is None:
        return None
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _tracking_url(message: str) -> str:
    """The ``tracking_url: <url>`` a multi-table commit puts inside its message."""
    match = _TRACKING_URL.search(message)
    return match.group(1) if match else ""


def _no_rows_loaded(text: str) -> bool:
    """Whether ``text`` (lower-cased) says a load loaded no row.

    ``ERR_NO_PARTITIONS_HAVE_DATA_LOAD`` in a multi-table sub-task, "all partitions have no
    load data" from older FEs. Later builds raise ``ERR_NO_ROWS_IMPORTED`` there, whose text
    was not at hand to check: its hint at ``empty_load_as_error``, if it kept one, is matched.
    """
    return (
        "no partitions have data available" in text
        or "all partitions have no load data" in text
        or "empty_load_as_error" in text
    )


def _field(data: dict[str, Any], *names: str) -> str:
    lowered = {k.lower(): v for k, v in data.items()}
    for name in names:
        value = lowered.get(name.lower())
        if value is not None and str(value) != "":
            return str(value)
    return ""


def classify(
    op: TxnOp,
    http_status: int | None,
    body: bytes | str | None,
    *,
    label: str | None = None,
    table: str | None = None,
    detail: str = "",
) -> TxnResponse | StarRocksError:
    """Map one protocol answer to a success value or the error to raise.

    This is the only place that interprets StarRocks responses. Success is decided from the
    JSON body, never from the HTTP code (every transaction answer is HTTP 200, spec §3.1).

    Args:
        op: The operation that was sent.
        http_status: HTTP status code, or ``None`` when no response arrived (connect
            error, timeout, reset); ``detail`` then says what happened.
        body: Raw response body (JSON from FE or BE).
        label: Transaction label, named in error messages.
        table: Target table if any, named in error messages.
        detail: Client-side description (exception text) when there is no response.

    Returns:
        A :class:`TxnResponse` on success, otherwise an unraised :class:`StarRocksError`
        (the caller raises it ``from`` the underlying cause).
    """
    ctx: dict[str, Any] = {"op": str(op), "label": label, "table": table}
    where = f"StarRocks {op} label={label}" + (f" table={table}" if table else "")

    if http_status is None:
        return ConnectionFailedError(f"{where}: no response ({detail}); will retry", **ctx)
    if http_status == 401:
        auth_data = _parse_body(body) or {}
        msg = _field(auth_data, "msg", "message") or "unauthorized"
        return AuthError(f"{where}: HTTP 401 {msg}: {_AUTH_ADVICE}", status="401", **ctx)

    data = _parse_body(body)
    if data is None:
        if http_status >= 500:
            return ServerBusyError(f"{where}: HTTP {http_status} without a JSON body", **ctx)
        if http_status == 404:
            return InvalidRequestError(
                f"{where}: HTTP 404: the FE does not serve this endpoint; load-url must "
                "point at the FE HTTP port of a StarRocks with the transaction API (2.4+; "
                "4.0+ for multi-table mode)",
                **ctx,
            )
        if 200 <= http_status < 300:
            return ServerBusyError(f"{where}: HTTP {http_status} with a non-JSON body", **ctx)
        return ProtocolError(f"{where}: unexpected HTTP {http_status}", **ctx)

    status = _field(data, "Status", "status").upper()
    message = _field(data, "Message", "message", "msg")
    error_url = _field(data, "ErrorURL", "tracking_url")
    ctx["status"] = status
    text = message.lower()
    said = f"{where}: {status} {message}".rstrip() + (
        f" (errors: {error_url})" if error_url else ""
    )

    if status in ("OK", "SUCCESS"):
        return TxnResponse(op=op, status=status, message=message, fields=data)

    # Text checks come first: the same condition arrives under several status codes
    # (e.g. "current running txns" as ANALYSIS_ERROR or FAILED, spec §3.3).
    if "current running txns on db" in text or "txn num per be exceeds limit" in text:
        return TooManyTransactionsError(f"{said}. {_TOO_MANY_ADVICE}", **ctx)
    if (
        "access denied" in text
        or "no valid basic authorization" in text
        or "need auth information" in text
    ):
        return AuthError(f"{said}. {_AUTH_ADVICE}", **ctx)
    # Only a text that says the filter ratio was exceeded, or that a table loaded no row, is a
    # data problem: a multi-table commit's "Failed to load table <t>" wraps any sub-task
    # failure (spec §3.3, S13). The sink loads no table without rows, so a table that loaded
    # none had every row filtered; StarRocks says so before it reads the filter ratio.
    if "too many filtered rows" in text or "max filter rate" in text or _no_rows_loaded(text):
        url = error_url or _tracking_url(message)
        return FilteredRowsError(f"{said}. {_FILTERED_ADVICE}", error_url=url, **ctx)
    if "failed to load table" in text:
        return TransactionAbortedError(
            f"{said}: a table's load failed at commit and the transaction was aborted; the "
            "batch is retried under a new label (if this repeats, check the BE logs)",
            **ctx,
        )
    if status == "PUBLISH_TIMEOUT" or "publish timeout" in text:
        return CommitOutcomeUnknownError(
            f"{said}: committed but not yet visible; the label state decides",
            maybe_committed=True,
            **ctx,
        )
    if "write lock timeout" in text or "already committing" in text or "during committing" in text:
        return CommitOutcomeUnknownError(f"{said}: outcome unknown, checking label state", **ctx)
    if ("can not abort" in text and ("committed" in text or "visible" in text)) or (
        "has already been commited" in text or "has already been committed" in text
    ):
        return TransactionCommittedError(f"{said}: the label is already committed", **ctx)
    if (
        status == "ABORTED"
        or "can not commit aborted" in text
        or "can not commit cancelled" in text
        or "has already been cancelled" in text
        or "is aborting" in text
        or "the load is timeout" in text
    ):
        return TransactionAbortedError(
            f"{said}: the transaction was aborted; the batch is retried under a new label "
            "(if this repeats, raise sink.transaction.timeout-s)",
            **ctx,
        )
    if ("database[" in text and "does not exist" in text) or "unknown database" in text:
        return UnknownDatabaseError(f"{said}: create the database or fix database-name", **ctx)
    if "failed to find table" in text or "unknown table" in text:
        return UnknownTableError(f"{said}: create the table or fix table-name", **ctx)
    if (
        status == "TXN_NOT_EXISTS"
        or "not exists" in text
        or "no transaction found" in text
        or "can't find the transaction" in text
        or "does not exist" in text
        or "doesnot exist" in text
    ):
        return TransactionNotFoundError(
            f"{said}: the server has no running transaction for this label (timed out or "
            "cleaned); if this repeats, raise sink.transaction.timeout-s",
            **ctx,
        )
    if "exceed the max size" in text or "exceed limit" in text:
        return DataTooLargeError(
            f"{said}. Lower sink.buffer-flush.max-bytes (or set sink.properties."
            "ignore_json_size=true)",
            **ctx,
        )
    if status == "LABEL_ALREADY_EXISTS":
        existing = _field(data, "ExistingJobStatus")
        return LabelAlreadyExistsError(
            f"{said} (existing: {existing or '?'}): another writer uses this label; run one "
            "query per checkpoint and a distinct sink.label-prefix per pipeline",
            existing_status=existing,
            **ctx,
        )
    if status == "TXN_IN_PROCESSING":
        return TxnInProcessingError(f"{said}; retrying", **ctx)
    if (
        status in ("INVALID_ARGUMENT", "ANALYSIS_ERROR", "NOT_IMPLEMENTED_ERROR")
        or "unsupported operation" in text
        or "not equal last" in text
        or "unknown transaction operation" in text
        or "hasn't send any data" in text
        or "no database selected" in text
    ):
        return InvalidRequestError(
            f"{said}: StarRocks rejected the request; check table schema, "
            "sink.properties.* and the server version",
            **ctx,
        )
    if (
        status
        in (
            "INTERNAL_ERROR",
            "SERVICE_UNAVAILABLE",
            "MEM_LIMIT_EXCEEDED",
            "TIMEOUT",
            "FAILED",
            "FAIL",
        )
        or http_status >= 500
    ):
        return ServerBusyError(f"{said}; retrying with backoff", **ctx)
    return ProtocolError(f"{said}: unexpected answer (HTTP {http_status})", **ctx)


def retry_in_place(op: TxnOp, error: StarRocksError) -> bool:
    """Whether the client may re-send the same request after ``error``.

    * TXN_IN_PROCESSING: the server did nothing, always safe (spec §6.3).
    * ``get_load_state``, ``commit``, ``rollback``: idempotent on the same label (a repeated
      commit of a committed label answers OK, spec §4.4), so any transient error.
    * ``begin``/``load``/``prepare``: a lost answer may hide a success, and a re-sent load would
      add its rows twice, so only errors where nothing was sent or applied; the sink handles
      the rest at the batch level.
    """
    if isinstance(error, TxnInProcessingError):
        return True
    if op in (TxnOp.GET_LOAD_STATE, TxnOp.COMMIT, TxnOp.ROLLBACK):
        return isinstance(error, ConnectionFailedError | ServerBusyError)
    return isinstance(error, ConnectionFailedError) and bool(error.context.get("not_sent"))
