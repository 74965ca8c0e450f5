"""Kafka is read through Spark's v1 source (``app.session.BASE_CONF``), on any checkpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.session import BASE_CONF, KAFKA_V2_OFF
from app.source import read_kafka_stream
from devstack.kafka import KafkaBroker, produce_by_partition
from tests.fixtures.kafka import from_start, partition_counts

pytestmark = pytest.mark.integration

PARTITIONS = 3


@contextmanager
def _reader(spark: Any, value: str) -> Iterator[None]:
    """Queries started inside read through the v1 source, or (``""``) through DSv2."""
    spark.conf.set(KAFKA_V2_OFF, value)
    try:
        yield
    finally:
        spark.conf.set(KAFKA_V2_OFF, BASE_CONF[KAFKA_V2_OFF])


def _counts(spark: Any, options: dict[str, str], checkpoint: Path) -> tuple[dict[int, int], str]:
    """Running record counts per partition over everything available, and the source's name."""
    counts, query = partition_counts(read_kafka_stream(spark, options), checkpoint)
    return counts, str(query.lastProgress["sources"][0]["description"])


def _fill(bootstrap: str, topic: str) -> None:
    produce_by_partition(bootstrap, topic, {p: [b"x"] * 10 for p in range(PARTITIONS)})


def test_the_apps_session_reads_through_the_v1_source(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: Callable[[int], str], tmp_path: Path
) -> None:
    topic = unique_topic(PARTITIONS)
    _fill(kafka_broker.bootstrap, topic)
    counts, source = _counts(spark, from_start(kafka_broker.bootstrap, topic), tmp_path / "cp")
    assert counts == dict.fromkeys(range(PARTITIONS), 10)
    assert source.startswith("KafkaSourceV1["), source


def test_a_checkpoint_moves_between_the_readers_without_loss_or_repeats(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: Callable[[int], str], tmp_path: Path
) -> None:
    """Checkpoints of releases that read through DSv2 carry on, and back again ("" = DSv2)."""
    topic = unique_topic(PARTITIONS)
    options = from_start(kafka_broker.bootstrap, topic)
    checkpoint = tmp_path / "cp"
    for total, reader, name in [
        (10, "", "KafkaV2["),
        (20, BASE_CONF[KAFKA_V2_OFF], "KafkaSourceV1["),
        (30, "", "KafkaV2["),
    ]:
        _fill(kafka_broker.bootstrap, topic)
        with _reader(spark, reader):
            counts, source = _counts(spark, options, checkpoint)
        # The state's running counts: every record once, whichever reader wrote the offsets.
        assert counts == dict.fromkeys(range(PARTITIONS), total), (reader, counts)
        assert source.startswith(name), source
