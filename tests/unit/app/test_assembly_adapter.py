"""The adapter's conversion of pandas chunks to source records (no Spark needed)."""

import pandas as pd
import pytest

from app.assembly import _chunk_records, _records
from assembler.records import SourceRecord

pytestmark = pytest.mark.unit


def test_records_from_chunks_keep_values_and_types():
    chunks = [
        pd.DataFrame(
            {
                "offset": [7, 8],
                "value": [b"a", None],
            }
        ),
        pd.DataFrame({"offset": [], "value": []}),
    ]
    records = list(_records("t", 3, iter(chunks)))
    assert records == [SourceRecord("t", 3, 7, b"a"), SourceRecord("t", 3, 8, None)]
    assert all(type(r.offset) is int for r in records)


def test_slot_records_are_source_records_with_their_key():
    chunk = pd.DataFrame(
        {"topic": ["t", "u"], "partition": [3, 4], "offset": [7, 8], "value": [b"a", None]}
    )
    plain = list(_chunk_records(iter([chunk, chunk.iloc[:0]])))
    assert plain == [SourceRecord("t", 3, 7, b"a"), SourceRecord("u", 4, 8, None)]
    assert all(type(r) is SourceRecord and r.key is None for r in plain)
    keyed = list(_chunk_records(iter([chunk.assign(key=[b"k", None])]), keyed=True))
    assert [r.key for r in keyed] == [b"k", None]
    assert keyed[0].value == b"a"
