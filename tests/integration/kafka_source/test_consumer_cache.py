"""Spark's cached Kafka consumers: a pipeline reading many partitions keeps its consumers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.source import read_kafka_stream
from devstack.kafka import KafkaBroker, produce_by_partition
from tests.fixtures.kafka import from_start

pytestmark = pytest.mark.integration

PARTITIONS = 80  # above Spark's default cache capacity (64)


def _live_consumers(spark: Any) -> set[str]:
    """Client ids of the KafkaConsumers alive in this JVM (each registers an app-info MBean)."""
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    server = jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer()
    # Through the interface: py4j cannot call the platform server's own (unexported) class.
    interface = jvm.java.lang.Class.forName("javax.management.MBeanServer")
    types = gateway.new_array(jvm.java.lang.Class, 2)
    types[0] = jvm.java.lang.Class.forName("javax.management.ObjectName")
    types[1] = jvm.java.lang.Class.forName("javax.management.QueryExp")
    args = gateway.new_array(jvm.java.lang.Object, 2)
    args[0] = jvm.javax.management.ObjectName("kafka.consumer:type=app-info,*")
    names = interface.getMethod("queryNames", types).invoke(server, args)
    return {str(name.getKeyProperty("id")) for name in names}


def test_batches_after_the_first_build_no_new_consumers(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: Callable[[int], str], tmp_path: Path
) -> None:
    topic = unique_topic(PARTITIONS)
    produce_by_partition(kafka_broker.bootstrap, topic, {p: [b"x"] * 3 for p in range(PARTITIONS)})
    options = {
        **from_start(kafka_broker.bootstrap, topic),
        "maxOffsetsPerTrigger": str(PARTITIONS),  # one record per partition and batch
    }
    after_batch: list[set[str]] = []

    read: list[int] = []

    def on_batch(df: Any, _batch_id: int) -> None:
        read.append(df.select("partition").distinct().count())
        after_batch.append(_live_consumers(spark))

    query = (
        read_kafka_stream(spark, options)
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the query did not finish"
    assert query.exception() is None
    assert read == [PARTITIONS] * 3, "each batch reads every partition"
    first, *later = after_batch
    for i, live in enumerate(later, start=1):
        assert not live - first, f"batch {i} built {len(live - first)} new Kafka consumers"
