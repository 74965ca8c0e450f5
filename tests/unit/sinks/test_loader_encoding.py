import json

import pytest

from sinks.starrocks.errors import InvalidRequestError
from sinks.starrocks.loader import TableReport, encode_row, parse_reports, progress_body

pytestmark = pytest.mark.unit


def test_upsert_and_delete_get_op_codes():
    assert json.loads(encode_row("UPSERT", '{"id": 1, "v": "ü"}', "w")) == {
        "id": 1,
        "v": "ü",
        "__op": 0,
    }
    assert json.loads(encode_row("DELETE", '{"id": 1}', "w")) == {"id": 1, "__op": 1}
    assert json.loads(encode_row(None, '{"id": 1}', "w"))["__op"] == 0


def test_encoded_rows_are_utf8_json():
    assert "ü".encode() in encode_row("UPSERT", '{"v": "ü"}', "w")


@pytest.mark.parametrize(
    ("op", "row"),
    [
        ("MERGE", "{}"),
        ("UPSERT", "[1]"),
        ("UPSERT", "{bad"),
        ("UPSERT", None),
        ("UPSERT", '{"s": "\ud800"}'),  # a lone surrogate: no UTF-8 form to send
        ("UPSERT", '{"p": NaN}'),  # not JSON to StarRocks' strict parser
        ("UPSERT", '{"p": [Infinity]}'),
    ],
)
def test_bad_rows_are_terminal_and_name_where(op, row):
    with pytest.raises(InvalidRequestError, match="table=orders topic=t partition=3 txn_id=x"):
        encode_row(op, row, "table=orders topic=t partition=3 txn_id=x")


def test_progress_body_is_an_upsert_array():
    rows = json.loads(progress_body([{"pipeline": "p", "topic": "t", "kafka_partition": 0}]))
    assert rows == [{"pipeline": "p", "topic": "t", "kafka_partition": 0, "__op": 0}]


def test_report_round_trip():
    report = TableReport("orders", rows=3, bytes=40, requests=1)
    assert parse_reports([report.as_dict()]) == [report.typed()]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("{}", {"__op": 1}),
        ('  \n{"id": 2}  ', {"id": 2, "__op": 1}),
        ('{"id": 3, "__op": 0}', {"id": 3, "__op": 1}),  # the row's own __op never wins
        ('{"big": 123456789012345678901234567890}', {"big": 123456789012345678901234567890}),
    ],
)
def test_rows_are_spliced_not_reserialised(row, expected):
    encoded = encode_row("DELETE", row, "w")
    decoded = json.loads(encoded)
    assert decoded == {**expected, "__op": 1}
    assert decoded["__op"] == 1
    # Exactly one __op key in the text, so StarRocks cannot pick the row's own.
    assert encoded.count(b'"__op"') == 1


def test_where_is_built_only_on_error():
    calls = []

    def where() -> str:
        calls.append(1)
        return "table=t topic=x partition=1 txn_id=y"

    encode_row("UPSERT", '{"id": 1}', where)
    assert calls == []
    with pytest.raises(InvalidRequestError, match="partition=1 txn_id=y"):
        encode_row("UPSERT", "[]", where)
    assert calls == [1]


def test_target_stats_merge_per_partition_and_table():
    from sinks.base import TargetStats, merge_target_stats

    a = TargetStats("t", 0, "db", "x", 2, 10, "t10", "t05")
    b = TargetStats("t", 0, "db", "x", 3, 14, "t14", "t02")
    c = TargetStats("t", 1, "db", "x", 1, 4, "t4", "t4")
    assert sorted(merge_target_stats([a, b, c]), key=repr) == sorted(
        [TargetStats("t", 0, "db", "x", 5, 14, "t14", "t02"), c], key=repr
    )


def test_a_row_with_its_own_op_is_written_again_with_every_digit():
    # orjson reads both numbers as doubles; the row is written again (its __op replaced).
    row = '{"__op":0,"amount":12345678901234567.123456789,"big":123456789012345678901234567890}'
    encoded = encode_row("DELETE", row, "w")
    assert b"12345678901234567.123456789" in encoded
    assert b"123456789012345678901234567890" in encoded
    assert encoded.count(b'"__op"') == 1
    assert json.loads(encoded)["__op"] == 1
