"""The Java dependencies ``make setup`` resolves into ``jvm/lib`` (``jvm/pom.xml``).

Tests, benchmarks and the devstack start Spark in process with Spark's Kafka connector from
here (``spark.jars``); ``spark-submit.sh`` passes the same folder with ``--jars``.
"""

from __future__ import annotations

from pathlib import Path

from devstack.kafka.errors import BrokerStartError

JVM_LIB = Path(__file__).resolve().parent.parent / "jvm" / "lib"


def spark_kafka_jars() -> list[Path]:
    """Spark's Kafka connector and what it needs beyond pyspark's own jars.

    Raises:
        BrokerStartError: the jars are not resolved yet (run ``make setup``).
    """
    jars = sorted((JVM_LIB / "spark-kafka").glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10") for j in jars):
        msg = f"Spark's Kafka connector not found in {JVM_LIB / 'spark-kafka'}: run `make setup`"
        raise BrokerStartError(msg)
    return jars


def spark_jars_conf() -> str:
    """The value for ``spark.jars`` (comma-separated paths)."""
    return ",".join(str(j) for j in spark_kafka_jars())
