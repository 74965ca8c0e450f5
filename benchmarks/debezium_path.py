"""The Debezium path's throughput and BEGIN->visible latency (issue 12's numbers; never a gate).

    .venv/bin/python -m benchmarks.debezium_path [--backlog 2000] [--rate 20] [--seconds 60]

PostgreSQL -> Kafka Connect + Debezium -> Apache Kafka -> ``spark-submit.sh`` with
``source.envelope=debezium`` -> StarRocks emulator, all local (``devstack``), the orders
workload of ``make demo-debezium`` (real multi-statement transactions over two tables):

1. **catch-up**: ``--backlog`` transactions are written and published by Debezium while the
   pipeline is down; then the pipeline starts and the clock runs until StarRocks equals
   PostgreSQL row by row. Reported from the ``query started`` line (Spark's start excluded)
   and from the process start.
2. **steady latency**: the pipeline keeps running while the workload writes ``--rate``
   transactions per second for ``--seconds``. BEGIN->visible is the first time an order
   version is seen in StarRocks minus ``updated_ts_ms`` (the wall clock when its source
   transaction began), so it includes Debezium's own capture delay; samples are upper bounds
   by the 100 ms poll interval.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from devstack.debezium import DebeziumConnect
from devstack.demo_debezium import (
    DATA_TOPICS,
    TRANSACTION_TOPIC,
    Workload,
    compare,
    prepare,
    start_pipeline,
)
from devstack.postgres import PostgresServer
from devstack.progress import fmt_duration
from devstack.stack import LatencySampler, LocalStack, topic_end_offsets


def _say(text: str) -> None:
    print(f"[debezium-bench] {text}", flush=True)


def _wait_published(bootstrap: str, transactions: int, timeout_s: float) -> float:
    """Seconds until the transaction topic holds BEGIN + END of ``transactions`` transactions."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if topic_end_offsets(bootstrap, TRANSACTION_TOPIC, 1)[0] >= 2 * transactions:
            return time.monotonic() - started
        time.sleep(0.5)
    msg = f"Debezium published fewer than {transactions} transactions in {timeout_s:.0f}s"
    raise RuntimeError(msg)


def _wait_equal(pg_conn: Any, sr_conn: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        want, got = compare(pg_conn, sr_conn)
        if want == got:
            return True
        time.sleep(0.25)
    return False


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both phases on one fresh local stack; the result as a dict."""
    workdir: Path = args.workdir
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    settings = [
        f"source.max-offsets-per-trigger={args.max_offsets}",
        f"starrocks.sink.buffer-flush.interval-ms={args.trigger_ms}",
    ]
    with LocalStack(workdir / "stack") as stack, PostgresServer(workdir / "pg") as pg:
        source = prepare(stack, pg)
        with DebeziumConnect(workdir / "connect", stack.bootstrap, source):
            workload = Workload(pg.handle.conninfo(), seed=7)
            _say(f"writing a backlog of {args.backlog} transactions into PostgreSQL")
            workload.run(args.backlog, rate=10_000)
            publish_s = _wait_published(stack.bootstrap, args.backlog, 600)
            data_records = sum(topic_end_offsets(stack.bootstrap, t, 1)[0] for t in DATA_TOPICS)
            _say(f"published: {data_records} data records, {publish_s:.1f}s after the last commit")

            pg_conn = psycopg.connect(pg.handle.conninfo(), autocommit=True)
            sr_conn = stack.connect()
            launched = time.monotonic()
            pipeline = start_pipeline(stack, workdir, "dbzbench", settings)
            query_started = time.monotonic()
            if not _wait_equal(pg_conn, sr_conn, args.timeout):
                pipeline.stop()
                msg = f"catch-up did not finish in {args.timeout}s; see {workdir}/pipeline.log"
                raise RuntimeError(msg)
            caught_up = time.monotonic()
            catch_up_s = caught_up - query_started
            _say(f"caught up in {fmt_duration(catch_up_s)} from query start")

            sampler = LatencySampler(stack.sql_settings()).start()
            _say(f"steady phase: {args.rate} transactions/s for {args.seconds}s")
            writer = threading.Thread(
                target=workload.run, args=(int(args.rate * args.seconds), args.rate)
            )
            writer.start()
            writer.join(args.seconds * 3 + 120)
            equal = _wait_equal(pg_conn, sr_conn, args.timeout)
            sampler.stop()
            pipeline.stop()
    return {
        "backlog_transactions": args.backlog,
        "backlog_data_records": data_records,
        "catch_up_s_from_query_start": round(catch_up_s, 1),
        "catch_up_s_from_launch": round(caught_up - launched, 1),
        "transactions_per_s": round(args.backlog / catch_up_s, 1),
        "data_records_per_s": round(data_records / catch_up_s, 1),
        "steady_rate_txn_per_s": args.rate,
        "steady_seconds": args.seconds,
        "steady_equal_at_end": equal,
        "begin_to_visible_ms_steady": sampler.percentiles(steady=True),
        "trigger_ms": args.trigger_ms,
        "max_offsets_per_trigger": args.max_offsets,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Run both phases and print the numbers (exit 1 only if the run itself failed)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.debezium_path", description=__doc__)
    parser.add_argument("--workdir", type=Path, default=Path("var/bench-debezium"))
    parser.add_argument("--backlog", type=int, default=2000, help="transactions, catch-up phase")
    parser.add_argument("--rate", type=float, default=20.0, help="transactions/s, steady phase")
    parser.add_argument("--seconds", type=int, default=60, help="length of the steady phase")
    parser.add_argument("--trigger-ms", type=int, default=1000)
    parser.add_argument("--max-offsets", type=int, default=200_000)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    try:
        result = run(args)
    except RuntimeError as e:
        print(f"debezium bench failed: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
