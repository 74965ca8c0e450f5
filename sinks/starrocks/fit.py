"""Values cut to a StarRocks column's size, which VARCHAR(n) counts in UTF-8 bytes.

One value too long fails the whole batch's load: a dead letter with a long transaction id or a
reason in a non-ASCII language did. The cuts never split a character.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

#: The dead-letter table's ``payload``: VARCHAR(1048576), StarRocks' longest string (a STRING
#: column holds 65,533 bytes). A longer payload is cut, and its reason says so: its record is
#: still in Kafka at the dead letter's offsets, and one value too long would fail the batch.
PAYLOAD_BYTES = 1_048_576
_CUT = f"[payload cut to {PAYLOAD_BYTES} of "


def fit_utf8(text: str | None, max_bytes: int) -> str | None:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes (driver side)."""
    if text is None:
        return None
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")


def fit_bytes_text(text: str | None, max_bytes: int) -> str | None:
    """:func:`fit_bytes` in Python, cut where it cuts (executor side, the same dead letters)."""
    if text is None:
        return None
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    cut = data[: max_bytes - 3].decode("utf-8", errors="replace")
    return cut[:-1] if cut.endswith("\ufffd") else cut


def fit_bytes(col: Column, max_bytes: int) -> Column:
    """``col`` cut to at most ``max_bytes`` UTF-8 bytes (a Spark expression).

    The cut keeps 3 bytes spare: a character split by it becomes one U+FFFD (3 bytes),
    dropped. ``make_valid_utf8`` makes it, not ``decode``: Spark 4's ``decode`` fails the
    query on a split character (``MALFORMED_CHARACTER_CODING``), a poison pill for the batch.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    head = F.substring(F.encode(col, "UTF-8"), 1, max_bytes - 3)
    cut = F.make_valid_utf8(head.cast("string"))
    return F.when(F.octet_length(col) > max_bytes, F.regexp_replace(cut, "\ufffd$", "")).otherwise(
        col
    )


def fit_payload(payload: str | None, reason: str | None) -> tuple[str | None, str | None]:
    """A dead letter's payload and reason, the payload cut to its column (executor side)."""
    if payload is None or len(payload) * 4 <= PAYLOAD_BYTES:
        return payload, reason
    length = len(payload.encode("utf-8"))
    if length <= PAYLOAD_BYTES:
        return payload, reason
    return fit_bytes_text(payload, PAYLOAD_BYTES), f"{_CUT}{length} bytes] {reason or ''}"


def fit_payload_col(payload: Column, reason: Column) -> tuple[Column, Column]:
    """:func:`fit_payload` as Spark expressions (the same cut and note)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    length = F.octet_length(payload)
    note = F.concat(
        F.lit(_CUT), length.cast("string"), F.lit(" bytes] "), F.coalesce(reason, F.lit(""))
    )
    return fit_bytes(payload, PAYLOAD_BYTES), F.when(length > PAYLOAD_BYTES, note).otherwise(reason)
