"""The pipeline's source: Spark's own Kafka connector (``spark-sql-kafka-0-10``).

Spark's checkpoint owns the offsets (DESIGN.md); the connector's jar must be on the classpath:
``spark-submit.sh`` passes ``jvm/lib/spark-kafka`` (``make setup``) with ``--jars`` or falls back
to ``--packages``. Called on the driver when the query is built.
"""

from __future__ import annotations

import math
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
#: ``isolation.level``: a transactional producer (Kafka Connect with exactly-once source
#: support, as Debezium runs it; any producer with a ``transactional.id``) leaves the records of
#: aborted Kafka transactions in the log, and of open ones until they end. Kafka's default,
#: ``read_uncommitted``, hands them over: an aborted write would be applied, and a retried one
#: rejected as a BEGIN while open. ``read_committed`` reads only committed records; Spark's
#: connector steps over the gaps they and the transaction markers leave (SPARK-25005).
CONSUMER_DEFAULTS = {"kafka.fetch.max.wait.ms": "0", "kafka.isolation.level": "read_committed"}

#: The consumer setting ``poll_records`` chooses unless ``source.options`` names it.
POLL_RECORDS_KEY = "kafka.max.poll.records"
#: Kafka's own default, and the least the pipeline asks for.
KAFKA_POLL_RECORDS = 500


def poll_records(max_offsets: int, partitions: int) -> int:
    """``max.poll.records`` for a batch of ``max_offsets`` records over ``partitions``.

    After every poll Spark's consumer seeks to both ends of its partition to learn the offset
    range (two offset requests), so a catch-up with Kafka's 500 pays those round trips every
    500 records; a poll the size of the batch's share of a partition pays them once a batch
    (200,000-record batches: 7-16 % more rows/s, docs/benchmarks.md). A poll hands over no
    more than the consumer has fetched, and a cached consumer keeps what its batch left of it:
    at most one fetch per partition, used only where the heap holds that (app/memory.py,
    ``held_poll_records``; app/main.py, ``size_polls``). Small shares keep 500:
    a poll per batch and partition is what a live stream pays anyway, and a smaller one made
    every task poll again within its batch (64 partitions, docs/benchmarks.md).
    """
    if partitions <= 0:
        return KAFKA_POLL_RECORDS
    return max(KAFKA_POLL_RECORDS, math.ceil(max_offsets / partitions))


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
