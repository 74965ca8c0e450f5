"""Entry point: ``spark-submit app/main.py --config conf/<name>.yaml [--set key=value ...]``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

if __package__ in (None, ""):
    # spark-submit runs this file as a script: make the project's packages importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.config import AppConfig, CrashPoint, load_config
from common.errors import CdcError, ConfigError

if TYPE_CHECKING:
    from app.progress import ProgressReporter

log = logging.getLogger("app")


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
    parser.add_argument("--log-level", default=os.environ.get("CDC_LOG_LEVEL", "INFO"))
    parser.add_argument(
        "--check-config", action="store_true", help="validate the settings and exit"
    )
    parser.add_argument(
        "--get", metavar="KEY", help="print one resolved setting (e.g. source.format) and exit"
    )
    return parser.parse_args(argv)


def configure_logging(level: str) -> None:
    """Structured key=value lines on stderr; the progress line goes to stdout."""
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s level=%(levelname)s logger=%(name)s %(message)s",
        stream=sys.stderr,
    )
    # py4j logs every gateway call at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)


def run(config: AppConfig) -> int:
    """Start Spark, validate the sink, run the query until it ends or is stopped."""
    from app.pipeline import detach_listeners, query_id_of, start_query
    from app.preflight import check_kafka
    from app.progress import ProgressReporter
    from app.session import build_session
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
        fault_hook=crash_hook(config.crash_at, reporter) if config.crash_at else None,
    )
    sink.open()
    spark = build_session(config)
    spark.sparkContext.setLogLevel("WARN")
    query = start_query(spark, config, sink, reporter)
    log.info(
        "query started name=%s id=%s checkpoint=%s",
        config.pipeline.name,
        query.id,
        config.pipeline.checkpoint_location,
    )

    stop_requested = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        # Only set a flag: the main thread is inside a py4j call, and calling into the JVM
        # from a signal handler re-enters that call's socket.
        log.info("stop requested signal=%s", signum)
        stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    from pyspark.errors import StreamingQueryException

    try:
        while not query.awaitTermination(1):
            if stop_requested.is_set():
                # A batch interrupted here is replayed on the next start; the sink's label
                # check keeps it exactly once. Its interrupted Spark call would otherwise
                # log a Java stack through py4j: a requested stop is not an error.
                logging.getLogger("py4j").setLevel(logging.CRITICAL)
                query.stop()
                break
    except StreamingQueryException:
        pass  # reported below, from query.exception(), in one line
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

        source = config.source
        earliest = kafka_earliest(source.bootstrap_servers, dict(source.extra_options))
        log.error("query failed: %s", explain_query_failure(str(error), earliest))
        log.debug("query failure, in full: %s", error)
        return 1
    return 0


def crash_hook(crash: CrashPoint, reporter: ProgressReporter) -> Callable[[str], None]:
    """TEST ONLY (``testing.crash-at``): kill -9 the whole driver at a sink protocol point."""

    def hook(point: str) -> None:
        batch = reporter.current_batch
        if point == crash.point and batch is not None and batch >= crash.from_batch:
            log.warning("testing.crash-at: killing the driver point=%s batch_id=%s", point, batch)
            logging.shutdown()
            if crash.marker:
                _append_synced(crash.marker, f"{point} {batch}\n")
            # spark-submit's JVM is our parent: take it down too, with no cleanup anywhere.
            os.kill(os.getppid(), signal.SIGKILL)
            os._exit(137)

    return hook


def _append_synced(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


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
    configure_logging(args.log_level)
    try:
        config = load_config(args.config, args.set, os.environ)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    if args.get:
        print(_lookup(config.raw, args.get))
        return 0
    if args.check_config:
        print("config ok")
        return 0
    try:
        return run(config)
    except CdcError as e:
        log.error("pipeline stopped: %s", e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
