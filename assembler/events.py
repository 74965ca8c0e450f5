"""The CDC event model (DESIGN.md §3), derived from ``conf/events.avsc``.

The ``.avsc`` file is the single source of truth for field names: codecs read names from
:func:`event_field_names` and a unit test checks that :class:`Event` declares the same fields
in the same order.
"""

from __future__ import annotations

import functools
import json
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from common.exact_json import refuse_constant

_PACKAGE_DIR = Path(__file__).resolve().parent


def _locate_schema() -> Path:
    """Prefer the checkout's ``conf/events.avsc``; fall back to the packaged copy.

    A checkout is recognised by ``pyproject.toml`` next to ``conf/`` so that an installed
    package never picks up an unrelated ``conf/`` directory from ``site-packages``.
    """
    root = _PACKAGE_DIR.parent
    in_checkout = root / "conf" / "events.avsc"
    if in_checkout.is_file() and (root / "pyproject.toml").is_file():
        return in_checkout
    return _PACKAGE_DIR / "schema" / "events.avsc"


EVENT_SCHEMA_PATH: Path = _locate_schema()
"""Path of the event schema (reader schema of every Avro decoder)."""

PACKAGED_SCHEMA_PATH: Path = _PACKAGE_DIR / "schema" / "events.avsc"
"""The copy shipped as package data (kept identical to ``conf/events.avsc`` by a test)."""


class EventType(str, Enum):  # noqa: UP042 -- the fixed API says (str, Enum); str() stays "EventType.X"
    """The event types the state machine knows; anything else is an unknown type."""

    TXN_BEGIN = "TXN_BEGIN"
    DATA = "DATA"
    TXN_END = "TXN_END"


class Op(str, Enum):  # noqa: UP042 -- the fixed API says (str, Enum)
    """Row operation of a DATA event; a missing op means UPSERT."""

    UPSERT = "UPSERT"
    DELETE = "DELETE"


class Event(NamedTuple):
    """One decoded CDC event; field names and order as in ``conf/events.avsc``.

    ``type`` is the raw string so that an unknown type is representable and goes through the
    ``unknown-type`` policy instead of failing the decode.
    """

    txn_id: str
    type: str
    database: str | None = None
    table: str | None = None
    op: str | None = None
    row: str | None = None
    source_ts_ms: int | None = None
    event_count: int | None = None


def event_schema_text(path: str | None = None) -> str:
    """The schema text: ``path``, else :data:`EVENT_SCHEMA_PATH`, else the packaged copy.

    Executors may import this package from a zip (``spark-submit --py-files``), where no
    file path exists: the packaged copy is then read through ``importlib.resources``.
    """
    if path:
        return Path(path).read_text(encoding="utf-8")
    if EVENT_SCHEMA_PATH.is_file():
        return EVENT_SCHEMA_PATH.read_text(encoding="utf-8")
    return resources.files("assembler.schema").joinpath("events.avsc").read_text("utf-8")


@functools.cache
def load_event_schema(path: str | None = None) -> dict[str, Any]:
    """Return the parsed schema JSON (``path`` defaults to :data:`EVENT_SCHEMA_PATH`)."""
    text = event_schema_text(path)
    schema: dict[str, Any] = json.loads(text)
    return schema


def event_field_names() -> tuple[str, ...]:
    """Field names of the event record, in schema order, read from the ``.avsc``."""
    return tuple(str(f["name"]) for f in load_event_schema()["fields"])


_MAX_NAME_BYTES = 0xFFFF  # database/table lengths are stored as 16-bit in the state buffer
_VALID_OPS = (None, Op.UPSERT.value, Op.DELETE.value)
_DATA = EventType.DATA.value
#: Event types of Maxwell rows (``assembler.maxwell``; only ``source.envelope: maxwell`` accepts
#: them): a row opens its transaction if none is open; the commit row also completes it.
MAXWELL_ROW = "MAXWELL_ROW"
MAXWELL_COMMIT = "MAXWELL_COMMIT"
_ROW_TYPES = frozenset({_DATA, MAXWELL_ROW, MAXWELL_COMMIT})


def _row_problem(row: str) -> str | None:
    """Why ``row`` cannot be loaded as one StarRocks row, or ``None``.

    Checked here, not at the sink: a row StarRocks cannot take would otherwise fail the whole
    micro-batch on every replay (a poison pill), while here it rejects its own transaction.
    """
    try:
        value = orjson.loads(row)
    except ValueError:
        # orjson refuses lone surrogates and integers beyond 64 bits; the stdlib decides, but a
        # lone surrogate still cannot travel as UTF-8 to StarRocks, nor NaN or Infinity, which
        # its strict parser (simdjson) refuses: the batch would fail on every replay.
        try:
            value = json.loads(row, parse_constant=refuse_constant)
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            return "DATA row holds a lone UTF-16 surrogate escape (e.g. \\ud800): not valid Unicode"
        except (ValueError, RecursionError) as e:
            return f"DATA row is not valid JSON: {e}"
    if type(value) is not dict:
        return f"DATA row must be a JSON object, got {type(value).__name__}"
    return None


def event_problem(event: Event) -> str | None:
    """Return why ``event`` is semantically invalid, or ``None`` when it is usable.

    Type errors are the codecs' job; this checks what every codec (and a custom decoder)
    must agree on: a non-empty ``txn_id``, and for DATA a target table, a row and a known op.
    The type itself is not checked here: an unknown type has its own policy.
    """
    if not event.txn_id:
        return "empty txn_id"
    if event.type not in _ROW_TYPES:
        return None
    database, table = event.database, event.table
    if not database or not table:
        return "DATA event without database/table"
    if event.row is None:
        return "DATA event without row"
    row_problem = _row_problem(event.row)
    if row_problem is not None:
        return row_problem
    if event.op not in _VALID_OPS:
        return f"DATA event with unknown op {event.op!r} (expected UPSERT or DELETE)"
    # 4 bytes per character at most: only long names need the exact (costly) UTF-8 length.
    if (len(database) > _MAX_NAME_BYTES // 4 and len(database.encode()) > _MAX_NAME_BYTES) or (
        len(table) > _MAX_NAME_BYTES // 4 and len(table.encode()) > _MAX_NAME_BYTES
    ):
        return "database/table name longer than 65535 bytes"
    return None
