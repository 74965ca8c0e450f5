"""Progress rows keep their topic's Kafka topic id, so that a start without its checkpoint can
tell a re-created topic from the one their offsets belong to (app/resume.py)."""

from __future__ import annotations

from typing import Any

import pytest

from sinks.starrocks.committer import Outcome

from .conftest import DB, batch, make_sink, order_txn

pytestmark = pytest.mark.integration


def test_progress_rows_carry_the_topic_id(sr: Any, spark: Any) -> None:
    sink = make_sink(sr)
    sink.open()
    sink.set_topic_ids({"cdc": "AAAAAAAAAAAAAAAAAAAAAA"})
    rows = order_txn(1, txn_seq=1, offset=10) + order_txn(2, partition=1, txn_seq=1, offset=3)
    assert sink.write_batch(batch(spark, rows), 0).outcome is Outcome.COMMITTED
    assert sink.committed_progress()[1] == {
        ("cdc", 0): "AAAAAAAAAAAAAAAAAAAAAA",
        ("cdc", 1): "AAAAAAAAAAAAAAAAAAAAAA",
    }


def test_a_progress_table_from_before_the_column_still_takes_progress_rows(
    sr: Any, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    sr.sql(
        f"CREATE TABLE {DB}._cdc_progress (pipeline VARCHAR(128) NOT NULL, "
        "topic VARCHAR(255) NOT NULL, kafka_partition INT NOT NULL, last_offset BIGINT, "
        "last_txn_id VARCHAR(255), batch_id BIGINT, label VARCHAR(128), commit_time DATETIME) "
        "PRIMARY KEY(pipeline, topic, kafka_partition) "
        "DISTRIBUTED BY HASH(pipeline, topic, kafka_partition)"
    )
    sink = make_sink(sr)
    with caplog.at_level("WARNING", logger="sinks.starrocks.sink"):
        sink.open()
    assert "ADD COLUMN topic_id VARCHAR(64)" in caplog.text
    sink.set_topic_ids({"cdc": "AAAAAAAAAAAAAAAAAAAAAA"})
    assert sink.write_batch(batch(spark, order_txn(1, offset=10)), 0).outcome is Outcome.COMMITTED
    assert sink.committed_progress() == ({("cdc", 0): 14}, {})
