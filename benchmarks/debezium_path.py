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
   by the 100 ms poll interval. A consumer beside the pipeline notes when each transaction was
   whole in Kafka (its END marker and every data event it counts had arrived), which splits
   that latency into Debezium's part (BEGIN -> whole in Kafka) and the pipeline's (whole in
   Kafka -> visible: what issue 14's target 3 measures for the project's own envelope).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition

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
from devstack.stack import LatencySampler, LocalStack, percentiles, topic_end_offsets

#: The data topic whose rows carry ``updated_ts_ms`` (the transaction's BEGIN wall clock).
ORDERS_TOPIC = next(t for t in DATA_TOPICS if t.endswith(".orders"))


@dataclass
class _Arrival:
    """What has reached Kafka of one transaction."""

    seen: int = 0  # data events
    counted: int | None = None  # the events its END counts; None before the END
    last_ms: float = 0.0  # when the latest of them arrived


@dataclass
class KafkaArrivals:
    """When each transaction became whole in Kafka, seen by a consumer of every topic.

    Reads from the topics' ends at :meth:`start`. A transaction is whole once its END marker
    and all the data events it counts (``event_count``) have arrived: the earliest moment any
    reader could apply it. Times are this process's wall clock when ``poll`` returned the
    record, so they are late by at most one poll (``fetch.wait.max.ms`` 10).
    """

    bootstrap: str
    _txns: dict[str, _Arrival] = field(default_factory=dict)
    # (order_id, version) -> (txn id, updated_ts_ms) of each order version written
    versions: dict[tuple[int, int], tuple[str, float]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> KafkaArrivals:
        """Assign every topic at its end, then read in a daemon thread."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "cdc-bench-arrivals",  # assigned, never commits
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        consumer.assign(
            [
                TopicPartition(topic, 0, topic_end_offsets(self.bootstrap, topic, 1)[0])
                for topic in (*DATA_TOPICS, TRANSACTION_TOPIC)
            ]
        )
        self._thread = threading.Thread(
            target=self._run, args=(consumer,), daemon=True, name="kafka-arrivals"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reading."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self, consumer: Any) -> None:
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(500, 0.1):
                    if msg.error() is None and msg.value() is not None:
                        self._note(msg.topic(), msg.value(), time.time() * 1000)
        finally:
            consumer.close()

    def _note(self, topic: str, value: bytes, now_ms: float) -> None:
        doc = json.loads(value)
        if set(doc) == {"schema", "payload"}:  # JsonConverter with schemas.enable
            doc = doc["payload"]
        if topic == TRANSACTION_TOPIC:
            if doc.get("status") == "END":
                txn = self._txns.setdefault(_xid(doc["id"]), _Arrival())
                txn.counted, txn.last_ms = int(doc["event_count"]), now_ms
            return
        txn_id = _xid((doc.get("transaction") or {}).get("id"))
        txn = self._txns.setdefault(txn_id, _Arrival())
        txn.seen, txn.last_ms = txn.seen + 1, now_ms
        after = doc.get("after")
        if topic == ORDERS_TOPIC and after and after.get("updated_ts_ms") is not None:
            key = (int(after["order_id"]), int(after["version"]))
            self.versions[key] = (txn_id, float(after["updated_ts_ms"]))

    def whole_at(self, txn_id: str) -> float | None:
        """Epoch ms at which ``txn_id`` was whole in Kafka; ``None`` if it never was."""
        txn = self._txns.get(txn_id)
        if txn is None or txn.counted is None or txn.seen < txn.counted:
            return None
        return txn.last_ms


def _xid(txn_id: object) -> str:
    """PostgreSQL's transaction id: Debezium's ``id`` is ``xid:lsn``, and the LSN of a data
    event's ``transaction.id`` is not the one of its END marker (as ``assembler.debezium``
    keys them)."""
    return str(txn_id).split(":", 1)[0]


def split_latency(
    arrivals: KafkaArrivals, visible_ms: dict[tuple[int, int], float]
) -> dict[str, dict[str, float]]:
    """Percentiles of BEGIN -> whole in Kafka and of whole in Kafka -> visible, per version.

    Only order versions that were both whole in Kafka and seen in StarRocks count.
    """
    debezium: list[float] = []
    pipeline: list[float] = []
    for key, (txn_id, begin_ms) in arrivals.versions.items():
        whole_ms = arrivals.whole_at(txn_id)
        seen_ms = visible_ms.get(key)
        if whole_ms is None or seen_ms is None:
            continue
        debezium.append(whole_ms - begin_ms)
        pipeline.append(seen_ms - whole_ms)
    return {
        "begin_to_whole_in_kafka_ms": percentiles(debezium),
        "whole_in_kafka_to_visible_ms": percentiles(pipeline),
    }


def _pairs(settings: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict (exits naming the first malformed one)."""
    pairs: dict[str, str] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key:
            msg = f"--connector-set takes KEY=VALUE, got {item!r}"
            raise SystemExit(msg)
        pairs[key] = value
    return pairs


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
    connector = _pairs(args.connector_set)
    with LocalStack(workdir / "stack") as stack, PostgresServer(workdir / "pg") as pg:
        source = replace(prepare(stack, pg), extra=connector)
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
            arrivals = KafkaArrivals(stack.bootstrap).start()
            _say(f"steady phase: {args.rate} transactions/s for {args.seconds}s")
            writer = threading.Thread(
                target=workload.run, args=(int(args.rate * args.seconds), args.rate)
            )
            writer.start()
            writer.join(args.seconds * 3 + 120)
            equal = _wait_equal(pg_conn, sr_conn, args.timeout)
            sampler.stop()
            arrivals.stop()
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
        **split_latency(arrivals, sampler.visible_ms),
        "trigger_ms": args.trigger_ms,
        "connector_settings": connector,
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
    parser.add_argument(
        "--connector-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Debezium connector property (e.g. poll.interval.ms=100)",
    )
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
