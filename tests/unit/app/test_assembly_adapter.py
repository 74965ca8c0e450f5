"""The adapter's conversion of pandas chunks to source records (no Spark needed)."""

import pandas as pd
import pytest

from app.assembly import _epoch_ms, _records
from assembler.records import SourceRecord

pytestmark = pytest.mark.unit

MS = [1_700_000_000_123, 1_700_000_000_456]


@pytest.mark.parametrize(
    "column",
    [
        pd.Series(pd.to_datetime(MS, unit="ms")),  # datetime64[ns], naive UTC (Spark's)
        pd.Series(pd.to_datetime(MS, unit="ms")).astype("datetime64[us]"),
        pd.Series(pd.to_datetime(MS, unit="ms")).dt.tz_localize("UTC"),
        pd.Series(pd.to_datetime(MS, unit="ms")).dt.tz_localize("UTC").dt.tz_convert("Asia/Tokyo"),
        pd.Series([pd.Timestamp(ms, unit="ms") for ms in MS], dtype=object),
    ],
)
def test_epoch_ms_of_every_timestamp_flavour(column):
    assert _epoch_ms(column) == MS


def test_missing_timestamps_are_none():
    column = pd.Series(pd.to_datetime([MS[0], None], unit="ms"))
    assert _epoch_ms(column) == [MS[0], None]
    assert _epoch_ms(pd.Series([None, None], dtype="datetime64[ns]")) == [None, None]


def test_records_from_chunks_keep_values_and_types():
    chunks = [
        pd.DataFrame(
            {
                "offset": [7, 8],
                "value": [b"a", None],
                "timestamp": pd.to_datetime(MS, unit="ms"),
            }
        ),
        pd.DataFrame({"offset": [], "value": [], "timestamp": []}),
    ]
    records = list(_records("t", 3, iter(chunks)))
    assert records == [SourceRecord("t", 3, 7, b"a", MS[0]), SourceRecord("t", 3, 8, None, MS[1])]
    assert all(type(r.offset) is int for r in records)
