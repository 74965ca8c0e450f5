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
    ("op", "row"), [("MERGE", "{}"), ("UPSERT", "[1]"), ("UPSERT", "{bad"), ("UPSERT", None)]
)
def test_bad_rows_are_terminal_and_name_where(op, row):
    with pytest.raises(InvalidRequestError, match="table=orders topic=t partition=3 txn_id=x"):
        encode_row(op, row, "table=orders topic=t partition=3 txn_id=x")


def test_progress_body_is_an_upsert_array():
    rows = json.loads(progress_body([{"pipeline": "p", "topic": "t", "kafka_partition": 0}]))
    assert rows == [{"pipeline": "p", "topic": "t", "kafka_partition": 0, "__op": 0}]


def test_report_round_trip():
    report = TableReport("orders", rows=3, bytes=40, requests=1)
    assert parse_reports([report.as_dict()]) == [report]
