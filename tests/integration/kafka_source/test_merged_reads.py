"""Reads merged into fewer tasks than topic partitions (``source.max-read-tasks``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.source import read_kafka_stream
from devstack.kafka import KafkaBroker, produce_by_partition
from tests.fixtures.kafka import from_start, partition_counts

pytestmark = pytest.mark.integration


def test_reads_are_merged_without_a_shuffle(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: Callable[[int], str]
) -> None:
    topic = unique_topic(8)
    plan = read_kafka_stream(spark, from_start(kafka_broker.bootstrap, topic), 3)
    assert "Repartition 3, false" in plan._jdf.queryExecution().logical().toString()
    default = read_kafka_stream(spark, from_start(kafka_broker.bootstrap, topic))
    # One wave: one read task per core (docs/kafka-source.md).
    tasks = spark.sparkContext.defaultParallelism
    assert f"Repartition {tasks}, false" in default._jdf.queryExecution().logical().toString()


def test_a_checkpoint_written_with_one_task_per_partition_resumes_merged(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: Callable[[int], str], tmp_path: Path
) -> None:
    topic = unique_topic(6)
    options = from_start(kafka_broker.bootstrap, topic)

    def fill() -> None:
        produce_by_partition(kafka_broker.bootstrap, topic, {p: [b"x"] * 10 for p in range(6)})

    fill()
    # Before source.max-read-tasks: the connector's DataFrame as it comes.
    raw = spark.readStream.format("kafka")
    for key, value in options.items():
        raw = raw.option(key, value)
    assert partition_counts(raw.load(), tmp_path / "cp")[0] == dict.fromkeys(range(6), 10)
    fill()
    # Same checkpoint, reads merged into one task: state and offsets carry on.
    merged = read_kafka_stream(spark, options, 1)
    assert partition_counts(merged, tmp_path / "cp")[0] == dict.fromkeys(range(6), 20)
