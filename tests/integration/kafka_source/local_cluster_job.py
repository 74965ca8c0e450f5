"""Run by test_local_cluster.py with ``sys.executable``: read a topic on ``local-cluster``.

Executors are separate JVMs with their own Python workers, so this proves Spark's Kafka
connector jars (``spark.jars``, as ``spark-submit.sh --jars`` passes them) reach executors in
processes other than the driver's, and the project's source wiring works there.
Usage: local_cluster_job.py BOOTSTRAP TOPIC CHECKPOINT OUTPUT_JSON
"""

from __future__ import annotations

import json
import os
import sys
import time

from pyspark.sql import SparkSession

from app.session import BASE_CONF, KAFKA_V2_OFF
from app.source import read_kafka_stream
from devstack.jars import spark_jars_conf


def main() -> None:
    bootstrap, topic, checkpoint, output = sys.argv[1:5]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # also for the worker and executor JVMs
    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("kafka-local-cluster")
        .config("spark.executor.memory", "768m")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.jars", spark_jars_conf())
        # The app's Kafka reader (v1): its records are read in executors of their own too.
        .config(KAFKA_V2_OFF, BASE_CONF[KAFKA_V2_OFF])
        # Loopback only: executors and the driver talk over 127.0.0.1, never a real interface.
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .getOrCreate()
    )
    rows: list[list[object]] = []
    executor_pids: set[int] = set()

    def on_batch(df: object, _batch_id: int) -> None:
        frame = df  # a DataFrame; typed loosely to keep this script dependency-free
        for r in frame.collect():  # type: ignore[attr-defined]
            rows.append([r["partition"], r["offset"], bytes(r["value"]).decode()])
        pids = frame.rdd.mapPartitions(lambda _it: [os.getpid()]).collect()  # type: ignore[attr-defined]
        executor_pids.update(pids)

    print(f"{time.strftime('%X')} session ready", file=sys.stderr, flush=True)
    query = (
        read_kafka_stream(
            spark,
            {
                "kafka.bootstrap.servers": bootstrap,
                "subscribe": topic,
                "startingOffsets": "earliest",
            },
        )
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    print(f"{time.strftime('%X')} query started", file=sys.stderr, flush=True)
    if not query.awaitTermination(420):
        query.stop()
        sys.exit("query did not finish")
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    with open(output, "w") as f:
        json.dump(
            {
                "rows": rows,
                "executors": executors,
                "executor_pids": sorted(executor_pids),
                "driver_pid": os.getpid(),
            },
            f,
        )
    spark.stop()


if __name__ == "__main__":
    main()
