"""Spark's progress events reach the reporter through the app's listener (real Spark, Kafka)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.progress import ProgressListener, ProgressReporter
from app.source import read_kafka_stream
from devstack.kafka import KafkaBroker, produce_by_partition
from tests.fixtures.kafka import from_start

pytestmark = pytest.mark.integration


class _Recording(ProgressReporter):
    def __init__(self) -> None:
        super().__init__(enabled=False)
        self.progress: list[tuple[int, int]] = []

    def on_progress(self, batch_id: int, input_rows: int) -> None:
        self.progress.append((batch_id, input_rows))
        super().on_progress(batch_id, input_rows)


def _read(df: Any, _batch_id: int) -> None:
    df.count()  # a batch's input rows are the rows its jobs read


def _run(spark: Any, options: dict[str, str], name: str, checkpoint: Path) -> None:
    query = (
        read_kafka_stream(spark, options)
        .writeStream.queryName(name)
        .foreachBatch(_read)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the query did not finish"
    assert query.exception() is None


def test_each_batch_of_its_query_reaches_the_reporter_with_its_input_rows(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: Callable[[int], str], tmp_path: Path
) -> None:
    topic = unique_topic(2)
    produce_by_partition(kafka_broker.bootstrap, topic, {0: [b"x"] * 3, 1: [b"x"] * 2})
    options = from_start(kafka_broker.bootstrap, topic)
    reporter = _Recording()
    listener = ProgressListener(reporter, "ours")
    spark.streams.addListener(listener)
    try:
        _run(spark, options, "another", tmp_path / "other")
        _run(spark, options, "ours", tmp_path / "ours")
        deadline = time.monotonic() + 30  # the listener bus delivers asynchronously
        while not reporter.progress and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        spark.streams.removeListener(listener)
    assert reporter.progress == [(0, 5)]
