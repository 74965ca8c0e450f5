"""Raw confluent-kafka consume rate vs the cdc-kafka Spark source (rows/s), tuples vs Arrow.

    .venv/bin/python -m benchmarks.kafka_source --records 500000 --partitions 4

Measures the project's Python source only (its ``rowFormat`` option); ``benchmarks.run``
measures both sources side by side. Starts its own Apache Kafka broker (or uses
BROKERS=host:port), produces small records, then:
1. raw: one confluent-kafka consumer reads every partition (the ceiling for one process);
2. spark: an availableNow query over cdc-kafka into the noop sink, local[2], once with
   rowFormat=arrow and once with rowFormat=tuples. Reported: wall time of the whole query and
   the rate over Spark's addBatch time (excludes query start and planning).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.broker_consume import raw_rate
from devstack.kafka import KafkaBroker, create_topic, produce


def spark_rate(
    spark: Any, bootstrap: str, topic: str, row_format: str, total: int
) -> tuple[float, float]:
    from app.sources import read_kafka_stream

    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        query = (
            read_kafka_stream(
                spark,
                {
                    "kafka.bootstrap.servers": bootstrap,
                    "subscribe": topic,
                    "startingOffsets": "earliest",
                    "rowFormat": row_format,
                },
            )
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        wall = time.perf_counter() - started
        progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    assert rows == total, f"read {rows} rows, expected {total}"
    add_batch_ms = sum(p["durationMs"].get("addBatch", 0) for p in progress)
    return total / wall, total / (add_batch_ms / 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory() as data_dir:
        broker: KafkaBroker | None = None
        bootstrap = os.environ.get("BROKERS")
        if not bootstrap:
            broker = KafkaBroker(Path(data_dir) / "kafka")
            bootstrap = broker.start().bootstrap
        try:
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic, args.partitions)
            per = args.records // args.partitions
            total = per * args.partitions
            pad = b"x" * max(0, args.value_bytes - 12)
            started = time.perf_counter()
            for p in range(args.partitions):
                produce(bootstrap, topic, (b"%011d " % i + pad for i in range(per)), partition=p)
            print(f"produced {total} records in {time.perf_counter() - started:.1f}s")

            raw = raw_rate(bootstrap, topic, args.partitions, total)
            print(f"raw confluent-kafka consume: {raw:,.0f} rows/s")

            from pyspark.sql import SparkSession

            spark = (
                SparkSession.builder.master("local[2]")
                .appName("bench-kafka-source")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            spark_rate(spark, bootstrap, topic, "arrow", total)  # warm-up: JVM, workers
            results = {}
            for row_format in ("tuples", "arrow"):
                wall, batch = spark_rate(spark, bootstrap, topic, row_format, total)
                results[row_format] = (wall, batch)
                print(
                    f"spark cdc-kafka rowFormat={row_format}: {wall:,.0f} rows/s wall, "
                    f"{batch:,.0f} rows/s in addBatch"
                )
            spark.stop()
            arrow_batch = results["arrow"][1]
            print(
                f"ratio spark(arrow, addBatch)/raw = {arrow_batch / raw:.2f}; "
                f"arrow/tuples = {arrow_batch / results['tuples'][1]:.2f}"
            )
        finally:
            if broker is not None:
                broker.stop()


if __name__ == "__main__":
    main()
