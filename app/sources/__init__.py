"""Kafka sources: the project's ``cdc-kafka`` Python source or Spark's official connector.

Both yield the official connector's schema and use its option names; everything downstream
is shared. Called on the driver when the query is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from app.sources.kafka_source import SOURCE_NAME, KafkaDataSource, KafkaInputPartition
from app.sources.options import KafkaSourceOptions, parse_options
from app.sources.schema import SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "OFFICIAL_FORMAT",
    "SCHEMA",
    "SOURCE_NAME",
    "KafkaDataSource",
    "KafkaInputPartition",
    "KafkaSourceOptions",
    "parse_options",
    "read_kafka_stream",
    "register",
]

OFFICIAL_FORMAT = "kafka"
# Options only the project's source understands; not passed to the official connector.
_OWN_OPTIONS = frozenset({"rowformat"})


def register(spark: SparkSession) -> None:
    """Register ``cdc-kafka`` with ``spark`` (registering again replaces it: idempotent)."""
    spark.dataSource.register(KafkaDataSource)


def read_kafka_stream(
    spark: SparkSession, options: Mapping[str, str], use_official_connector: bool = False
) -> DataFrame:
    """A streaming DataFrame of Kafka records with the official connector's schema.

    Args:
        spark: the session (driver).
        options: connector options (``kafka.bootstrap.servers``, ``subscribe``,
            ``startingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``kafka.*``).
        use_official_connector: use Spark's ``kafka`` format (its jar must be on the
            classpath, e.g. ``--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<version>``)
            instead of ``cdc-kafka``.

    Raises:
        common.errors.ConfigError: an option is invalid (checked here, before the query starts).
    """
    if use_official_connector:
        reader = spark.readStream.format(OFFICIAL_FORMAT)
        for key, value in options.items():
            if key.lower() not in _OWN_OPTIONS:
                reader = reader.option(key, value)
        return reader.load()
    parse_options(options)  # fail fast with a ConfigError on the driver
    register(spark)
    reader = spark.readStream.format(SOURCE_NAME)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()
