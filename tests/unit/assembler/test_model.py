"""Events, output and state: schema-derived names, the packaged schema copy, tuple layouts."""

from __future__ import annotations

import json
import pickle

import pytest

from assembler import (
    EVENT_SCHEMA_PATH,
    OUTPUT_FIELDS,
    STATE_FIELDS,
    Event,
    EventType,
    Op,
    OutputRow,
    PartitionState,
    event_field_names,
)
from assembler.buffer import buffered_size, decode, encode
from assembler.events import PACKAGED_SCHEMA_PATH
from assembler.output import output_ddl
from assembler.state import StateError, TxnStatus, state_ddl

pytestmark = pytest.mark.unit

ROOT = EVENT_SCHEMA_PATH.parents[1]


def test_packaged_schema_is_identical_to_conf() -> None:
    conf = ROOT / "conf" / "events.avsc"
    assert conf.is_file(), "run the unit tests from a checkout"
    assert PACKAGED_SCHEMA_PATH.read_bytes() == conf.read_bytes(), (
        "assembler/schema/events.avsc must be a copy of conf/events.avsc: "
        "cp conf/events.avsc assembler/schema/events.avsc"
    )
    assert conf == EVENT_SCHEMA_PATH


def test_event_fields_are_the_schema_fields() -> None:
    names = tuple(f["name"] for f in json.loads(EVENT_SCHEMA_PATH.read_text())["fields"])
    assert event_field_names() == names
    assert Event._fields == names


def test_enums() -> None:
    assert [e.value for e in EventType] == ["TXN_BEGIN", "DATA", "TXN_END"]
    assert [o.value for o in Op] == ["UPSERT", "DELETE"]
    assert EventType.DATA == "DATA"


def test_output_fields_order_and_row_layout() -> None:
    assert [n for n, _ in OUTPUT_FIELDS] == [
        "kind", "topic", "partition", "txn_id", "txn_seq", "row_seq", "database", "table",
        "op", "row", "is_txn_end", "first_offset", "last_offset", "source_ts_ms", "reason",
    ]  # fmt: skip
    assert dict(OUTPUT_FIELDS)["partition"] == "int"
    assert dict(OUTPUT_FIELDS)["txn_seq"] == "bigint"
    assert dict(OUTPUT_FIELDS)["is_txn_end"] == "boolean"
    assert list(OutputRow._fields) == [n for n, _ in OUTPUT_FIELDS]
    values = tuple(range(len(OUTPUT_FIELDS)))
    assert OutputRow(*values).as_tuple() == values  # type: ignore[arg-type]
    assert output_ddl().startswith("`kind` string, `topic` string, `partition` int")


def test_state_fields_are_scalars_only() -> None:
    allowed = {"string", "binary", "int", "bigint", "boolean", "double"}
    assert {t for _, t in STATE_FIELDS} <= allowed  # ARRAY/MAP crash the worker (DESIGN §7)
    assert "array" not in state_ddl().lower()
    assert "map" not in state_ddl().lower()


def test_state_round_trip_has_no_nulls() -> None:
    st = PartitionState("t", 3)
    t = st.to_tuple()
    assert len(t) == len(STATE_FIELDS)
    assert None not in t
    assert PartitionState.from_tuple(t) == st
    full = PartitionState("t", 3, 10, 4, TxnStatus.OPEN, "x", 8, 99, -5, 7, 1, 30, b"\x00\x01", "r")
    assert PartitionState.from_tuple(list(full.to_tuple())) == full
    assert PartitionState.from_tuple(pickle.loads(pickle.dumps(full.to_tuple()))) == full


def test_state_version_and_corruption_are_clear_errors() -> None:
    t = list(PartitionState("t", 0).to_tuple())
    with pytest.raises(StateError, match="incompatible release"):
        PartitionState.from_tuple([99, *t[1:]])
    with pytest.raises(StateError, match="incompatible release"):
        PartitionState.from_tuple(t[:-1])
    t[5] = "WEIRD"
    with pytest.raises(StateError, match="corrupt"):
        PartitionState.from_tuple(t)
    assert pickle.loads(pickle.dumps(StateError("x"))).args == ("x",)


def test_buffer_encoding() -> None:
    items = [(5, 0, "db", "t", "{}"), (2**40, 1, "d€", "tä", '{"a":"☃"}')]
    buf = encode(items)
    assert decode(buf) == items
    assert decode(encode(items[:1]) + encode(items[1:])) == items
    assert len(buf) == sum(buffered_size(d, t, r) for _, _, d, t, r in items)
    with pytest.raises(ValueError, match="truncated"):
        decode(buf[:-1])
    with pytest.raises(ValueError, match="truncated"):
        decode(buf[:3])


def test_no_spark_import_in_the_core() -> None:
    package = ROOT / "assembler"
    for path in package.rglob("*.py"):
        text = path.read_text()
        assert "import pyspark" not in text, path
        assert "from pyspark" not in text, path
