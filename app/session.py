"""The SparkSession the application runs in."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from app.config import AppConfig
from app.jvm_archive import PROJECT_ROOT, with_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark's list of sources read through their v1 API although they have a DSv2 reader.
KAFKA_V2_OFF = "spark.sql.streaming.disabledV2MicroBatchReaders"
KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
#: The size of a piece of a broadcast, and of the buffer Spark serializes each one into.
BROADCAST_PIECE = "spark.broadcast.blockSize"

#: The driver JVM's options (spark-submit.sh passes the same).
DRIVER_JAVA_OPTIONS = "-Xss8m -XX:+UseParallelGC"

# Defaults we set deliberately (DESIGN.md §7); the user's spark.conf.* wins over them.
BASE_CONF = {
    # Processing time and Kafka timestamps in one zone, whatever the machine's.
    "spark.sql.session.timeZone": "UTC",
    # A bigger driver stack: q.stop() during foreachBatch can overflow the default one.
    # The parallel collector: on a local master the driver runs the tasks, and a micro-batch
    # makes mostly short-lived garbage (rows, Arrow frames, plans), which G1's concurrent
    # work and write barriers cost more CPU to collect. 30,000-record batches: the pipeline
    # 8-17 % faster, 8-13 % less CPU per record (docs/benchmarks.md, "Changes that paid").
    # Executors on a cluster keep Spark's default.
    "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
    # Spark's Kafka source caches one consumer per topic partition on each executor. Once the
    # cache holds its capacity (default 64), *every* borrow evicts the oldest 15 % of the
    # idle consumers and logs a WARN: a pipeline reading 64 partitions built ~10 new Kafka
    # consumers each micro-batch (docs/benchmarks.md). Idle consumers still leave after
    # spark.kafka.consumer.cache.timeout (5 min), so a large soft cap keeps only what is used.
    "spark.kafka.consumer.cache.capacity": "4096",
    # Over Spark's default loopback TCP, every Python task waited ~40 ms (Linux's delayed-ACK
    # time) in its exchanges with the JVM, a task with no rows too, and a micro-batch runs two
    # waves of them (the assembler's, the load's). Over Unix domain sockets the wait is gone
    # (docs/benchmarks.md, "Changes that paid"). Workers always run on their JVM's host.
    "spark.python.unix.domain.socket.enabled": "true",
    # Spark's Kafka source through its v1 reader (``KafkaSource``). The DSv2 reader builds a
    # row converter, i.e. generates the Java source of two projections, for every topic
    # partition of every micro-batch (``KafkaBatchPartitionReader``); v1 builds one per
    # query. 64 partitions in 3,000-record batches: the pipeline 1.37 times as fast
    # (benchmarks.kafka_reader). The checkpoint's offsets are the same either way, so a
    # checkpoint moves between them (docs/kafka-source.md); "" here goes back to DSv2.
    KAFKA_V2_OFF: KAFKA_PROVIDER,
    # Spark broadcasts each stage's task binary, and the state store's Hadoop configuration,
    # through a buffer the size of one broadcast piece: 4 MiB by default, allocated and zeroed
    # for the 10-40 KiB each of these takes, three a micro-batch. In 1,200-record batches that
    # was a quarter of all the driver JVM allocated (docs/benchmarks.md, "Changes that paid").
    # 256 KiB still holds each of them in one piece for executors to fetch.
    BROADCAST_PIECE: "256k",
}

# For a checkpoint on the local disk only. Spark's default (FileContext) manager renames
# through Hadoop calls that fork `readlink` for each file, as pip's pyspark has no native
# Hadoop library: 30-70 ms per offset or commit log write on the driver, and per state-store
# commit in every stateful task (docs/benchmarks.md). The FileSystem-API manager renames
# with rename(2), which is atomic on a local file system. On HDFS or object stores Spark's
# own choice stays.
LOCAL_CHECKPOINT_CONF = {
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager"
    ),
}


# Python workers without a full garbage collection after every task (app/pydaemon.py). Spark
# starts the daemon before any task has put the shipped project on the path, so only where
# the workers run this Python with this checkout importable: a local master started from
# here (below), or spark-submit.sh's launcher.
DAEMON_CONF = {"spark.python.daemon.module": "app.pydaemon"}


def build_session(config: AppConfig) -> SparkSession:
    """Create (or join) the SparkSession with the pipeline's settings."""
    from pyspark.sql import SparkSession

    # Executors must run the same Python as the driver, with the project importable.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = session_conf(config)
    if conf.get("spark.python.daemon.module") == DAEMON_CONF["spark.python.daemon.module"]:
        project_on_pythonpath()
    builder = SparkSession.builder.appName(config.spark.app_name)
    if config.spark.master:
        builder = builder.master(config.spark.master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def project_on_pythonpath() -> None:
    """Put this checkout first on ``PYTHONPATH``, for the JVM about to start and its daemon.

    The JVM (and the Python daemon it starts, ``DAEMON_CONF``) inherits the environment.
    """
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(PROJECT_ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *filter(None, paths)])


def session_conf(config: AppConfig) -> dict[str, str]:
    """The Spark settings the pipeline runs with: ours, then the user's ``spark.conf``."""
    conf = dict(BASE_CONF)
    if urlparse(config.pipeline.checkpoint_location).scheme in ("", "file"):
        conf.update(LOCAL_CHECKPOINT_CONF)
    if _starts_local_spark(config.spark.master):
        conf.update(DAEMON_CONF)
        # The driver JVM this process starts maps Spark's classes from `make setup`'s archive
        # (app/jvm_archive.py); the user's own extraJavaOptions replace ours whole.
        conf["spark.driver.extraJavaOptions"] = with_archive(DRIVER_JAVA_OPTIONS)
    # State-store partitions are frozen into the checkpoint at the first run (DESIGN.md §7):
    # this is the one place that sets them.
    conf["spark.sql.shuffle.partitions"] = str(config.pipeline.state_partitions)
    # With a processing-time state timeout pending, Spark runs a batch every trigger even with
    # no new data: ~44 CPU-s per minute idle at a 1 s trigger (benchmarks.idle), against ~1
    # without. Off, an abandoned transaction's txn-timeout fires with the next batch that
    # has records for its state slot, which is when anything waiting behind it arrives
    # (README, "Run it against your cluster"; app/state_layout.py: a new checkpoint then
    # has no Spark state timeout at all).
    conf["spark.sql.streaming.noDataMicroBatches.enabled"] = (
        "true" if config.pipeline.idle_batches else "false"
    )
    conf.update(config.spark.conf)
    return conf


def _starts_local_spark(master: str) -> bool:
    """Whether this process starts Spark itself with executors on this machine.

    Under spark-submit the JVM came first (it exported the gateway port) and its
    environment is set; spark-submit.sh chooses the daemon there.
    """
    local = master == "local" or master.startswith(("local[", "local-cluster["))
    return local and "PYSPARK_GATEWAY_PORT" not in os.environ and (PROJECT_ROOT / "app").is_dir()
