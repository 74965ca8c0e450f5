"""StarRocks column types: parsing, load-time conversion, SQLite storage and query output.

Storage choices (why): SQLite has no DECIMAL, no 128-bit integer and no DATE type, so
DECIMAL and LARGEINT are stored as canonical TEXT (exact, never a float), DATE/DATETIME as ISO
TEXT, BOOLEAN as 0/1, JSON as its compact text. Query output converts them back to the Python
types pymysql returns for a real StarRocks column (``Decimal``, ``date``, ``datetime``...).

Load conversion follows the strict-mode rule of the spec §5: a value that cannot be converted
becomes NULL when ``strict_mode`` is false and filters the row when it is true.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

BAD: Any = object()
"""Sentinel a converter returns when a value does not fit the column type."""

Converter = Callable[[Any], Any]

_INT_RANGES: dict[str, tuple[int, int]] = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "LARGEINT": (-(2**127), 2**127 - 1),
}
#: A STRING column holds at most this many bytes: StarRocks' STRING is VARCHAR(65533).
STRING_BYTES = 65533
_ALIASES = {"INTEGER": "INT", "BOOL": "BOOLEAN", "TEXT": "STRING", "REAL": "DOUBLE"}
SUPPORTED_TYPES = frozenset(
    [
        *_INT_RANGES,
        "BOOLEAN",
        "FLOAT",
        "DOUBLE",
        "DECIMAL",
        "VARCHAR",
        "CHAR",
        "STRING",
        "DATE",
        "DATETIME",
        "JSON",
    ]
)
_DESC_INT_WIDTH = {"TINYINT": 4, "SMALLINT": 6, "INT": 11, "BIGINT": 20, "LARGEINT": 40}
_DATE_RE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$")
_DATETIME_RE = re.compile(r"^(\d{4}-\d{1,2}-\d{1,2})[ T](\d{1,2}:\d{1,2}:\d{1,2})(\.\d{1,6})?$")


@dataclass(frozen=True)
class ColumnSpec:
    """One column of a table as declared by CREATE TABLE."""

    name: str
    type_name: str
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    nullable: bool = True
    default: str | None = None
    comment: str = ""
    is_key: bool = False

    @property
    def is_decimal(self) -> bool:
        """True when values are stored as exact decimal TEXT."""
        return self.type_name == "DECIMAL"

    @property
    def sqlite_type(self) -> str:
        """The declared SQLite type; its affinity keeps TEXT-stored values as text."""
        if self.type_name in _INT_RANGES and self.type_name != "LARGEINT":
            return "INTEGER"
        if self.type_name == "BOOLEAN":
            return "INTEGER"
        if self.type_name in ("FLOAT", "DOUBLE"):
            return "REAL"
        return "TEXT"

    def desc_type(self) -> str:
        """The type as ``DESC`` shows it on a real StarRocks."""
        t = self.type_name
        if t in _DESC_INT_WIDTH:
            return f"{t.lower()}({_DESC_INT_WIDTH[t]})"
        if t == "DECIMAL":
            return f"decimal({self.precision},{self.scale})"
        if t in ("VARCHAR", "CHAR"):
            return f"{t.lower()}({self.length})"
        if t == "STRING":
            return f"varchar({STRING_BYTES})"
        return t.lower()

    def to_json(self) -> dict[str, Any]:
        """Serialise for the catalog table."""
        return {
            "name": self.name,
            "type_name": self.type_name,
            "length": self.length,
            "precision": self.precision,
            "scale": self.scale,
            "nullable": self.nullable,
            "default": self.default,
            "comment": self.comment,
            "is_key": self.is_key,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ColumnSpec:
        """Inverse of :meth:`to_json`."""
        return cls(**d)


def make_column(
    name: str,
    type_text: str,
    *,
    nullable: bool = True,
    default: str | None = None,
    comment: str = "",
) -> ColumnSpec:
    """Build a column from a DDL type such as ``DECIMAL(18, 2)`` or ``varchar(64)``.

    Raises:
        ValueError: the type is not one the emulator supports.
    """
    m = re.fullmatch(r"\s*(\w+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*", type_text)
    if not m:
        msg = f"Unsupported column type: {type_text}"
        raise ValueError(msg)
    base = m.group(1).upper()
    base = _ALIASES.get(base, base)
    if base not in SUPPORTED_TYPES:
        msg = f"Unsupported column type: {type_text}"
        raise ValueError(msg)
    a1 = int(m.group(2)) if m.group(2) else None
    a2 = int(m.group(3)) if m.group(3) else None
    if base == "DECIMAL":
        return ColumnSpec(name, base, None, a1 or 10, a2 or 0, nullable, default, comment)
    if base in ("VARCHAR", "CHAR"):
        length = a1 if a1 is not None else (1 if base == "CHAR" else 65533)
        return ColumnSpec(name, base, length, None, None, nullable, default, comment)
    return ColumnSpec(name, base, None, None, None, nullable, default, comment)


# ---------------------------------------------------------------------------------------------
# Load-time conversion


def _to_int(lo: int, hi: int) -> Converter:
    def slow(v: Any) -> Any:
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, float):
            if not v.is_integer():
                return BAD
            v = int(v)
        elif isinstance(v, str):
            try:
                v = int(v.strip())
            except ValueError:
                return BAD
        elif not isinstance(v, int):
            return BAD
        return v if lo <= v <= hi else BAD

    def conv(v: Any) -> Any:
        if v.__class__ is int and lo <= v <= hi:
            return v
        if v is None:
            return None
        return slow(v)

    return conv


def _to_largeint(v: Any) -> Any:
    if v is None:
        return None
    r = _to_int(*_INT_RANGES["LARGEINT"])(v)
    return BAD if r is BAD else str(r)


def _to_float(v: Any) -> Any:
    if v.__class__ is float or v is None:
        return v
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return BAD
    return BAD


# Python's default context keeps 28 digits: a DECIMAL(38,18) value with more would fail to
# quantize and load as NULL, where StarRocks keeps 38 (76 in DECIMAL256).
_DECIMAL_CONTEXT = Context(prec=80)


def _to_decimal(precision: int, scale: int) -> Converter:
    quantum = Decimal(1).scaleb(-scale)
    max_int_digits = precision - scale

    def conv(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, bool):
            return BAD
        try:
            d = Decimal(v.strip()) if isinstance(v, str) else Decimal(str(v))
            q = d.quantize(quantum, rounding=ROUND_HALF_UP, context=_DECIMAL_CONTEXT)
        except (InvalidOperation, ValueError):
            return BAD
        if not q.is_finite() or (q.adjusted() + 1 > max_int_digits and q != 0):
            return BAD
        return str(q)

    return conv


def _to_string(max_bytes: int | None) -> Converter:
    def conv(v: Any) -> Any:
        if v.__class__ is not str:
            if v is None:
                return None
            if isinstance(v, bool):
                v = "true" if v else "false"
            elif isinstance(v, (dict, list)):
                v = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
            else:
                v = str(v)
        if max_bytes is not None and len(v) * 4 > max_bytes and len(v.encode()) > max_bytes:
            return BAD
        return v

    return conv


def _to_bool(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return 1 if v else 0
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "1"):
            return 1
        if s in ("false", "0"):
            return 0
    return BAD


def _to_date(v: Any) -> Any:
    if v.__class__ is str:
        # Fast path: the C ISO parser accepts the canonical form clients send.
        try:
            d = dt.date.fromisoformat(v)
        except ValueError:
            return _to_date_slow(v)
        return v if len(v) == 10 else d.isoformat()
    return None if v is None else BAD


def _to_date_slow(v: str) -> Any:
    s = v.strip()
    m = _DATETIME_RE.match(s)
    if m:
        s = m.group(1)
    if not _DATE_RE.match(s):
        return BAD
    try:
        return dt.date(*(int(p) for p in s.split("-"))).isoformat()
    except ValueError:
        return BAD


def _to_datetime(v: Any) -> Any:
    if v.__class__ is str:
        try:
            d = dt.datetime.fromisoformat(v)
        except ValueError:
            return _to_datetime_slow(v)
        if d.tzinfo is not None:
            return _to_datetime_slow(v)
        if len(v) == 19 and v[10] == " ":
            return v
        return d.isoformat(sep=" ")
    return None if v is None else BAD


def _to_datetime_slow(v: str) -> Any:
    s = v.strip()
    try:
        if _DATE_RE.match(s):
            day = _to_date_slow(s)
            if day is BAD:
                return BAD
            return dt.datetime.combine(dt.date.fromisoformat(day), dt.time()).isoformat(sep=" ")
        m = _DATETIME_RE.match(s)
        if not m:
            return BAD
        day = _to_date_slow(m.group(1))
        if day is BAD:
            return BAD
        d = dt.date.fromisoformat(day)
        hh, mm, ss = (int(p) for p in m.group(2).split(":"))
        us = int((m.group(3) or ".0")[1:].ljust(6, "0"))
        return dt.datetime(d.year, d.month, d.day, hh, mm, ss, us).isoformat(sep=" ")
    except (ValueError, TypeError):
        return BAD


def _to_json(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return json.dumps(v, ensure_ascii=False)
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def fast_check(col: ColumnSpec, name: str) -> tuple[str, dict[str, Any]] | None:
    """A Python expression over ``x`` that is True when ``x`` is already stored as-is.

    The load plan inlines it so well-typed values skip the converter call entirely; ``name``
    prefixes any helper the expression needs, returned in the namespace dict.
    """
    t = col.type_name
    if t in _INT_RANGES and t != "LARGEINT":
        lo, hi = _INT_RANGES[t]
        return f"x.__class__ is int and {lo} <= x <= {hi}", {}
    if t in ("FLOAT", "DOUBLE"):
        return "x.__class__ is float", {}
    if t in ("VARCHAR", "CHAR", "STRING"):
        # The limit is in bytes: an ASCII string has one byte per character, and no string of
        # at most limit/4 characters can exceed it (4 bytes per character at most in UTF-8).
        n = STRING_BYTES if t == "STRING" else col.length or 0
        return f"x.__class__ is str and (len(x) <= {n // 4} or (x.isascii() and len(x) <= {n}))", {}
    if t == "DECIMAL":
        p, sc = col.precision or 10, col.scale or 0
        frac = rf"\.\d{{{sc}}}" if sc else ""
        canonical = re.compile(rf"-?(?:0|[1-9]\d{{0,{max(p - sc - 1, 0)}}}){frac}").fullmatch
        return f"x.__class__ is str and {name}(x) is not None", {name: canonical}
    return None


def converter(col: ColumnSpec) -> Converter:
    """Return the load-time converter for ``col`` (``BAD`` marks an unconvertible value)."""
    t = col.type_name
    if t == "LARGEINT":
        return _to_largeint
    if t in _INT_RANGES:
        return _to_int(*_INT_RANGES[t])
    if t in ("FLOAT", "DOUBLE"):
        return _to_float
    if t == "DECIMAL":
        return _to_decimal(col.precision or 10, col.scale or 0)
    if t in ("VARCHAR", "CHAR"):
        return _to_string(col.length)
    if t == "STRING":
        return _to_string(STRING_BYTES)
    if t == "BOOLEAN":
        return _to_bool
    if t == "DATE":
        return _to_date
    if t == "DATETIME":
        return _to_datetime
    return _to_json


def default_value(col: ColumnSpec) -> Any:
    """The stored value a missing field gets (the DEFAULT, converted), or None."""
    if col.default is None:
        return None
    if col.default.upper() in ("CURRENT_TIMESTAMP", "NOW()"):
        return dt.datetime.now().replace(microsecond=0).isoformat(sep=" ")
    v = converter(col)(col.default)
    return None if v is BAD else v


# ---------------------------------------------------------------------------------------------
# Query output


def output_value(col: ColumnSpec, v: Any) -> Any:
    """Convert a stored value back to what pymysql returns for the real column type."""
    if v is None:
        return None
    t = col.type_name
    try:
        if t == "DECIMAL":
            return Decimal(str(v))
        if t == "LARGEINT":
            return int(v)
        if t == "DATE":
            return dt.date.fromisoformat(str(v))
        if t == "DATETIME":
            return dt.datetime.fromisoformat(str(v))
    except (ValueError, InvalidOperation):
        return v
    return v
