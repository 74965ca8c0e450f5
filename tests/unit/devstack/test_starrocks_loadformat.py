"""Unit tests of the emulator's pure parts: DDL parsing, type conversion, load plans."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devstack.starrocks.catalog import TableSchema, parse_create_table
from devstack.starrocks.coltypes import BAD, converter, make_column
from devstack.starrocks.errors import SqlError
from devstack.starrocks.loadformat import LoadPlan, LoadPlanError
from devstack.starrocks.storage import OP_DELETE, OP_UPSERT

pytestmark = pytest.mark.unit


def _schema(ddl: str) -> TableSchema:
    ct = parse_create_table(ddl)
    return TableSchema("d", ct.name, ct.columns, ct.keys_type, ct.key_columns, ddl)


PK = _schema(
    'CREATE TABLE d.t (`id` BIGINT NOT NULL COMMENT "k, with comma", v VARCHAR(8) DEFAULT "dv",'
    " amt DECIMAL(10,2), ts DATETIME) ENGINE=OLAP PRIMARY KEY(id) DISTRIBUTED BY HASH(id)"
    ' BUCKETS 1 PROPERTIES("replication_num" = "1")'
)


def test_parse_create_table() -> None:
    assert [c.name for c in PK.columns] == ["id", "v", "amt", "ts"]
    assert PK.is_primary
    assert PK.key_columns == ("id",)
    assert PK.columns[0].comment == "k, with comma"
    assert not PK.columns[0].nullable
    assert PK.columns[1].default == "dv"
    dup = parse_create_table("CREATE TABLE t (a INT, b STRING) DUPLICATE KEY(a)")
    assert dup.keys_type == "DUPLICATE"
    assert dup.db is None
    with pytest.raises(SqlError):
        parse_create_table("CREATE TABLE t (a INT) PRIMARY KEY(nope)")


@pytest.mark.parametrize(
    ("type_text", "value", "expected"),
    [
        ("TINYINT", 127, 127),
        ("TINYINT", 128, BAD),
        ("INT", "42", 42),
        ("INT", 1.5, BAD),
        ("BIGINT", True, 1),
        ("LARGEINT", 2**100, str(2**100)),
        ("DECIMAL(5,2)", "1.005", "1.01"),
        ("DECIMAL(5,2)", 1000, BAD),
        ("DECIMAL(5,2)", "abc", BAD),
        ("VARCHAR(3)", "abcd", BAD),
        ("VARCHAR(3)", 12, "12"),
        ("BOOLEAN", "true", 1),
        ("DATE", "2024-02-30", BAD),
        ("DATE", "2024-2-3", "2024-02-03"),
        ("DATETIME", "2024-01-02T03:04:05", "2024-01-02 03:04:05"),
        ("DATETIME", "2024-01-02", "2024-01-02 00:00:00"),
        ("JSON", {"a": 1}, '{"a":1}'),
        ("DOUBLE", "1e3", 1000.0),
        # More than the 28 digits of Python's default decimal context.
        ("DECIMAL(38,18)", "1234567890123.5", "1234567890123.500000000000000000"),
        ("DECIMAL(38,18)", "-12345678901234567890.1", "-12345678901234567890.100000000000000000"),
        ("DECIMAL(38,18)", "123456789012345678901", BAD),
    ],
)
def test_converters(type_text: str, value: object, expected: object) -> None:
    assert converter(make_column("c", type_text))(value) == expected or (
        expected is BAD and converter(make_column("c", type_text))(value) is BAD
    )


def test_json_plan_ops_defaults_and_filtering() -> None:
    plan = LoadPlan(PK, {"format": "json", "strip_outer_array": "true"})
    body = json.dumps(
        [
            {"id": 1, "v": "a", "amt": "1.5", "__op": 0},
            {"id": 1, "__op": 1},
            {"id": 2},
            {"id": None},
            {"id": 3, "v": "toolongvalue"},
            {"id": 4, "__op": "bogus"},
            [1, 2],
        ]
    ).encode()
    res = plan.parse(body)
    assert res.total == 7
    assert res.filtered == 4
    assert res.rows == [
        (OP_UPSERT, (1, "a", "1.50", None)),
        (OP_DELETE, (1, "dv", None, None)),
        (OP_UPSERT, (2, "dv", None, None)),
    ]


def test_plan_errors() -> None:
    with pytest.raises(LoadPlanError) as ei:
        LoadPlan(PK, {"format": "parquet"})
    assert ei.value.status == "INVALID_ARGUMENT"
    with pytest.raises(LoadPlanError) as ei:
        LoadPlan(PK, {"format": "csv", "columns": "v, amt"})  # id is NOT NULL, no default
    assert ei.value.status == "ANALYSIS_ERROR"
    with pytest.raises(LoadPlanError):
        LoadPlan(PK, {"format": "csv", "strict_mode": "maybe"})


def test_csv_plan() -> None:
    plan = LoadPlan(PK, {"format": "csv", "column_separator": ",", "row_delimiter": "\\n"})
    res = plan.parse(b"1,a,2.5,2024-01-01 00:00:00\n2,\\N,\\N,\\N\n3,short\n")
    assert res.rows == [
        (OP_UPSERT, (1, "a", "2.50", "2024-01-01 00:00:00")),
        (OP_UPSERT, (2, None, None, None)),
    ]
    assert res.filtered == 1


def test_json_keys_match_columns_case_insensitively() -> None:
    """Audit finding 9: StarRocks column names are case-insensitive, JSON keys included."""
    plan = LoadPlan(PK, {"format": "json", "strip_outer_array": "true"})
    res = plan.parse(json.dumps([{"ID": 7, "V": "x", "Amt": "2"}, {"id": 8}]).encode())
    assert res.filtered == 0
    assert res.rows == [(OP_UPSERT, (7, "x", "2.00", None)), (OP_UPSERT, (8, "dv", None, None))]


_BODIES = [
    b'[{"id":123456789012345678901}]',  # beyond 64 bits: orjson would read a double
    b'[{"id":-9223372036854775809}]',
    b'[{"id":1,"id":2}]',
    b"[NaN]",
    b'["\\ud800"]',
    b"\xef\xbb\xbf[1]",
    '[{"v":"é"}]'.encode("utf-16"),
    b"[1e400]",
    b"[00]",
    b'{"a":1}x',
    b"[1.7976931348623157e308, 5e-324, -0.0, 0.1]",
]


@pytest.mark.parametrize("body", _BODIES)
def test_the_fast_body_parser_reads_what_the_stdlib_reads(body: bytes) -> None:
    from devstack.starrocks.loadformat import _loads

    def parsed(loads: object) -> str:
        try:
            return repr(loads(body))  # type: ignore[operator]
        except ValueError as e:
            return f"{type(e).__name__}: {e}"

    assert parsed(_loads) == parsed(json.loads)


_NUMBER = r"-?(0|[1-9][0-9]{0,23})(\.[0-9]{1,24})?([eE][-+]?[0-9]{1,3})?"


@settings(max_examples=300, deadline=None)
@given(st.from_regex(_NUMBER, fullmatch=True))
def test_the_fast_body_parser_reads_every_number_as_the_stdlib(number: str) -> None:
    from devstack.starrocks.loadformat import _loads

    body = f"[{number}]".encode()
    assert repr(_loads(body)) == repr(json.loads(body))
