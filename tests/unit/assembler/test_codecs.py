"""Codecs: JSON, plain Avro, Confluent wire format (local schema map and an HTTP registry)."""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler import CodecSettings, DecodeError, Event, encode_event, make_decoder
from assembler.codecs import (
    ConfluentDecoder,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
    _FlatAvroReader,
    _ResolvingAvroReader,
)
from assembler.events import EVENT_SCHEMA_PATH, event_problem
from common.errors import ConfigError, Transient

pytestmark = pytest.mark.unit

SCHEMA_TEXT = EVENT_SCHEMA_PATH.read_text()
EVENTS = [
    Event("t1", "TXN_BEGIN", source_ts_ms=1_700_000_000_000),
    Event("t1", "DATA", "shop", "orders", "UPSERT", '{"id": 1, "name": "Zoë"}', -5, None),
    Event("t1", "DATA", "shop", "orders", None, "{}"),
    Event("t1", "TXN_END", event_count=2**31 - 1),
    Event("t-☃", "WHATEVER"),
]
ENCODINGS = ("json", "avro", "confluent")


def local(encoding: str, **kw: Any) -> CodecSettings:
    return CodecSettings(encoding=encoding, registry_schemas={1: SCHEMA_TEXT}, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("event", EVENTS, ids=lambda e: f"{e.type}")
def test_round_trip(encoding: str, event: Event) -> None:
    value = encode_event(event, encoding)  # type: ignore[arg-type]
    assert make_decoder(local(encoding)).decode(value) == event


text_or_none = st.none() | st.text(max_size=30)
long_or_none = st.none() | st.integers(-(2**63), 2**63 - 1)
events = st.builds(
    Event,
    txn_id=st.text(max_size=20),
    type=st.text(max_size=10),
    database=text_or_none,
    table=text_or_none,
    op=text_or_none,
    row=text_or_none,
    source_ts_ms=long_or_none,
    event_count=st.none() | st.integers(-(2**31), 2**31 - 1),
)


@settings(max_examples=150, deadline=None)
@given(events)
def test_round_trip_any_event_and_fast_avro_equals_avro_package(event: Event) -> None:
    for encoding in ENCODINGS:
        value = encode_event(event, encoding)  # type: ignore[arg-type]
        assert make_decoder(local(encoding)).decode(value) == event
    import avro.schema

    schema = avro.schema.parse(SCHEMA_TEXT)
    datum = encode_event(event, "avro")
    assert _ResolvingAvroReader(schema, schema).read(datum, 0) == event


def test_field_names_come_from_the_schema() -> None:
    value = encode_event(EVENTS[1], "json")
    assert list(json.loads(value)) == [f["name"] for f in json.loads(SCHEMA_TEXT)["fields"]][:7]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "null record value"),
        (b"{nope", "invalid JSON"),
        (b"\xff\xfe", "invalid JSON"),
        (b"[1, 2]", "not an object"),
        (b'"txn"', "not an object"),
        (b'{"type": "DATA"}', "missing field 'txn_id'"),
        (b'{"txn_id": "a"}', "missing field 'type'"),
        (b'{"txn_id": 1, "type": "DATA"}', "'txn_id' must be str"),
        (b'{"txn_id": "a", "type": "DATA", "row": [1]}', "'row' must be str"),
        (b'{"txn_id": "a", "type": "TXN_END", "event_count": "3"}', "'event_count' must be int"),
        (b'{"txn_id": "a", "type": "TXN_END", "event_count": true}', "'event_count' must be int"),
        (b'{"txn_id": "a", "type": "X", "source_ts_ms": 1.5}', "'source_ts_ms' must be int"),
        (b'{"txn_id": "a", "type": "X", "event_count": 4294967296}', "out of range"),
    ],
)
def test_json_decode_errors(value: bytes | None, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        make_decoder(CodecSettings()).decode(value)
    assert reason in info.value.reason


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b'{"txn_id": "a", "type": "TXN_END", "event_count": 4294967296}', "out of range"),
        (b'{"txn_id": "a", "type": "TXN_END", "event_count": -2147483649}', "out of range"),
        (b'{"txn_id": "a", "type": "TXN_END", "event_count": "3"}', "'event_count' must be int"),
        (b'{"txn_id": "a", "type": "TXN_END", "event_count": true}', "'event_count' must be int"),
        (b'{"txn_id": "a", "type": "TXN_END"}', None),
    ],
)
def test_a_decoder_that_saw_good_events_still_checks_every_field(
    value: bytes, reason: str | None
) -> None:
    """Events whose field types it has accepted before are checked again, bounds included."""
    decoder = make_decoder(CodecSettings())
    for good in (
        b'{"txn_id": "a", "type": "TXN_END", "event_count": 3}',
        b'{"txn_id": "a", "type": "TXN_END", "event_count": 3, "source_ts_ms": 2}',
    ):
        assert decoder.decode(good).event_count == 3
    if reason is None:
        assert decoder.decode(value).event_count is None
        return
    with pytest.raises(DecodeError) as info:
        decoder.decode(value)
    assert reason in info.value.reason


def test_json_ignores_unknown_fields_and_accepts_explicit_nulls() -> None:
    value = b'{"txn_id": "a", "type": "TXN_BEGIN", "extra": [1], "row": null}'
    assert make_decoder(CodecSettings()).decode(value) == Event("a", "TXN_BEGIN")


@pytest.mark.parametrize("encoding", ["avro", "confluent"])
def test_avro_decode_errors(encoding: str) -> None:
    dec = make_decoder(local(encoding))
    good = encode_event(EVENTS[1], encoding)  # type: ignore[arg-type]
    header = 5 if encoding == "confluent" else 0
    for cut in range(header, len(good)):
        with pytest.raises(DecodeError):
            dec.decode(good[:cut])
    with pytest.raises(DecodeError, match="trailing"):
        dec.decode(good + b"\x00")
    with pytest.raises(DecodeError, match="null record value"):
        dec.decode(None)
    with pytest.raises(DecodeError, match="union branch"):
        # txn_id "t1" (3 bytes) and type "DATA" (5 bytes), then the union branch of database
        dec.decode(good[: header + 8] + b"\x08" + good[header + 9 :])


def test_confluent_framing_errors() -> None:
    dec = make_decoder(local("confluent"))
    good = encode_event(EVENTS[0], "confluent", schema_id=1)
    with pytest.raises(DecodeError, match="magic byte 0x01"):
        dec.decode(b"\x01" + good[1:])
    with pytest.raises(DecodeError, match="magic byte nothing"):
        dec.decode(b"")
    with pytest.raises(DecodeError, match="unknown schema id 7"):
        dec.decode(encode_event(EVENTS[0], "confluent", schema_id=7))
    with pytest.raises(DecodeError, match="magic byte 0x7b"):
        dec.decode(encode_event(EVENTS[0], "json"))


WRITER_V2 = {  # another field order, one extra field, event_count missing (reader default null)
    "type": "record",
    "name": "CdcEvent",
    "namespace": "io.txncdc",
    "fields": [
        {"name": "type", "type": "string"},
        {"name": "txn_id", "type": "string"},
        {"name": "producer", "type": "string"},
        {"name": "row", "type": ["null", "string"], "default": None},
    ],
}


def encode_v2(txn_id: str, type_: str, row: str | None, schema_id: int) -> bytes:
    import io

    import avro.io
    import avro.schema

    buf = io.BytesIO()
    buf.write(b"\x00" + schema_id.to_bytes(4, "big"))
    writer = avro.io.DatumWriter(avro.schema.parse(json.dumps(WRITER_V2)))
    writer.write(
        {"type": type_, "txn_id": txn_id, "producer": "p1", "row": row},
        avro.io.BinaryEncoder(buf),
    )
    return buf.getvalue()


def test_confluent_resolves_another_writer_schema_to_the_reader_schema(tmp_path: Path) -> None:
    path = tmp_path / "v2.avsc"
    path.write_text(json.dumps(WRITER_V2))
    dec = make_decoder(
        CodecSettings(encoding="confluent", registry_schemas={1: SCHEMA_TEXT, 2: str(path)})
    )
    assert dec.decode(encode_v2("a", "DATA", "{}", 2)) == Event("a", "DATA", row="{}")
    assert dec.decode(encode_event(EVENTS[0], "confluent")) == EVENTS[0]
    readers = dec._readers  # type: ignore[attr-defined]
    assert isinstance(readers[1], _FlatAvroReader)
    assert isinstance(readers[2], _ResolvingAvroReader)
    with pytest.raises(DecodeError):
        dec.decode(encode_v2("a", "DATA", "{}", 2)[:-1])


def test_confluent_incompatible_writer_schema_is_a_decode_error() -> None:
    bad = {"type": "record", "name": "CdcEvent", "namespace": "io.txncdc", "fields": []}
    dec = make_decoder(CodecSettings(encoding="confluent", registry_schemas={3: json.dumps(bad)}))
    with pytest.raises(DecodeError, match="cannot be resolved"):
        dec.decode(b"\x00\x00\x00\x00\x03")
    dec = make_decoder(CodecSettings(encoding="confluent", registry_schemas={4: "{broken"}))
    with pytest.raises(DecodeError, match="schema id 4 is not a valid Avro schema"):
        dec.decode(b"\x00\x00\x00\x00\x04")


# -- an HTTP schema registry ----------------------------------------------------------------


class Registry:
    """A tiny schema registry: ``GET /schemas/ids/{id}`` like Confluent's."""

    def __init__(self, schemas: dict[int, str]) -> None:
        self.schemas = schemas
        self.requests: list[str] = []
        self.status_override: int | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(self.path)
                sid = self.path.rsplit("/", 1)[-1]
                if outer.status_override is not None:
                    self.send_response(outer.status_override)
                    self.end_headers()
                    self.wfile.write(b'{"error_code": 50001, "message": "boom"}')
                    return
                if not self.path.startswith("/schemas/ids/") or int(sid) not in outer.schemas:
                    body = json.dumps({"error_code": 40403, "message": "Schema not found"})
                    self.send_response(404)
                else:
                    body = json.dumps({"schema": outer.schemas[int(sid)]})
                    self.send_response(200)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def registry() -> Iterator[Registry]:
    reg = Registry({1: SCHEMA_TEXT, 2: json.dumps(WRITER_V2)})
    yield reg
    reg.close()


@pytest.fixture
def quick_unknown_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ConfluentDecoder, "unknown_retry_delays_s", (0.01, 0.01))


def test_registry_fetch_and_cache(registry: Registry, quick_unknown_retries: None) -> None:
    dec = make_decoder(CodecSettings(encoding="confluent", registry_url=registry.url + "/"))
    for _ in range(3):
        for e in EVENTS:
            assert dec.decode(encode_event(e, "confluent", schema_id=1)) == e
        assert dec.decode(encode_v2("b", "TXN_END", None, 2)) == Event("b", "TXN_END")
        with pytest.raises(DecodeError, match="unknown schema id 9"):
            dec.decode(encode_event(EVENTS[0], "confluent", schema_id=9))
    # id 9: asked three times (a 404 may be a replica lagging), then "unknown" is cached.
    assert registry.requests == ["/schemas/ids/1", "/schemas/ids/2"] + ["/schemas/ids/9"] * 3
    assert dec.registry_requests == 5  # type: ignore[attr-defined]


def test_a_schema_registered_a_moment_late_is_not_a_rejection(
    registry: Registry, quick_unknown_retries: None
) -> None:
    dec = make_decoder(CodecSettings(encoding="confluent", registry_url=registry.url))
    value = encode_event(EVENTS[0], "confluent", schema_id=5)
    original = registry.server.RequestHandlerClass.do_GET  # type: ignore[attr-defined]

    def lagging(handler: Any) -> None:
        if len(registry.requests) == 1:
            registry.schemas[5] = SCHEMA_TEXT  # the replica catches up after the first 404
        original(handler)

    registry.server.RequestHandlerClass.do_GET = lagging  # type: ignore[attr-defined]
    assert dec.decode(value) == EVENTS[0]
    assert registry.requests == ["/schemas/ids/5", "/schemas/ids/5"]


def test_unknown_ids_are_asked_again_after_the_ttl(
    registry: Registry, quick_unknown_retries: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ConfluentDecoder, "unknown_ttl_s", 0.0)
    dec = make_decoder(CodecSettings(encoding="confluent", registry_url=registry.url))
    value = encode_event(EVENTS[0], "confluent", schema_id=6)
    with pytest.raises(DecodeError, match="unknown schema id 6"):
        dec.decode(value)
    registry.schemas[6] = SCHEMA_TEXT
    assert dec.decode(value) == EVENTS[0]


def test_local_schemas_take_precedence_over_the_registry(registry: Registry) -> None:
    dec = make_decoder(
        CodecSettings(
            encoding="confluent", registry_url=registry.url, registry_schemas={1: SCHEMA_TEXT}
        )
    )
    assert dec.decode(encode_event(EVENTS[0], "confluent")) == EVENTS[0]
    assert registry.requests == []


def test_registry_server_errors_are_transient_not_rejections(registry: Registry) -> None:
    dec = make_decoder(CodecSettings(encoding="confluent", registry_url=registry.url))
    registry.status_override = 503
    with pytest.raises(SchemaRegistryUnavailableError) as info:
        dec.decode(encode_event(EVENTS[0], "confluent"))
    assert isinstance(info.value, Transient)
    registry.status_override = 401
    with pytest.raises(SchemaRegistryError, match="HTTP 401"):
        dec.decode(encode_event(EVENTS[0], "confluent"))
    registry.status_override = None  # nothing was cached: the next try succeeds
    assert dec.decode(encode_event(EVENTS[0], "confluent")) == EVENTS[0]


def test_unreachable_registry_is_transient_and_bounded() -> None:
    reg = Registry({})
    url = reg.url
    reg.close()  # nothing listens there any more
    dec = make_decoder(
        CodecSettings(encoding="confluent", registry_url=url, registry_timeout_s=2.0)
    )
    with pytest.raises(SchemaRegistryUnavailableError, match="unreachable"):
        dec.decode(encode_event(EVENTS[0], "confluent"))


def test_registry_credentials_stay_out_of_every_message(registry: Registry) -> None:
    """registry-url's user-info is how the registry's credentials are given (basic auth)."""
    secret_url = registry.url.replace("http://", "http://svc-user:s3cr%40t@")
    dec = make_decoder(CodecSettings(encoding="confluent", registry_url=secret_url))
    messages, causes = [], []
    for status in (401, 503):
        registry.status_override = status
        with pytest.raises((SchemaRegistryError, SchemaRegistryUnavailableError)) as info:
            dec.decode(encode_event(EVENTS[0], "confluent"))
        messages.append(str(info.value))
    registry.status_override = None
    assert dec.decode(encode_event(EVENTS[0], "confluent")) == EVENTS[0]  # the URL still works
    reg = Registry({})
    reg.close()  # nothing listens there any more
    # Refused; a scheme requests has no adapter for (its message prints the whole URL).
    for url in (reg.url, reg.url.replace("http:", "ftp:")):
        dec = make_decoder(
            CodecSettings(encoding="confluent", registry_url=url.replace("//", "//u:s3cr%40t@", 1))
        )
        with pytest.raises(SchemaRegistryUnavailableError, match="unreachable") as info:
            dec.decode(encode_event(EVENTS[0], "confluent"))
        messages.append(str(info.value))
        causes.append(str(info.value.__cause__))  # printed with the traceback
    for m in messages:
        assert "//***@127.0.0.1:" in m
    for m in messages + causes:
        assert "s3cr" not in m
        assert "svc-user" not in m


# -- construction --------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_decoders_pickle_to_their_settings(encoding: str) -> None:
    dec = make_decoder(local(encoding))
    value = encode_event(EVENTS[1], encoding)  # type: ignore[arg-type]
    dec.decode(value)
    assert pickle.loads(pickle.dumps(dec)).decode(value) == EVENTS[1]
    assert pickle.loads(pickle.dumps(local(encoding))) == local(encoding)


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="registry-url"):
        make_decoder(CodecSettings(encoding="confluent"))
    with pytest.raises(ConfigError, match="encoding"):
        make_decoder(CodecSettings(encoding="xml"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="schema-path"):
        make_decoder(CodecSettings(encoding="avro", schema_path="/nonexistent.avsc"))
    with pytest.raises(ValueError, match="encoding"):
        encode_event(EVENTS[0], "xml")  # type: ignore[arg-type]


def test_custom_schema_path_is_used(tmp_path: Path) -> None:
    path = tmp_path / "e.avsc"
    path.write_text(SCHEMA_TEXT)
    dec = make_decoder(CodecSettings(encoding="avro", schema_path=str(path)))
    assert dec.decode(encode_event(EVENTS[1], "avro")) == EVENTS[1]


# --- real CDC JSON shapes and poison pills (row as an object, lone surrogates) ---


def _json(**fields: Any) -> bytes:
    return json.dumps(
        {"txn_id": "t", "type": "DATA", "database": "d", "table": "x", **fields}
    ).encode()


def test_row_as_a_nested_object_becomes_its_compact_text() -> None:
    decoder = make_decoder(CodecSettings())
    event = decoder.decode(
        _json(op="UPSERT", row={"id": 1, "name": "Zoë", "tags": [1, {"a": None}]})
    )
    assert event.row is not None
    assert json.loads(event.row) == {"id": 1, "name": "Zoë", "tags": [1, {"a": None}]}
    assert event.row == '{"id":1,"name":"Zoë","tags":[1,{"a":null}]}'
    assert event_problem(event) is None


def test_row_object_keeps_every_decimal_digit_and_big_integers() -> None:
    raw = (
        b'{"txn_id":"t","type":"DATA","database":"d","table":"x","op":"UPSERT",'
        b'"row":{"amount":12345678901234567.890123456789,"small":0.10,'
        b'"big":123456789012345678901234567890}}'
    )
    event = make_decoder(CodecSettings()).decode(raw)
    assert event.row == (
        '{"amount":12345678901234567.890123456789,"small":0.10,'
        '"big":123456789012345678901234567890}'
    )


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ("[1, 2]", "must be a JSON object, got list"),
        ("42", "must be a JSON object, got int"),
        ('"text"', "must be a JSON object, got str"),
        ("{not json", "not valid JSON"),
        ('{"a": "\\ud800"}', "lone UTF-16 surrogate"),
        # Python writes float('nan') so; StarRocks' strict parser (simdjson) refuses it, which
        # failed the batch on every replay (review 12-08).
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": [1, -Infinity]}', "-Infinity is not a JSON number"),
    ],
)
def test_rows_starrocks_cannot_take_are_invalid_events(row: str, why: str) -> None:
    event = make_decoder(CodecSettings()).decode(_json(op="UPSERT", row=row))
    problem = event_problem(event)
    assert problem is not None
    assert why in problem


def test_a_row_object_holding_nan_is_an_invalid_event() -> None:
    raw = b'{"txn_id":"t","type":"DATA","database":"d","table":"x","op":"UPSERT","row":{"v":NaN}}'
    problem = event_problem(make_decoder(CodecSettings()).decode(raw))
    assert problem is not None
    assert "NaN is not a JSON number" in problem


@pytest.mark.parametrize("row", [[1, 2], 42, True])
def test_row_that_is_neither_object_nor_string_is_undecodable(row: Any) -> None:
    with pytest.raises(DecodeError, match="field 'row' must be str"):
        make_decoder(CodecSettings()).decode(_json(op="UPSERT", row=row))


def test_lone_surrogate_in_an_event_field_is_undecodable() -> None:
    raw = b'{"txn_id": "t\\ud800", "type": "TXN_BEGIN"}'
    with pytest.raises(DecodeError, match="lone UTF-16 surrogate"):
        make_decoder(CodecSettings()).decode(raw)


# --- Avro: a writer's logical types, numbers beyond their type (found by review) ---


def _with_type(schema: dict[str, Any], field: str, typ: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(schema))
    for f in out["fields"]:
        if f["name"] == field:
            f["type"] = typ
    return out


def _confluent(writer: dict[str, Any], schema_id: int = 7, **fields: Any) -> bytes:
    """A datum written with ``writer``: numbers as given (no logical type applied)."""
    import io

    import avro.io
    import avro.schema

    plain = json.loads(json.dumps(writer).replace('"logicalType"', '"ignored"'))
    buf = io.BytesIO(b"\x00" + schema_id.to_bytes(4, "big"))
    buf.seek(0, 2)
    datum = dict.fromkeys(Event._fields) | fields
    avro.io.DatumWriter(avro.schema.parse(json.dumps(plain))).write(
        datum, avro.io.BinaryEncoder(buf)
    )
    return buf.getvalue()


TS_MS = 1_704_067_200_123
EVENT_SCHEMA = json.loads(SCHEMA_TEXT)
MILLIS = {"type": "long", "logicalType": "timestamp-millis", "connect.version": 1}
V2_ORDER = dict(EVENT_SCHEMA, fields=list(reversed(EVENT_SCHEMA["fields"])))  # resolving reader


@pytest.mark.parametrize("base", [EVENT_SCHEMA, V2_ORDER], ids=["flat", "resolving"])
def test_a_timestamp_millis_writer_field_decodes_to_its_epoch_millis(base: dict[str, Any]) -> None:
    """The ``avro`` package applies the writer's logical type (a datetime, which crashed the
    slot's state write on every replay); the reader schema says long: the long is kept."""
    writer = _with_type(base, "source_ts_ms", ["null", MILLIS])
    dec = make_decoder(
        CodecSettings(encoding="confluent", registry_schemas={7: json.dumps(writer)})
    )
    ev = dec.decode(_confluent(writer, txn_id="t", type="TXN_BEGIN", source_ts_ms=TS_MS))
    assert ev == Event("t", "TXN_BEGIN", source_ts_ms=TS_MS)
    assert type(ev.source_ts_ms) is int
    reader = dec._readers[7]  # type: ignore[attr-defined]
    assert isinstance(reader, _FlatAvroReader if base is EVENT_SCHEMA else _ResolvingAvroReader)


@pytest.mark.parametrize("base", [EVENT_SCHEMA, V2_ORDER], ids=["flat", "resolving"])
@pytest.mark.parametrize(
    ("field", "typ"),
    [
        ("source_ts_ms", {"type": "long", "logicalType": "timestamp-micros"}),
        ("source_ts_ms", {"type": "long", "logicalType": "local-timestamp-millis"}),
        ("event_count", {"type": "int", "logicalType": "date"}),
        ("event_count", {"type": "int", "logicalType": "time-millis"}),
    ],
)
@pytest.mark.filterwarnings("ignore::avro.errors.IgnoredLogicalType")
def test_a_writer_logical_type_of_another_unit_is_refused_not_converted(
    base: dict[str, Any], field: str, typ: dict[str, Any]
) -> None:
    """A micros value in the millis field would be wrong data, a date no count: undecodable."""
    writer = _with_type(base, field, ["null", typ])
    dec = make_decoder(
        CodecSettings(encoding="confluent", registry_schemas={7: json.dumps(writer)})
    )
    with pytest.raises(DecodeError, match=f"{field!r} is a {typ['logicalType']} in the writer"):
        dec.decode(_confluent(writer, txn_id="t", type="TXN_END", **{field: 12_345}))
    # Without a value the field says nothing wrong.
    assert dec.decode(_confluent(writer, txn_id="t", type="TXN_END")) == Event("t", "TXN_END")


def test_a_logical_type_the_reader_schema_declares_too_is_accepted(tmp_path: Path) -> None:
    schema = _with_type(
        EVENT_SCHEMA, "source_ts_ms", ["null", {"type": "long", "logicalType": "timestamp-micros"}]
    )
    path = tmp_path / "micros.avsc"
    path.write_text(json.dumps(schema))
    value = _confluent(schema, txn_id="t", type="TXN_BEGIN", source_ts_ms=TS_MS * 1000)
    dec = make_decoder(CodecSettings(encoding="avro", schema_path=str(path)))
    assert dec.decode(value[5:]).source_ts_ms == TS_MS * 1000


_LONG_2_63 = bytes([0x80] * 9 + [0x02])  # a 10-byte varint of 2**63 (zigzag): beyond a long
_INT_2_40 = bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x40])  # 2**40 (zigzag): a long, not an int


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        # The flat layout after txn_id "t1", type "TXN_END" and four null strings:
        # source_ts_ms (union branch, varint), event_count (union branch, varint).
        (b"\x02" + _LONG_2_63 + b"\x00", "'source_ts_ms' out of range: 9223372036854775808"),
        (b"\x00\x02" + _INT_2_40, "'event_count' out of range: 1099511627776"),
        (b"\x00\x02\x80\x80\x80\x80\x10", "'event_count' out of range: 2147483648"),
    ],
)
@pytest.mark.parametrize("encoding", ["avro", "confluent"])
def test_an_avro_number_beyond_its_type_is_undecodable(
    encoding: str, tail: bytes, reason: str
) -> None:
    """As in JSON; accepted, it crashed the slot's state write (struct.error) on every replay."""
    body = b"\x04t1\x0eTXN_END\x00\x00\x00\x00" + tail
    value = body if encoding == "avro" else b"\x00\x00\x00\x00\x01" + body
    with pytest.raises(DecodeError, match=reason):
        make_decoder(local(encoding)).decode(value)


def test_the_resolving_reader_checks_number_ranges_too() -> None:
    writer = json.dumps(V2_ORDER)  # event_count, source_ts_ms, row, op, table, database, ...
    dec = make_decoder(CodecSettings(encoding="confluent", registry_schemas={7: writer}))
    body = b"\x02" + _INT_2_40 + b"\x00\x00\x00\x00\x00" + b"\x0eTXN_END\x04t1"
    with pytest.raises(DecodeError, match="'event_count' out of range: 1099511627776"):
        dec.decode(b"\x00\x00\x00\x00\x07" + body)
    assert isinstance(dec._readers[7], _ResolvingAvroReader)  # type: ignore[attr-defined]


def test_the_resolving_reader_checks_the_event_field_types(tmp_path: Path) -> None:
    """A schema (schema-path) of other types decodes to them: undecodable, not a crash."""
    import io

    import avro.io
    import avro.schema

    schema = _with_type(EVENT_SCHEMA, "source_ts_ms", ["null", "double"])
    path = tmp_path / "doubles.avsc"
    path.write_text(json.dumps(schema))
    buf = io.BytesIO()
    datum = dict.fromkeys(Event._fields) | {"txn_id": "t", "type": "X", "source_ts_ms": 1.5}
    avro.io.DatumWriter(avro.schema.parse(json.dumps(schema))).write(
        datum, avro.io.BinaryEncoder(buf)
    )
    dec = make_decoder(CodecSettings(encoding="avro", schema_path=str(path)))
    with pytest.raises(DecodeError, match="'source_ts_ms' must be int, got float"):
        dec.decode(buf.getvalue())
