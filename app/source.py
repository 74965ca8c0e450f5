"""The pipeline's source: Spark's own Kafka connector (``spark-sql-kafka-0-10``).

Spark's checkpoint owns the offsets (DESIGN.md); the connector's jar must be on the classpath:
``spark-submit.sh`` passes ``jvm/lib/spark-kafka`` (``make setup``) with ``--jars`` or falls back
to ``--packages``. Called on the driver when the query is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMAT = "kafka"

#: Consumer settings the pipeline passes unless ``source.options`` names them.
#: ``fetch.max.wait.ms``: after every poll Spark's consumer asks the broker for the partition's
#: offset range. A poll that reached the log end has already sent the next fetch, which the
#: broker holds for ``fetch.max.wait.ms`` (500 ms by default) because there is nothing to
#: return, and the broker answers one connection's requests in order. So each Kafka task that
#: reads up to the log end (every micro-batch of a live stream) waited ~500 ms for nothing
#: (docs/benchmarks.md). Every poll still waited it out once: 18 ms per poll at 10 ms, 8 ms at
#: 0, and a live stream polls every partition every batch (docs/kafka-source.md). A task only
#: reads offsets that exist, so the broker never has to wait for data: 0.
CONSUMER_DEFAULTS = {"kafka.fetch.max.wait.ms": "0"}


def read_kafka_stream(
    spark: SparkSession, options: Mapping[str, str], max_read_tasks: int = 0
) -> DataFrame:
    """A streaming DataFrame of Kafka records (the connector's schema).

    Args:
        spark: the session (driver).
        options: connector options, by the connector's names (``kafka.bootstrap.servers``,
            ``subscribe``, ``startingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``,
            ``kafka.*``).
        max_read_tasks: at most this many tasks read a micro-batch (their topic partitions
            one after another); 0: one per core Spark reports at start. Merging is a narrow
            dependency (``coalesce``): no shuffle, each partition still read in order.
    """
    reader = spark.readStream.format(FORMAT)
    for key, value in options.items():
        reader = reader.option(key, value)
    # Spark's Kafka source runs one task per topic partition; with many partitions a small
    # batch is mostly the tasks' fixed cost (64 partitions, 3,000-row batches: 19-30 % more
    # rows/s merged). One task per core reads a batch in one wave; twice the cores cost a
    # second wave on every small batch and bought nothing at large ones (docs/benchmarks.md).
    tasks = max_read_tasks or spark.sparkContext.defaultParallelism
    return reader.load().coalesce(tasks)
