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


def read_kafka_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """A streaming DataFrame of Kafka records (the connector's schema).

    Args:
        spark: the session (driver).
        options: connector options, by the connector's names (``kafka.bootstrap.servers``,
            ``subscribe``, ``startingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``,
            ``kafka.*``).
    """
    reader = spark.readStream.format(FORMAT)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()
