"""Event codecs: JSON, plain Avro and the Confluent Schema Registry wire format.

Decoders run on Spark executors: :func:`make_decoder` builds one from a picklable
:class:`CodecSettings`, and decoders pickle back to ``make_decoder(settings)``.

Every way a record can fail to decode (bad JSON, not an object, missing or mistyped field,
bad magic byte, unknown schema id, truncated Avro, ``None`` value, trailing bytes) raises
:class:`DecodeError` with a reason: the assembler turns that into a rejection under the
``undecodable`` policy, never a crash. A schema registry that cannot be reached is different:
it says nothing about the record, so it raises the transient
:class:`SchemaRegistryUnavailableError` and the Spark task is retried.

Avro: the schema here is a flat record of strings, longs and ints (optionally nullable), for
which a small hand-written binary codec is several times faster than the pure-Python ``avro``
package (numbers in ``docs/assembler.md``). It is used whenever the writer schema has the same
canonical form as the reader schema; any other writer schema goes through ``avro``'s
``DatumReader`` with full schema resolution to the reader schema (``conf/events.avsc``).
Either way a decoded event holds what the reader schema says, checked like JSON: strings, and
integers within int/long range. A writer's logical type on a number field is never applied
(``avro`` would turn a ``timestamp-millis`` long into a ``datetime``): the raw number is kept
where it means the same (``timestamp-millis`` on ``source_ts_ms``), and refused where it does
not (``timestamp-micros``, ``date``, ...), see :func:`_without_logical_types`.
"""

from __future__ import annotations

import io
import json
import re
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import unquote

import avro.errors
import avro.io
import avro.schema
import orjson
import requests

from assembler.events import EVENT_SCHEMA_PATH, Event, event_schema_text, load_event_schema
from assembler.exceptions import AssemblerError
from common.errors import ConfigError, Terminal, Transient
from common.exact_json import exact_loads, exact_text

# "maxwell" is set by ``source.envelope: maxwell``, not through ``assembler.encoding``.
Encoding = Literal["json", "avro", "confluent", "maxwell"]
ENCODINGS: tuple[Encoding, ...] = ("json", "avro", "confluent")

_json_decode = json.JSONDecoder().decode
_EVENT_FIELDS: tuple[str, ...] = Event._fields
_CONFLUENT_MAGIC = 0
_CONFLUENT_HEADER = 5  # magic byte + 4-byte big-endian schema id
_INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


class DecodeError(AssemblerError):
    """A record cannot be decoded into an :class:`Event`; ``reason`` says why.

    Raised by decoders and handled by the assembler (``undecodable`` policy); it carries no
    coordinates because the decoder does not know them; the assembler adds them.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SkipRecord(AssemblerError):  # noqa: N818 - a signal, not a failure
    """A record that carries no row change (a Maxwell DDL or bootstrap marker): skipped."""


class SchemaRegistryUnavailableError(AssemblerError, Transient):
    """The schema registry did not answer (connection error, timeout, 5xx): retry later."""


class SchemaRegistryError(AssemblerError, Terminal):
    """The schema registry answered in a way retrying cannot fix (auth, bad response)."""


class Decoder(Protocol):
    """Turns one Kafka record value into an :class:`Event`."""

    def decode(self, value: bytes | None) -> Event:
        """Decode ``value``; raise :class:`DecodeError` (with a reason) when it cannot."""
        ...


@dataclass(frozen=True)
class CodecSettings:
    """How record values are encoded; picklable, shipped to executors.

    Attributes:
        encoding: ``json`` (UTF-8 object), ``avro`` (plain binary datum written with the
            schema file) or ``confluent`` (magic byte 0, 4-byte schema id, Avro datum).
        schema_path: the reader schema (``.avsc``); ``None`` = :data:`EVENT_SCHEMA_PATH`.
            For ``avro`` it is also the writer schema.
        registry_url: Confluent Schema Registry base URL (``confluent`` only).
        registry_schemas: schema id -> schema JSON text or path of an ``.avsc`` file, consulted
            before the registry (tests, offline runs, pinned schemas).
        registry_timeout_s: bound on each registry request (connect and read).
    """

    encoding: Encoding = "json"
    schema_path: str | None = None
    registry_url: str | None = None
    registry_schemas: Mapping[int, str] | None = None
    registry_timeout_s: float = 10.0


_USERINFO = re.compile(r"^([^:/?#]+://)?([^/?#]*)@")


def url_without_credentials(url: str) -> str:
    """``url`` with its user-info masked: ``http://user:pw@host`` -> ``http://***@host``.

    ``requests`` sends the user-info of ``registry-url`` as basic auth: they are credentials,
    and must not reach an error message, a log line or a Spark task failure.
    """
    return _USERINFO.sub(r"\1***@", url, count=1)


def _scrub(text: str, url: str) -> str:
    """``text`` (an exception's) with the user-info of ``url`` masked, as given or decoded."""
    m = _USERINFO.match(url)
    if m is None:
        return text
    for userinfo in {m.group(2), unquote(m.group(2))}:
        text = text.replace(f"{userinfo}@", "***@")
    return text


# --- schema helpers -------------------------------------------------------------------------


def _read_schema_text(path: str | None) -> str:
    p = Path(path) if path else EVENT_SCHEMA_PATH
    try:
        return event_schema_text(path)
    except OSError as e:
        msg = f"codec: cannot read schema file {p} ({e}); check schema-path"
        raise ConfigError(msg) from e


def _parse_schema(text: str, where: str) -> avro.schema.Schema:
    try:
        return avro.schema.parse(text)
    except (avro.errors.AvroException, ValueError) as e:
        msg = f"codec: invalid Avro schema from {where}: {e}; check schema-path"
        raise ConfigError(msg) from e


_STRING, _LONG = 0, 1
_Plan = tuple[tuple[str, int, int, str], ...]  # (name, kind, null branch or -1, avro type)


def _flat_plan(schema_json: Any) -> _Plan | None:
    """Field plan for a flat record of string/long/int (optionally ``["null", T]``) fields.

    Returns ``None`` for anything else, which then goes through the ``avro`` package.
    """
    if not isinstance(schema_json, dict) or schema_json.get("type") != "record":
        return None
    plan: list[tuple[str, int, int, str]] = []
    for f in schema_json.get("fields", []):
        t = f.get("type")
        null_idx = -1
        if isinstance(t, list):
            if len(t) != 2 or "null" not in t:
                return None
            null_idx = t.index("null")
            t = t[1 - null_idx]
        if t == "string":
            plan.append((f["name"], _STRING, null_idx, "string"))
        elif t in ("long", "int"):
            plan.append((f["name"], _LONG, null_idx, t))
        else:
            return None
    return tuple(plan)


def _read_long(buf: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint at ``pos``; raises IndexError when truncated."""
    b = buf[pos]
    pos += 1
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if shift > 70:
            msg = "varint longer than 10 bytes"
            raise DecodeError(msg)
    return (n >> 1) ^ -(n & 1), pos


def _write_long(out: bytearray, n: int) -> None:
    n = (n << 1) ^ (n >> 63)
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _event_from_mapping(names: tuple[str, ...], values: list[Any]) -> Event:
    """Build an Event from values in ``names`` order (fast path when the order is Event's)."""
    if names == _EVENT_FIELDS:
        return Event(*values)
    kwargs = {n: v for n, v in zip(names, values, strict=True) if n in _EVENT_FIELDS}
    return Event(**kwargs)


class _FlatAvroReader:
    """Hand-written reader for a flat writer schema identical to the reader schema."""

    def __init__(self, plan: _Plan) -> None:
        # A varint holds up to 70 bits: each number is checked against its field's Avro type,
        # as JSON's are (the state stores them as 64-bit; a bigger one would crash it there).
        self._plan = tuple(
            (kind, null_idx, *_INT_RANGE.get(t, (0, 0))) for _, kind, null_idx, t in plan
        )
        self._names = tuple(name for name, _, _, _ in plan)

    def read(self, buf: bytes, pos: int) -> Event:
        end = len(buf)
        values: list[Any] = []
        append = values.append
        try:
            for kind, null_idx, low, high in self._plan:
                if null_idx >= 0:
                    branch, pos = _read_long(buf, pos)
                    if branch == null_idx:
                        append(None)
                        continue
                    if branch != 1 - null_idx:
                        msg = f"invalid Avro union branch {branch}"
                        raise DecodeError(msg)
                if kind == _STRING:
                    length, pos = _read_long(buf, pos)
                    if length < 0 or pos + length > end:
                        msg = "truncated Avro datum (string runs past the end)"
                        raise DecodeError(msg)
                    append(buf[pos : pos + length].decode())
                    pos += length
                else:
                    v, pos = _read_long(buf, pos)
                    if not low <= v <= high:
                        msg = f"field {self._names[len(values)]!r} out of range: {v}"
                        raise DecodeError(msg)
                    append(v)
        except IndexError:
            msg = "truncated Avro datum"
            raise DecodeError(msg) from None
        except UnicodeDecodeError as e:
            msg = f"Avro string is not UTF-8: {e}"
            raise DecodeError(msg) from None
        if pos != end:
            msg = f"{end - pos} trailing bytes after the Avro datum"
            raise DecodeError(msg)
        return _event_from_mapping(self._names, values)


_Refused = tuple[tuple[int, str, str], ...]  # (index in Event, field, writer's logical type)
# Writer logical types whose raw number is what the reader's plain number field holds.
_RAW_LOGICAL_TYPES = {"source_ts_ms": frozenset({"timestamp-millis"})}


def _logical_types(schema_json: Any) -> dict[str, set[str]]:
    """Event field -> the logical types on its int/long branches (schema JSON)."""
    found: dict[str, set[str]] = {}
    fields = schema_json.get("fields") if isinstance(schema_json, dict) else None
    for f in fields if isinstance(fields, list) else ():
        if not isinstance(f, dict) or f.get("name") not in _EVENT_FIELDS:
            continue
        t = f.get("type")
        for branch in t if isinstance(t, list) else [t]:
            if (
                isinstance(branch, dict)
                and branch.get("type") in _INT_RANGE
                and "logicalType" in branch
            ):
                found.setdefault(f["name"], set()).add(str(branch["logicalType"]))
    return found


def _without_logical_types(writer_json: Any, reader_json: Any) -> tuple[Any, _Refused]:
    """The writer schema JSON without logical types on the event's numbers; the refused ones.

    ``avro`` applies the *writer's* logical type even when the reader schema says plain long:
    a ``timestamp-millis`` ``source_ts_ms`` would decode as a ``datetime``. Stripped, it decodes
    as the long that was written, which is the epoch milliseconds ``source_ts_ms`` holds. Any
    other logical type (``timestamp-micros``, ``date``, ...) is another unit or quantity: its
    values are refused (:class:`DecodeError`), not converted, unless the reader schema declares
    that logical type on the field too. Returns ``writer_json`` itself when nothing is stripped.
    """
    declared = _logical_types(writer_json)
    if not declared:
        return writer_json, ()
    accepted = _logical_types(reader_json)
    refused = tuple(
        (_EVENT_FIELDS.index(name), name, lt)
        for name, types in declared.items()
        for lt in sorted(types - accepted.get(name, set()) - _RAW_LOGICAL_TYPES.get(name, set()))
    )

    def plain(branch: Any) -> Any:  # the bare "long": its canonical form is the reader's
        number = isinstance(branch, dict) and branch.get("type") in _INT_RANGE
        return branch["type"] if number else branch

    stripped = json.loads(json.dumps(writer_json))
    for f in stripped["fields"]:
        if isinstance(f, dict) and f.get("name") in declared:
            t = f["type"]
            f["type"] = [plain(b) for b in t] if isinstance(t, list) else plain(t)
    return stripped, refused


_Check = tuple[int, str, type, bool, int, int]  # index, field, type, required, low, high
_WANTED = {
    "source_ts_ms": "epoch milliseconds: a long, plain or timestamp-millis",
    "event_count": "a count: a plain int",
}


def _event_checks(reader: avro.schema.Schema) -> tuple[_Check, ...]:
    """What each Event field of ``reader`` must hold after schema resolution.

    The Python type is the event's (``str``, or ``int`` for the packaged schema's numbers); a
    number's range is its Avro type in the reader schema when that is int or long, as for JSON.
    """
    packaged = {name: t for name, _, _, t in event_schema_plan() or ()}
    checks: list[_Check] = []
    for f in getattr(reader, "fields", []):
        if f.name not in _EVENT_FIELDS:
            continue
        branches = f.type.schemas if isinstance(f.type, avro.schema.UnionSchema) else [f.type]
        numbers = [b.type for b in branches if b.type in _INT_RANGE]
        event_type = packaged.get(f.name, "string")
        low, high = _INT_RANGE.get(numbers[0] if len(numbers) == 1 else event_type, (0, 0))
        typ = int if event_type in _INT_RANGE else str
        required = f.name not in Event._field_defaults
        checks.append((_EVENT_FIELDS.index(f.name), f.name, typ, required, low, high))
    return tuple(checks)


class _ResolvingAvroReader:
    """``avro`` package reader with schema resolution from a writer to the reader schema.

    ``writer`` must be free of logical types on the event's numbers (``_make_reader`` strips
    them); ``refused`` are the fields whose logical type made a value wrong data.
    """

    def __init__(
        self, writer: avro.schema.Schema, reader: avro.schema.Schema, refused: _Refused = ()
    ) -> None:
        self._datum_reader = avro.io.DatumReader(writer, reader)
        self._refused = refused
        self._checks = _event_checks(reader)

    def read(self, buf: bytes, pos: int) -> Event:
        stream = io.BytesIO(buf)
        stream.seek(pos)
        try:
            datum = self._datum_reader.read(avro.io.BinaryDecoder(stream))
        except avro.errors.SchemaResolutionException as e:
            msg = f"writer schema cannot be resolved to the event schema: {e}"
            raise DecodeError(msg) from None
        except (avro.errors.AvroException, struct.error, EOFError, IndexError, ValueError) as e:
            msg = f"invalid or truncated Avro datum: {type(e).__name__}: {e}"
            raise DecodeError(msg) from None
        if not isinstance(datum, dict):
            msg = "Avro datum is not a record"
            raise DecodeError(msg)
        rest = len(buf) - stream.tell()
        if rest:
            msg = f"{rest} trailing bytes after the Avro datum"
            raise DecodeError(msg)
        values: list[Any] = [datum.get(n) for n in _EVENT_FIELDS]
        for i, name, logical_type in self._refused:
            if values[i] is not None:
                msg = (
                    f"field {name!r} is a {logical_type} in the writer schema, which the event "
                    f"schema's {name!r} does not hold ({_WANTED.get(name, 'a plain number')}); "
                    "it is refused, not converted: fix the producer's schema"
                )
                raise DecodeError(msg)
        # Schema resolution can yield other types (a reader schema of doubles, defaults).
        for i, name, typ, required, low, high in self._checks:
            v = values[i]
            if v is None:
                if required:
                    msg = f"missing field {name!r}"
                    raise DecodeError(msg)
            elif type(v) is not typ:
                msg = f"field {name!r} must be {typ.__name__}, got {type(v).__name__}"
                raise DecodeError(msg)
            elif type(v) is int and not low <= v <= high:
                msg = f"field {name!r} out of range: {v}"
                raise DecodeError(msg)
        return Event(*values)


_Reader = _FlatAvroReader | _ResolvingAvroReader


def _make_reader(writer_text: str, reader: avro.schema.Schema, reader_json: Any) -> _Reader:
    """The reader of datums written with ``writer_text`` (raises AvroException, ValueError)."""
    writer = avro.schema.parse(writer_text)
    original = json.loads(writer_text)
    writer_json, refused = _without_logical_types(original, reader_json)
    if writer_json is not original:
        writer = avro.schema.parse(json.dumps(writer_json))
    # The canonical form leaves logical types out: a timestamp-millis writer reads flat too.
    if not refused and writer.canonical_form == reader.canonical_form:
        plan = _flat_plan(writer_json)
        if plan is not None:
            return _FlatAvroReader(plan)
    return _ResolvingAvroReader(writer, reader, refused)


def _check_reader_schema(schema: avro.schema.Schema, where: str) -> None:
    names = {f.name for f in getattr(schema, "fields", [])}  # a record schema has fields
    if not {"txn_id", "type"} <= names:
        msg = (
            f"codec: schema {where} is not an event record (needs txn_id and type fields); "
            "check schema-path"
        )
        raise ConfigError(msg)


# --- decoders -------------------------------------------------------------------------------


class JsonDecoder:
    """UTF-8 JSON object; field names and types from the reader schema."""

    def __init__(self, settings: CodecSettings) -> None:
        self._settings = settings
        where = settings.schema_path or str(EVENT_SCHEMA_PATH)
        text = _read_schema_text(settings.schema_path)
        _check_reader_schema(_parse_schema(text, where), where)
        plan = _flat_plan(json.loads(text))
        if plan is None:
            msg = (
                f"codec: the JSON codec needs a flat event schema (string/long/int fields, "
                f"optionally nullable), not {where}; check schema-path"
            )
            raise ConfigError(msg)
        self.plan: _Plan = plan
        self._names = tuple(name for name, _, _, _ in plan)
        self._spec: tuple[tuple[str, type, bool, tuple[int, int] | None], ...] = tuple(
            (name, str if kind == _STRING else int, null_idx >= 0, _INT_RANGE.get(t))
            for name, kind, null_idx, t in plan
        )
        self._bounded = tuple(
            (i, bounds) for i, (_, _, _, bounds) in enumerate(self._spec) if bounds is not None
        )
        # The field types of events that passed the checks: a record with the same types
        # needs only its bounds checked (a few patterns: which nullable fields are null).
        self._good_types: set[tuple[type, ...]] = set()

    def __reduce__(self) -> tuple[Any, ...]:
        return (make_decoder, (self._settings,))

    def decode(self, value: bytes | None) -> Event:
        """Decode one JSON object (see module docstring for the failure reasons)."""
        obj, raw = json_object(value)
        row = obj.get("row")
        if type(row) is dict:
            # CDC JSON usually carries the row as an object; the contract's form is its text.
            obj["row"] = row_text(row, raw)
        get = obj.get
        values = [get(name) for name in self._names]
        types = tuple(map(type, values))
        if types in self._good_types:
            for i, (low, high) in self._bounded:
                v = values[i]
                if v is not None and not low <= v <= high:
                    msg = f"field {self._names[i]!r} out of range: {v}"
                    raise DecodeError(msg)
            return _event_from_mapping(self._names, values)
        for v, (name, typ, nullable, bounds) in zip(values, self._spec, strict=True):
            if v is None:
                if not nullable:
                    msg = f"missing field {name!r}"
                    raise DecodeError(msg)
            elif type(v) is not typ:
                msg = f"field {name!r} must be {typ.__name__}, got {type(v).__name__}"
                raise DecodeError(msg)
            elif bounds is not None and not bounds[0] <= v <= bounds[1]:  # type: ignore[operator]  # v is int when bounds is set
                msg = f"field {name!r} out of range: {v}"
                raise DecodeError(msg)
        self._good_types.add(types)
        return _event_from_mapping(self._names, values)


def event_schema_plan() -> _Plan | None:
    """The field plan of the packaged event schema (``conf/events.avsc``)."""
    return _flat_plan(load_event_schema())


def json_object(value: bytes | None) -> tuple[dict[str, Any], bytes]:
    """One record's value as a JSON object, with its bytes; :class:`DecodeError` if it is not.

    orjson is stricter than the stdlib (NaN, lone surrogates): the stdlib decides, so that
    exactly the same records are accepted whatever the parser, and words the error.
    """
    if value is None:
        msg = "null record value (tombstone)"
        raise DecodeError(msg)
    try:
        obj = orjson.loads(value)
    except ValueError:
        try:
            obj = _json_decode(value.decode("utf-8"))
            # A \ud800 escape parses, but the string cannot be encoded again (Arrow, the
            # state buffer, the sink would each fail later, with no record to name).
            json.dumps(obj, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            msg = "invalid JSON: a lone UTF-16 surrogate escape (e.g. \\ud800)"
            raise DecodeError(msg) from None
        except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
            msg = f"invalid JSON: {e}"
            raise DecodeError(msg) from None
    if type(obj) is not dict:
        msg = f"JSON value is a {type(obj).__name__}, not an object"
        raise DecodeError(msg)
    return obj, value


def row_text(row: dict[str, Any], raw: bytes, key: str = "row") -> str:
    """The text of a row given as the JSON object ``raw[key]``, every number exactly as written.

    A float (a decimal point, or an integer beyond 64 bits) may have lost digits in the parse:
    such a row is read again from ``raw`` (``common.exact_json``).
    """
    return exact_text(row, lambda: exact_loads(raw)[key])


class AvroDecoder:
    """Plain Avro binary datum written with the schema file (no header)."""

    def __init__(self, settings: CodecSettings) -> None:
        self._settings = settings
        text = _read_schema_text(settings.schema_path)
        schema = _parse_schema(text, settings.schema_path or str(EVENT_SCHEMA_PATH))
        _check_reader_schema(schema, settings.schema_path or str(EVENT_SCHEMA_PATH))
        self._reader = _make_reader(text, schema, json.loads(text))

    def __reduce__(self) -> tuple[Any, ...]:
        return (make_decoder, (self._settings,))

    def decode(self, value: bytes | None) -> Event:
        """Decode one Avro datum."""
        if value is None:
            msg = "null record value (tombstone)"
            raise DecodeError(msg)
        return self._reader.read(value, 0)


class ConfluentDecoder:
    """Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro datum.

    Writer schemas come from ``registry_schemas`` first, then from the registry
    (``GET {url}/schemas/ids/{id}``), and are cached per id for the decoder's life. Schema ids
    are immutable in a registry, so the cache never needs invalidating. A 404 may be transient
    (a replica that has not seen a just-registered schema yet), so it is asked again after
    ``unknown_retry_delays_s`` before the record is rejected, and the "unknown" answer is kept
    only ``unknown_ttl_s`` (a flood of such records costs a few requests a minute, not one each).
    """

    unknown_retry_delays_s: tuple[float, ...] = (0.2, 0.5, 1.0, 2.0)
    unknown_ttl_s: float = 60.0

    def __init__(self, settings: CodecSettings) -> None:
        if not settings.registry_url and not settings.registry_schemas:
            msg = "codec: encoding=confluent needs registry-url (or registry_schemas)"
            raise ConfigError(msg)
        self._settings = settings
        where = settings.schema_path or str(EVENT_SCHEMA_PATH)
        text = _read_schema_text(settings.schema_path)
        self._reader_schema = _parse_schema(text, where)
        _check_reader_schema(self._reader_schema, where)
        self._reader_json = json.loads(text)
        self._readers: dict[int, _Reader] = {}
        # id -> (reason it is unknown, monotonic time until which that answer stands)
        self._unknown: dict[int, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._session: requests.Session | None = None
        self.registry_requests = 0
        """Number of HTTP requests made (observability and cache tests)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (make_decoder, (self._settings,))

    def decode(self, value: bytes | None) -> Event:
        """Decode one Confluent-framed Avro datum."""
        if value is None:
            msg = "null record value (tombstone)"
            raise DecodeError(msg)
        if len(value) < _CONFLUENT_HEADER or value[0] != _CONFLUENT_MAGIC:
            first = f"0x{value[0]:02x}" if value else "nothing"
            msg = (
                f"not Confluent wire format: magic byte {first}, {len(value)} bytes "
                "(expected 0x00 and a 4-byte schema id)"
            )
            raise DecodeError(msg)
        schema_id = int.from_bytes(value[1:_CONFLUENT_HEADER], "big")
        reader: _Reader | str | None = self._readers.get(schema_id)
        if reader is None:
            reader = self._load(schema_id)
        if isinstance(reader, str):
            raise DecodeError(reader)
        return reader.read(value, _CONFLUENT_HEADER)

    def _load(self, schema_id: int) -> _Reader | str:
        with self._lock:
            cached = self._readers.get(schema_id)
            if cached is not None:
                return cached
            unknown = self._unknown.get(schema_id)
            if unknown is not None and time.monotonic() < unknown[1]:
                return unknown[0]
            text = self._writer_schema_text(schema_id)
            for delay in self.unknown_retry_delays_s if text is None else ():
                time.sleep(delay)
                text = self._writer_schema_text(schema_id)
                if text is not None:
                    break
            if text is None:
                reason = f"unknown schema id {schema_id}"
                self._unknown[schema_id] = (reason, time.monotonic() + self.unknown_ttl_s)
                return reason
            try:
                reader = _make_reader(text, self._reader_schema, self._reader_json)
            except (avro.errors.AvroException, ValueError) as e:
                # The registry's answer for an id never changes: this one is final.
                reason = f"schema id {schema_id} is not a valid Avro schema: {e}"
                self._unknown[schema_id] = (reason, float("inf"))
                return reason
            self._readers[schema_id] = reader
            return reader

    def _writer_schema_text(self, schema_id: int) -> str | None:
        local = (self._settings.registry_schemas or {}).get(schema_id)
        if local is not None:
            if local.lstrip().startswith(("{", "[", '"')):
                return local
            try:
                return Path(local).read_text(encoding="utf-8")
            except OSError as e:
                msg = f"codec: cannot read the schema file {local} given for schema id {schema_id}"
                raise ConfigError(msg) from e
        if not self._settings.registry_url:
            return None
        return self._fetch(schema_id)

    def _fetch(self, schema_id: int) -> str | None:
        base = self._settings.registry_url.rstrip("/")  # type: ignore[union-attr]  # checked by the caller
        if self._session is None:
            self._session = requests.Session()
        self.registry_requests += 1
        # Messages name the URL without its credentials (user-info), as ``url``.
        url = f"{url_without_credentials(base)}/schemas/ids/{schema_id}"
        try:
            resp = self._session.get(
                f"{base}/schemas/ids/{schema_id}", timeout=self._settings.registry_timeout_s
            )
        except requests.RequestException as e:
            reason = _scrub(str(e), base)
            msg = (
                f"schema registry unreachable at {url}: {reason}; the task is retried, check "
                "registry-url and the registry's health"
            )
            # The cause's own text is printed with the traceback: dropped if it held them.
            raise SchemaRegistryUnavailableError(msg) from (e if reason == str(e) else None)
        if resp.status_code == 404:
            return None
        if resp.status_code >= 500 or resp.status_code == 429:
            msg = f"schema registry at {url} answered HTTP {resp.status_code}; retry later"
            raise SchemaRegistryUnavailableError(msg)
        if resp.status_code != 200:
            msg = (
                f"schema registry at {url} answered HTTP {resp.status_code}: "
                f"{resp.text[:200]}; check registry-url and its credentials"
            )
            raise SchemaRegistryError(msg)
        try:
            schema = resp.json()["schema"]
        except (ValueError, KeyError, TypeError) as e:
            msg = f"schema registry at {url} returned no 'schema' field: {resp.text[:200]}"
            raise SchemaRegistryError(msg) from e
        if not isinstance(schema, str):
            msg = f"schema registry at {url} returned a non-string 'schema'"
            raise SchemaRegistryError(msg)
        return schema


def make_decoder(settings: CodecSettings) -> Decoder:
    """Build the decoder for ``settings`` (call it where it runs: on the executor).

    Raises:
        ConfigError: unknown encoding, unreadable or invalid schema, missing registry.
    """
    if settings.encoding == "json":
        return JsonDecoder(settings)
    if settings.encoding == "avro":
        return AvroDecoder(settings)
    if settings.encoding == "confluent":
        return ConfluentDecoder(settings)
    if settings.encoding == "maxwell":
        from assembler.maxwell import MaxwellDecoder  # its own module, which imports this one

        return MaxwellDecoder()
    msg = f"encoding: unknown value {settings.encoding!r} (expected one of {', '.join(ENCODINGS)})"
    raise ConfigError(msg)


# --- encoding (demo generator, tests) ------------------------------------------------------


class _FlatAvroWriter:
    def __init__(self, plan: _Plan) -> None:
        self._plan = plan

    def write(self, event: Event, out: bytearray) -> None:
        for name, kind, null_idx, _ in self._plan:
            v = getattr(event, name, None)
            if null_idx >= 0:
                if v is None:
                    _write_long(out, null_idx)
                    continue
                _write_long(out, 1 - null_idx)
            elif v is None:
                msg = f"cannot encode event: field {name!r} is required"
                raise ValueError(msg)
            if kind == _STRING:
                b = str(v).encode()
                _write_long(out, len(b))
                out += b
            else:
                _write_long(out, int(v))


_default_writer: _FlatAvroWriter | None = None


def _writer() -> _FlatAvroWriter:
    global _default_writer  # lazily built, immutable once built
    if _default_writer is None:
        plan = _flat_plan(json.loads(_read_schema_text(None)))
        if plan is None:  # pragma: no cover -- guarded by a unit test on conf/events.avsc
            msg = "conf/events.avsc is no longer a flat record; update the Avro writer"
            raise AssemblerError(msg)
        _default_writer = _FlatAvroWriter(plan)
    return _default_writer


def event_to_json_text(event: Event) -> str:
    """Compact JSON of ``event``, schema field order, ``None`` fields left out."""
    obj: dict[str, Any] = {}
    for name in _EVENT_FIELDS:
        v = getattr(event, name)
        if v is not None:
            obj[name] = v
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def encode_event(event: Event, encoding: Encoding, *, schema_id: int = 1) -> bytes:
    """Encode ``event`` with the event schema (``conf/events.avsc``).

    ``json`` leaves ``None`` fields out; ``confluent`` frames the Avro datum with magic byte 0
    and ``schema_id`` (the id the schema has in the registry the consumer uses).
    """
    if encoding == "json":
        return event_to_json_text(event).encode()
    out = bytearray()
    if encoding == "confluent":
        out.append(_CONFLUENT_MAGIC)
        out += schema_id.to_bytes(4, "big")
    elif encoding != "avro":
        msg = f"unknown encoding {encoding!r} (expected one of {', '.join(ENCODINGS)})"
        raise ValueError(msg)
    _writer().write(event, out)
    return bytes(out)


def _check_event_matches_schema() -> None:
    """Fail at import if :class:`Event` and the schema drifted apart (positional fast path)."""
    names = tuple(f["name"] for f in json.loads(_read_schema_text(None))["fields"])
    if names != _EVENT_FIELDS:
        msg = f"Event fields {_EVENT_FIELDS} differ from {EVENT_SCHEMA_PATH} fields {names}"
        raise AssemblerError(msg)


_check_event_matches_schema()
