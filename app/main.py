"""Entry point: ``spark-submit app/main.py --config conf/<name>.yaml [--set key=value ...]``."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

if __package__ in (None, ""):
    # spark-submit runs this file as a script: make the project's packages importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.config import AppConfig, get_setting, load_config
from common.errors import CdcError, ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from app.memory import ExecutorHeap
    from app.progress import ProgressReporter
    from sinks.starrocks.sink import StarRocksSink
    from sinks.starrocks.txnapi import Instrument

log = logging.getLogger("app")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_LEVEL_ENV = "CDC_LOG_LEVEL"


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(
        prog="app/main.py",
        description="Kafka CDC transactions -> StarRocks, exactly once per micro-batch.",
    )
    parser.add_argument("--config", required=True, help="YAML file, e.g. conf/local.yaml")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, e.g. --set starrocks.load-url=fe:8030 (repeatable)",
    )
    parser.add_argument(
        "--log-level",
        metavar="LEVEL",
        help=f"{', '.join(LOG_LEVELS)} (default: ${LOG_LEVEL_ENV}, else INFO)",
    )
    parser.add_argument(
        "--check-config", action="store_true", help="validate the settings and exit"
    )
    parser.add_argument(
        "--get",
        metavar="KEY",
        help="print one resolved setting (e.g. source.format) and exit; refuses sections, "
        "unknown keys and credentials (exit 2)",
    )
    return parser.parse_args(argv)


def log_level(flag: str | None, environ: Mapping[str, str]) -> str:
    """The level of ``--log-level``, else of ``CDC_LOG_LEVEL``, else INFO.

    Raises:
        ConfigError: naming the option or variable whose level logging does not know (a typo
            was logging's ValueError, a traceback, even for ``--check-config``).
    """
    where, level = (
        ("--log-level", flag) if flag is not None else (LOG_LEVEL_ENV, environ.get(LOG_LEVEL_ENV))
    )
    if level is None:
        return "INFO"
    if level.strip().upper() not in logging.getLevelNamesMapping():
        msg = f"{where}={level!r}: expected one of {', '.join(LOG_LEVELS)}"
        raise ConfigError(msg)
    return level.strip().upper()


def configure_logging(level: str) -> None:
    """Structured key=value lines on stderr; the progress line goes to stdout."""
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s level=%(levelname)s logger=%(name)s %(message)s",
        stream=sys.stderr,
    )
    # py4j logs every gateway call at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)


#: ``module:function`` of an optional sink instrumentation hook (fault injection, tracing):
#: the function takes no argument and returns a :data:`sinks.starrocks.txnapi.Instrument`.
INSTRUMENT_ENV = "CDC_SINK_INSTRUMENT"


def load_instrument(spec: str) -> Instrument | None:
    """Import the hook named by ``spec`` (``module:function``); ``""`` means none.

    Raises:
        ConfigError: ``spec`` is malformed or does not name a callable.
    """
    if not spec.strip():
        return None
    module_name, _, attr = spec.strip().partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        msg = f"{INSTRUMENT_ENV}={spec!r}: expected module:function of an importable factory"
        raise ConfigError(msg) from e
    instrument: Instrument = factory()
    log.warning("sink instrumented by %s", spec)
    return instrument


def run(config: AppConfig, *, instrument: Instrument | None = None) -> int:
    """Start Spark, validate the sink, run the query until it ends or is stopped.

    ``instrument`` wraps the sink's transaction API and load job per batch (see
    :data:`INSTRUMENT_ENV`); production runs pass none.
    """
    from app.pipeline import query_id_of
    from app.preflight import check_kafka
    from app.progress import ProgressReporter
    from app.session import build_session
    from app.warmup import warm_python_workers
    from sinks.starrocks.sink import StarRocksSink

    # Kafka and StarRocks first: a wrong address fails in seconds, before Spark starts.
    check_kafka(config.source)
    metrics = None
    if config.pipeline.metrics_port:
        from app.metrics import PipelineMetrics

        metrics = PipelineMetrics(config.pipeline.name)
        port = metrics.serve(config.pipeline.metrics_port, config.pipeline.metrics_host)
        log.info("metrics served url=http://%s:%s/metrics", config.pipeline.metrics_host, port)
    reporter = ProgressReporter(enabled=config.pipeline.progress == "line", metrics=metrics)
    sink = StarRocksSink(
        config.starrocks,
        query_id_provider=lambda: query_id_of(spark),
        instrument=instrument,
    )
    sink.open()
    spark = build_session(config)
    warm_python_workers(spark)
    try:
        return _run_query(spark, config, sink, reporter)
    finally:
        # PySpark removes its driver-side socket file (spark.python.unix.domain.socket.*,
        # app/session.py) only when the context stops; the JVM's own exit would not.
        spark.stop()


def _run_query(
    spark: SparkSession, config: AppConfig, sink: StarRocksSink, reporter: ProgressReporter
) -> int:
    """Plan the start, run the query until it ends or is stopped; the exit code."""
    from app.commit_behind import Restarts
    from app.pipeline import detach_listeners, start_query
    from app.preflight import describe_topics
    from app.resume import plan_start
    from sinks.starrocks.behind import COMMIT_BEHIND_FAILED

    spark.sparkContext.setLogLevel("WARN")
    # A lost checkpoint or a re-created topic must not skip or rewind data (app/resume.py).
    topic_ids, partitions = describe_topics(config.source)
    partition_count = sum(len(p) for p in partitions.values())
    heap = _heap(spark)
    config = fit_txn_bytes(config, partition_count, heap)
    config = size_polls(config, partition_count, heap.size, heap.executors, heap.key)
    sink.set_topic_ids(topic_ids)
    committed, progress_ids = sink.committed_progress()
    starting = plan_start(spark, config, committed, topic_ids, partitions, progress_ids)
    if starting is not None:
        config = replace(config, source=replace(config.source, starting_offsets=starting))
    stop_requested = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        # Only set a flag: the main thread is inside a py4j call, and calling into the JVM
        # from a signal handler re-enters that call's socket.
        log.info("stop requested signal=%s", signum)
        stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    restarts = Restarts(config.starrocks.batch_max_attempts)
    try:
        while True:
            query = start_query(spark, config, sink, reporter)
            log.info(
                "query started name=%s id=%s checkpoint=%s",
                config.pipeline.name,
                query.id,
                config.pipeline.checkpoint_location,
            )
            failed = _await(query, stop_requested, spark, sink)
            error = None if stop_requested.is_set() else query.exception()
            if failed is None and error is not None and COMMIT_BEHIND_FAILED in str(error):
                failed = next(ln for ln in str(error).splitlines() if COMMIT_BEHIND_FAILED in ln)
            if failed is None:
                break
            # A batch Spark recorded did not commit: starting again commits its label or
            # rewinds the checkpoint to replay it, as a sync commit would have retried it
            # within the batch (app/commit_behind.py).
            if not restarts.allow(failed):
                log.error("query stops: %s", failed.strip())
                return 1
            log.warning("query restarts to replay a batch whose commit failed: %s", failed.strip())
            detach_listeners(spark)
    finally:
        detach_listeners(spark)
        sink.close()
        log.info(
            "query ended batches=%s txns=%s rows=%s rejected_records=%s",
            reporter.batches,
            reporter.transactions,
            reporter.rows,
            reporter.rejected_records,
        )
    if stop_requested.is_set():
        return 0
    error = query.exception()
    if error is not None:
        from app.failures import explain_query_failure, kafka_earliest

        earliest = kafka_earliest(config.source.client_settings())
        log.error("query failed: %s", explain_query_failure(str(error), earliest))
        log.debug("query failure, in full: %s", error)
        return 1
    return 0


def _await(
    query: StreamingQuery, stop_requested: threading.Event, spark: SparkSession, sink: StarRocksSink
) -> str | None:
    """Wait until the query ends, or stop it once a stop is requested.

    Also stops it once a commit behind failed, which the next batch would only notice when
    new data arrives: the failure, or ``None``.
    """
    from pyspark.errors import StreamingQueryException

    from app.pipeline import detach_listeners

    try:
        while not query.awaitTermination(1):
            failure = sink.commit_behind_failure()
            if failure is not None:
                py4j = logging.getLogger("py4j")
                level = py4j.level
                py4j.setLevel(logging.CRITICAL)  # a batch interrupted by the stop is no error
                query.stop()
                py4j.setLevel(level)
                return str(failure)
            if stop_requested.is_set():
                # A batch interrupted here is replayed on the next start; the sink's label
                # check keeps it exactly once. Its interrupted Spark call would otherwise
                # log a Java stack through py4j: a requested stop is not an error.
                logging.getLogger("py4j").setLevel(logging.CRITICAL)
                # Listeners first: Spark posts the stop's events asynchronously, and one
                # delivered after this process exits is a Java stack in the log.
                detach_listeners(spark)
                query.stop()
                return None
    except StreamingQueryException:
        pass  # reported by the caller, from query.exception(), in one line
    return None


def _heap(spark: SparkSession) -> ExecutorHeap:
    """The session's executors' heap (app/memory.py)."""
    from app.memory import executor_heap

    sc = spark.sparkContext
    return executor_heap(sc.master or "", dict(sc.getConf().getAll()))


def fit_txn_bytes(config: AppConfig, partitions: int, heap: ExecutorHeap) -> AppConfig:
    """``max-txn-bytes`` no larger than the executors' heap holds (app/memory.py)."""
    from app.memory import MIN_TXN_BUDGET, STATE_FACTOR, txn_bytes_budget

    budget = txn_bytes_budget(heap.size, heap.executors, partitions)
    current = config.assembler.max_txn_bytes
    if _lookup(config.raw, "assembler.max-txn-bytes"):
        if current > budget:
            log.warning(
                "assembler.max-txn-bytes=%d does not fit: %d partition(s) with a transaction "
                "that size open take ~%.1fx of it each in the state store, more than half of "
                "%s; lower it or give the executors more memory",
                current,
                partitions,
                STATE_FACTOR,
                heap.describe(),
            )
        return config
    if budget >= current:
        return config
    if budget < MIN_TXN_BUDGET:
        # A few hundred bytes dead-letter nearly every transaction: most likely a size in the
        # wrong unit (Spark reads a bare number as bytes or as MiB, app/memory.py).
        log.warning(
            "max-txn-bytes=%d: all that %s holds with %d partition(s) open at once; nearly "
            "every transaction will be txn-too-large: check that setting (and its unit), or "
            "set assembler.max-txn-bytes",
            budget,
            heap.describe(),
            partitions,
        )
    else:
        log.info(
            "max-txn-bytes=%d: what %s holds with %d partition(s) open at once (set "
            "assembler.max-txn-bytes to choose; larger transactions are txn-too-large)",
            budget,
            heap.describe(),
            partitions,
        )
    assembler = replace(config.assembler, max_txn_bytes=budget)
    source = config.source
    if source.debezium is not None:
        source = replace(source, debezium=replace(source.debezium, core=assembler))
    return replace(config, assembler=assembler, source=source)


def size_polls(
    config: AppConfig, partitions: int, heap: int, executors: int, heap_key: str
) -> AppConfig:
    """Polls of each partition's share of a batch where the heap holds them (app/source.py)."""
    from app.memory import KAFKA_FETCH_BYTES, POLL_FACTOR, held_poll_records
    from app.source import KAFKA_POLL_RECORDS, POLL_RECORDS_KEY, poll_records

    source = config.source
    if POLL_RECORDS_KEY in source.extra_options:
        return config
    share = poll_records(source.max_offsets_per_trigger, partitions)
    fetch_text = source.extra_options.get("kafka.max.partition.fetch.bytes", "")
    # A value that is not a number is Kafka's to refuse, by name, when the query starts.
    fetch = int(fetch_text) if fetch_text.isdigit() else KAFKA_FETCH_BYTES
    polls = held_poll_records(share, heap, executors, partitions, fetch)
    if polls < share:
        log.info(
            "%s=%d: %d partition(s) each holding a fetch of %d bytes between batches "
            "(~%.0fx as Java objects) do not fit in a tenth of %s=%d MiB; set "
            "source.options.%s to choose",
            POLL_RECORDS_KEY,
            KAFKA_POLL_RECORDS,
            partitions,
            fetch,
            POLL_FACTOR,
            heap_key,
            heap // 2**20,
            POLL_RECORDS_KEY,
        )
        return config
    log.info(
        "%s=%d: source.max-offsets-per-trigger=%d over %d partition(s), at least Kafka's %d "
        "(set source.options.%s to choose)",
        POLL_RECORDS_KEY,
        polls,
        source.max_offsets_per_trigger,
        partitions,
        KAFKA_POLL_RECORDS,
        POLL_RECORDS_KEY,
    )
    return replace(config, source=replace(source, poll_records=polls))


def _lookup(tree: object, dotted: str) -> str:
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return ""
        node = node[part]
    return str(node).lower() if isinstance(node, bool) else str(node)


def main(argv: list[str] | None = None) -> int:
    """Parse, validate (before Spark starts), run."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        configure_logging(log_level(args.log_level, os.environ))
        config = load_config(args.config, args.set, os.environ)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    if args.get:
        try:
            value = get_setting(config.raw, args.get)
        except ConfigError as e:
            print(f"config error: {e}", file=sys.stderr)
            return 2
        print(value)
        return 0
    if args.check_config:
        print("config ok")
        return 0
    try:
        return run(config, instrument=load_instrument(os.environ.get(INSTRUMENT_ENV, "")))
    except CdcError as e:
        log.error("pipeline stopped: %s", e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
