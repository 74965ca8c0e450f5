"""The demo's two tables as data: column names, keys, exact decimals and the row JSON.

Shared by the generator (which writes rows into events), the verifier (which reads them back
over SQL) and the tests (which replay events into :class:`Tables`). Money is
:class:`~decimal.Decimal` end to end; a binary float never touches an amount.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from demo.errors import DemoConfigError

ORDERS: Final = "orders"
ORDER_ITEMS: Final = "order_items"
TABLES: Final = (ORDERS, ORDER_ITEMS)

#: Primary key column of each table (single-column keys: DELETE events carry exactly this).
KEYS: Final[Mapping[str, str]] = {ORDERS: "order_id", ORDER_ITEMS: "item_id"}

ORDER_COLUMNS: Final = (
    "order_id",
    "customer_id",
    "item_count",
    "total_amount",
    "version",
    "order_status",
    "updated_ts_ms",
)
ITEM_COLUMNS: Final = (
    "item_id",
    "order_id",
    "product_name",
    "quantity",
    "price",
    "amount",
    "version",
)
COLUMNS: Final[Mapping[str, tuple[str, ...]]] = {ORDERS: ORDER_COLUMNS, ORDER_ITEMS: ITEM_COLUMNS}

#: Columns whose values are DECIMAL(p, 2) in the DDL.
DECIMAL_COLUMNS: Final = frozenset({"total_amount", "price", "amount"})

CENT: Final = Decimal("0.01")

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

Row = dict[str, Any]


def check_identifier(name: str, what: str = "database") -> str:
    """Return ``name`` if it is a plain SQL identifier, else raise.

    Identifiers are interpolated into SQL (they cannot be bound parameters), so only names made
    of letters, digits and underscores are accepted.
    """
    if not _IDENTIFIER.fullmatch(name):
        msg = f"invalid {what} name {name!r}: use letters, digits and '_' only"
        raise DemoConfigError(msg)
    return name


def to_decimal(value: object) -> Decimal:
    """Convert a value read from JSON or SQL to an exact :class:`Decimal`.

    Drivers return DECIMAL columns as ``Decimal``, ``str``, ``int`` or (an emulator on SQLite)
    ``float``; a float is converted through its shortest ``repr``, which is exact for the two
    decimal places the tables use.
    """
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        msg = f"not a decimal: {value!r}"
        raise TypeError(msg)
    if isinstance(value, int | str):
        try:
            return Decimal(value)
        except InvalidOperation as e:
            msg = f"not a decimal: {value!r}"
            raise TypeError(msg) from e
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, bytes):
        return to_decimal(value.decode())
    msg = f"not a decimal: {value!r}"
    raise TypeError(msg)


def to_int(value: object) -> int:
    """Convert an integer column value (``int``, ``str``, ``Decimal`` or integral float)."""
    if isinstance(value, bool):
        msg = f"not an integer: {value!r}"
        raise TypeError(msg)
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return int(value.decode())
    if isinstance(value, str):
        return int(value)
    if isinstance(value, float | Decimal) and value == int(value):
        return int(value)
    msg = f"not an integer: {value!r}"
    raise TypeError(msg)


def encode_row(row: Mapping[str, Any]) -> str:
    """Serialize a flat row as a JSON object, decimals as exact JSON numbers.

    ``json`` cannot write a ``Decimal``; writing its text as a JSON number keeps the exact
    value for any reader that parses numbers as decimals (StarRocks loading JSON into a DECIMAL
    column does), and a float parser still reads two-decimal values back to the same text.
    """
    parts = []
    for name, value in row.items():
        # Plain ints and None skip json.dumps: this runs for every event the generator sends.
        if value is None:
            text = "null"
        elif type(value) is int:
            text = str(value)
        elif isinstance(value, Decimal):
            text = format(value, "f")
        else:
            text = json.dumps(value)
        parts.append(f"{_json_key(name)}:{text}")
    return "{" + ",".join(parts) + "}"


@functools.cache
def _json_key(name: str) -> str:
    return json.dumps(name)


def decode_row(text: str) -> Row:
    """Parse a row JSON object, numbers with a fraction as :class:`Decimal`."""
    value = json.loads(text, parse_float=Decimal)
    if not isinstance(value, dict):
        msg = f"row is not a JSON object: {text[:80]!r}"
        raise ValueError(msg)
    return value


@dataclass
class Tables:
    """In-memory primary-key tables: the state a sink reaches by applying DATA events in order.

    An UPSERT replaces the whole row (every event carries the full after-image), a DELETE
    removes the row with the event's key; this is what a StarRocks primary-key table does with
    ``__op`` 0/1.
    """

    rows: dict[str, dict[int, Row]] = field(default_factory=lambda: {t: {} for t in TABLES})

    def apply(self, table: str, op: str, row: Mapping[str, Any]) -> None:
        """Apply one DATA event's row change."""
        if table not in self.rows:
            msg = f"unknown demo table {table!r}"
            raise ValueError(msg)
        key = to_int(row[KEYS[table]])
        if op == "DELETE":
            self.rows[table].pop(key, None)
        elif op == "UPSERT":
            self.rows[table][key] = dict(row)
        else:
            msg = f"unknown op {op!r}"
            raise ValueError(msg)

    @classmethod
    def from_rows(cls, tables: Mapping[str, Iterable[Mapping[str, Any]]]) -> Tables:
        """Build tables from row lists (as in a ground-truth file)."""
        result = cls()
        for table, rows in tables.items():
            for row in rows:
                result.apply(table, "UPSERT", row)
        return result
