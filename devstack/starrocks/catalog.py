"""Table schemas and the StarRocks ``CREATE TABLE`` subset the emulator understands.

The DDL parser is hand-written rather than sqlglot-based because StarRocks DDL (``ENGINE=OLAP``,
``DISTRIBUTED BY HASH``, ``PROPERTIES``, double-quoted DEFAULT/COMMENT strings) is outside what
generic dialects parse reliably; only the column list and the key clause matter for storage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from devstack.starrocks.coltypes import ColumnSpec, make_column
from devstack.starrocks.errors import SqlError

KEYS_PRIMARY = "PRIMARY"
KEYS_DUPLICATE = "DUPLICATE"


@dataclass(frozen=True)
class TableSchema:
    """A table: its columns in order, its key model and its key columns."""

    db: str
    name: str
    columns: tuple[ColumnSpec, ...]
    keys_type: str = KEYS_DUPLICATE
    key_columns: tuple[str, ...] = ()
    ddl: str = ""
    by_name: dict[str, ColumnSpec] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.by_name.update({c.name: c for c in self.columns})

    @property
    def sqlite_name(self) -> str:
        """The quoted SQLite identifier: one SQLite file holds every database as ``"db.t"``."""
        return quote_ident(f"{self.db}.{self.name}")

    @property
    def is_primary(self) -> bool:
        """True for PRIMARY KEY (and UNIQUE KEY) tables, where ``__op`` applies."""
        return self.keys_type == KEYS_PRIMARY

    def column(self, name: str) -> ColumnSpec | None:
        """Column by name; StarRocks column names are case-insensitive."""
        c = self.by_name.get(name)
        if c is not None:
            return c
        low = name.lower()
        for col in self.columns:
            if col.name.lower() == low:
                return col
        return None

    def to_json(self) -> dict[str, Any]:
        """Serialise for the catalog table."""
        return {
            "columns": [c.to_json() for c in self.columns],
            "keys_type": self.keys_type,
            "key_columns": list(self.key_columns),
            "ddl": self.ddl,
        }

    @classmethod
    def from_json(cls, db: str, name: str, d: dict[str, Any]) -> TableSchema:
        """Inverse of :meth:`to_json`."""
        return cls(
            db,
            name,
            tuple(ColumnSpec.from_json(c) for c in d["columns"]),
            d["keys_type"],
            tuple(d["key_columns"]),
            d.get("ddl", ""),
        )


def quote_ident(name: str) -> str:
    """Quote an identifier for SQLite."""
    return '"' + name.replace('"', '""') + '"'


def unquote(name: str) -> str:
    """Strip MySQL backticks (or double quotes) from an identifier."""
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "`\"'":
        return name[1:-1]
    return name


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses and quotes."""
    parts: list[str] = []
    depth = 0
    quote = ""
    cur: list[str] = []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    tail = "".join(cur).strip()
    if tail:
        parts.append(tail)
    return parts


def _matching_paren(text: str, start: int) -> int:
    depth = 0
    quote = ""
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    msg = "Unbalanced parentheses in CREATE TABLE"
    raise SqlError(msg)


_IDENT = r"(`[^`]+`|\"[^\"]+\"|[\w$]+)"
_CREATE_RE = re.compile(
    rf"^\s*CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?{_IDENT}(?:\s*\.\s*{_IDENT})?\s*\(",
    re.IGNORECASE | re.DOTALL,
)
_COL_RE = re.compile(
    rf"^{_IDENT}\s+(\w+(?:\s*\(\s*\d+\s*(?:,\s*\d+\s*)?\))?)(.*)$", re.IGNORECASE | re.DOTALL
)
_STR = r"(?:\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)')"


@dataclass(frozen=True)
class CreateTable:
    """A parsed ``CREATE TABLE``."""

    db: str | None
    name: str
    if_not_exists: bool
    columns: tuple[ColumnSpec, ...]
    keys_type: str
    key_columns: tuple[str, ...]


def parse_create_table(sql: str) -> CreateTable:
    """Parse the StarRocks ``CREATE TABLE`` subset (see module docstring).

    Raises:
        SqlError: the statement is not understood.
    """
    m = _CREATE_RE.match(sql)
    if not m:
        msg = "Syntax error in CREATE TABLE"
        raise SqlError(msg)
    if m.group(3):
        db, name = unquote(m.group(2)), unquote(m.group(3))
    else:
        db, name = None, unquote(m.group(2))
    open_at = m.end() - 1
    close_at = _matching_paren(sql, open_at)
    body, tail = sql[open_at + 1 : close_at], sql[close_at + 1 :]
    cols: list[ColumnSpec] = []
    inline_keys: list[str] = []
    for item in split_top_level(body):
        km = re.match(r"^(PRIMARY|UNIQUE)\s+KEY\s*\((.*)\)\s*$", item, re.I | re.S)
        if km:
            inline_keys = [unquote(k) for k in split_top_level(km.group(2))]
            continue
        if re.match(r"^(INDEX|KEY)\s", item, re.I):
            continue
        cols.append(_parse_column(item))
    if not cols:
        msg = "CREATE TABLE needs at least one column"
        raise SqlError(msg)
    keys_type, key_cols = KEYS_DUPLICATE, [cols[0].name]
    km = re.search(r"\b(PRIMARY|DUPLICATE|UNIQUE|AGGREGATE)\s+KEY\s*\(([^)]*)\)", tail, re.I)
    if km:
        kind = km.group(1).upper()
        keys_type = KEYS_PRIMARY if kind in ("PRIMARY", "UNIQUE") else KEYS_DUPLICATE
        key_cols = [unquote(k) for k in split_top_level(km.group(2))]
    elif inline_keys:
        keys_type, key_cols = KEYS_PRIMARY, inline_keys
    names = {c.name.lower() for c in cols}
    for k in key_cols:
        if k.lower() not in names:
            msg = f"Key column '{k}' doesn't exist in table {name}"
            raise SqlError(msg, 1064)
    if keys_type == KEYS_PRIMARY:
        keyset = {k.lower() for k in key_cols}
        cols = [
            ColumnSpec(**{**c.to_json(), "nullable": False, "is_key": True})
            if c.name.lower() in keyset
            else c
            for c in cols
        ]
    return CreateTable(db, name, bool(m.group(1)), tuple(cols), keys_type, tuple(key_cols))


def _parse_column(item: str) -> ColumnSpec:
    m = _COL_RE.match(item)
    if not m:
        msg = f"Cannot parse column definition: {item}"
        raise SqlError(msg)
    name, type_text, rest = unquote(m.group(1)), m.group(2), m.group(3)
    comment = ""
    cm = re.search(rf"\bCOMMENT\s+{_STR}", rest, re.I | re.S)
    if cm:
        comment = cm.group(1) if cm.group(1) is not None else cm.group(2)
        rest = rest[: cm.start()] + rest[cm.end() :]
    default: str | None = None
    dm = re.search(rf"\bDEFAULT\s+(?:{_STR}|(\w+(?:\(\))?)|(-?[\d.]+))", rest, re.I | re.S)
    if dm:
        default = next((g for g in dm.groups() if g is not None), None)
        if default is not None and default.upper() == "NULL":
            default = None
        rest = rest[: dm.start()] + rest[dm.end() :]
    nullable = not re.search(r"\bNOT\s+NULL\b", rest, re.I)
    try:
        return make_column(name, type_text, nullable=nullable, default=default, comment=comment)
    except ValueError as e:
        raise SqlError(str(e)) from e
