"""``make demo-debezium``: PostgreSQL -> Debezium -> Kafka -> pipeline -> StarRocks emulator.

The orders workload runs in PostgreSQL as real multi-statement transactions (an order with its
items; an order updated together with all its items; an order deleted with its items). Kafka
Connect + Debezium publish them; the pipeline runs with ``source.envelope=debezium``; the
verifier watches the emulator's invariants the whole time; the pipeline is killed with SIGKILL
after its second batch and restarted while the workload goes on; later PostgreSQL crashes
(SIGKILL to every server process, then a restart that replays its WAL) under the workload, and
Debezium reconnects on its own; last Kafka Connect is killed with SIGKILL between two offset
flushes and restarted, so that it re-sends transactions the pipeline has already applied. At
the end the emulator must equal PostgreSQL's own final state, row by row. Prints the result,
the throughput and the BEGIN->visible latency (``updated_ts_ms`` is the wall-clock time at the
transaction's start), apart for the transactions the running pipeline applied and for those
that waited out each fault, and how many transactions Connect re-sent; exits 0 only with
0 missing, 0 extra, 0 dead letters, 0 partial-visibility observations, and as many rows loaded
into StarRocks' visible transactions as PostgreSQL's committed transactions changed (each
exactly once, the re-sent ones too).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition

from demo.deadletters import dead_letters
from demo.verify import watch
from devstack.debezium import DebeziumConnect, PostgresSource
from devstack.kafka.admin import create_topic
from devstack.pipeline_process import PipelineProcess
from devstack.postgres import PostgresServer
from devstack.progress import wait_with_progress
from devstack.stack import (
    LOCAL_CONFIG,
    LatencySampler,
    LocalStack,
    split_by_outages,
    topic_end_offsets,
)

PREFIX = "shop"
TABLES = ("public.orders", "public.order_items")
DATA_TOPICS = tuple(f"{PREFIX}.{t}" for t in TABLES)
TRANSACTION_TOPIC = f"{PREFIX}.transaction"
#: Connect flushes its offsets every second (``worker_properties``); killed this long after a
#: flush, it has produced records whose offsets it never flushed, and re-sends them.
CONNECT_KILL_AFTER_FLUSH_S = 0.6
#: How long PostgreSQL stays down after its crash (the workload keeps trying meanwhile).
POSTGRES_DOWN_S = 1.0
#: The same columns as ``demo/sql/orders.sql`` (StarRocks), so rows load by name.
PG_DDL = (
    """CREATE TABLE orders (
        order_id bigint PRIMARY KEY, customer_id bigint NOT NULL, item_count int NOT NULL,
        total_amount numeric(12,2) NOT NULL, version bigint NOT NULL, order_status varchar(32),
        updated_ts_ms bigint)""",
    """CREATE TABLE order_items (
        item_id bigint PRIMARY KEY, order_id bigint NOT NULL, product_name varchar(128),
        quantity int NOT NULL, price numeric(10,2) NOT NULL, amount numeric(12,2) NOT NULL,
        version bigint NOT NULL)""",
)
_ORDER_SQL = (
    "SELECT order_id, customer_id, item_count, total_amount, version, order_status, "
    "updated_ts_ms FROM {} ORDER BY order_id"
)
_ITEM_SQL = (
    "SELECT item_id, order_id, product_name, quantity, price, amount, version "
    "FROM {} ORDER BY item_id"
)


@dataclass(frozen=True)
class Change:
    """One business operation as one PostgreSQL transaction, and what it leaves behind."""

    statements: tuple[tuple[str, tuple[Any, ...]], ...]
    order_id: int
    version: int | None  # the order's version after it; None: deleted
    rows: int  # rows it inserts, updates or deletes: one Debezium event each
    items: int  # the order's items


class Workload:
    """Orders in PostgreSQL, one source transaction per business operation.

    Every transaction keeps the demo invariants (item_count, total_amount = sum(amount),
    one version per order and its items), so any partial transaction in the sink shows.
    PostgreSQL may crash under it: a transaction the crash cut is looked up once the server is
    back (its order's version tells whether it committed), and counted only if it did.
    """

    def __init__(self, conninfo: str, seed: int) -> None:
        self.conninfo = conninfo
        self.conn = psycopg.connect(conninfo)
        self.rng = random.Random(seed)
        self.live: dict[int, tuple[int, int]] = {}  # order_id -> (version, items)
        self.next_id = 1
        self.transactions = 0  # committed
        self.row_changes = 0  # rows inserted, updated or deleted: one Debezium event each
        self.cut = 0  # transactions a lost connection interrupted
        self.cut_committed = 0  # of those, the ones that committed all the same
        #: Called once, by the next transaction, between its last statement and its COMMIT.
        self.before_commit: Callable[[], None] | None = None

    def create(self) -> Change:
        """One order with 1-4 items."""
        oid, began = self.next_id, int(time.time() * 1000)
        self.next_id += 1
        n = self.rng.randint(1, 4)
        items = [(oid * 10 + j, self.rng.randint(1, 5), Decimal("2.50")) for j in range(n)]
        total = sum(q * p for _, q, p in items)
        statements: list[tuple[str, tuple[Any, ...]]] = [
            (
                "INSERT INTO orders VALUES (%s, %s, %s, %s, 1, 'new', %s)",
                (oid, oid % 7, n, total, began),
            )
        ]
        statements += [
            (
                "INSERT INTO order_items VALUES (%s, %s, %s, %s, %s, %s, 1)",
                (item_id, oid, f"p{item_id % 10}", q, p, q * p),
            )
            for item_id, q, p in items
        ]
        return Change(tuple(statements), oid, 1, 1 + n, n)

    def update(self) -> Change:
        """An order and all its items to the next version."""
        oid, began = self.rng.choice(sorted(self.live)), int(time.time() * 1000)
        version, n = self.live[oid][0] + 1, self.live[oid][1]
        statements = (
            (
                "UPDATE order_items SET quantity = quantity + 1, amount = (quantity + 1) * price, "
                "version = %s WHERE order_id = %s",
                (version, oid),
            ),
            (
                "UPDATE orders SET version = %s, order_status = 'updated', updated_ts_ms = %s, "
                "total_amount = (SELECT sum(amount) FROM order_items WHERE order_id = %s) "
                "WHERE order_id = %s",
                (version, began, oid, oid),
            ),
        )
        return Change(statements, oid, version, 1 + n, n)

    def delete(self) -> Change:
        """An order and its items."""
        oid = self.rng.choice(sorted(self.live))
        n = self.live[oid][1]
        statements = (
            ("DELETE FROM order_items WHERE order_id = %s", (oid,)),
            ("DELETE FROM orders WHERE order_id = %s", (oid,)),
        )
        return Change(statements, oid, None, 1 + n, n)

    def apply(self, change: Change) -> None:
        """Run ``change`` as one transaction; through a crash, count it only if it committed."""
        try:
            for sql, params in change.statements:
                self.conn.execute(sql, params)
            hook, self.before_commit = self.before_commit, None
            if hook is not None:
                hook()
            self.conn.commit()
        except psycopg.OperationalError:
            self.cut += 1
            self._reconnect()
            found = self.conn.execute(
                "SELECT version FROM orders WHERE order_id = %s", (change.order_id,)
            ).fetchone()
            self.conn.commit()
            if (found[0] if found else None) != change.version:
                return  # rolled back by the crash: PostgreSQL never streams it
            self.cut_committed += 1
        if change.version is None:
            del self.live[change.order_id]
        else:
            self.live[change.order_id] = (change.version, change.items)
        self.transactions += 1
        self.row_changes += change.rows

    def _reconnect(self, timeout_s: float = 120.0) -> None:
        """A new connection once PostgreSQL accepts again (an application's retry)."""
        self.conn.close()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.conn = psycopg.connect(self.conninfo)
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def run(self, count: int, rate: float) -> None:
        """``count`` operations at about ``rate``/s: 50 % new, 35 % update, 15 % delete."""
        for _ in range(count):
            roll = self.rng.random()
            if len(self.live) < 3 or roll < 0.5:
                self.apply(self.create())
            elif roll < 0.85:
                self.apply(self.update())
            else:
                self.apply(self.delete())
            time.sleep(1 / rate)


def _rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


def compare(pg: Any, sr: Any, database: str = "demo") -> tuple[list[Any], list[Any]]:
    """(PostgreSQL's rows, StarRocks' rows) of both tables, in key order."""
    want = _rows(pg, _ORDER_SQL.format("orders")) + _rows(pg, _ITEM_SQL.format("order_items"))
    got = _rows(sr, _ORDER_SQL.format(f"{database}.orders")) + _rows(
        sr, _ITEM_SQL.format(f"{database}.order_items")
    )
    return want, got


def prepare(stack: LocalStack, pg: PostgresServer) -> PostgresSource:
    """Tables on both sides, the topics, and the connector's source description."""
    stack.apply_ddl()
    with psycopg.connect(pg.handle.conninfo(), autocommit=True) as conn:
        for statement in PG_DDL:
            conn.execute(statement)
    for topic in (*DATA_TOPICS, TRANSACTION_TOPIC):
        create_topic(stack.bootstrap, topic, 1)
    return PostgresSource(
        host=pg.handle.host,
        port=pg.handle.port,
        dbname="postgres",
        topic_prefix=PREFIX,
        tables=TABLES,
    )


def start_pipeline(
    stack: LocalStack, workdir: Path, name: str, settings: Sequence[str] = ()
) -> PipelineProcess:
    """``spark-submit.sh`` with the Debezium envelope, pointed at this stack.

    ``settings`` (``key=value``) come last, so they override the demo's own.
    """
    overrides = stack.pipeline_overrides(",".join(DATA_TOPICS), workdir / "checkpoint", name)
    extra = [
        "source.envelope=debezium",
        f"source.debezium.transaction-topic={TRANSACTION_TOPIC}",
        "source.max-offsets-per-trigger=60",
        "starrocks.sink.buffer-flush.interval-ms=500",
        *settings,
    ]
    proc = PipelineProcess(LOCAL_CONFIG, [*overrides, *extra], workdir / "pipeline.log")
    proc.start()
    if not proc.wait_for_line("query started", 300):
        proc.kill()
        msg = f"pipeline did not start; see {workdir / 'pipeline.log'}"
        raise RuntimeError(msg)
    return proc


def crash_postgres(
    pg: PostgresServer, workload: Workload, count: int, rate: float
) -> tuple[float, float]:
    """``count`` operations of the workload with PostgreSQL crashed halfway through them.

    The crash comes inside a transaction, its rows written and its COMMIT not yet sent: every
    server process gets SIGKILL at once. ``POSTGRES_DOWN_S`` later the server starts again on
    its data dir and replays its WAL, where that transaction's rows are and its commit is not.
    The workload reconnects and finds it rolled back; Debezium's replication connection broke
    too, and the connector retries on its own. Returns when the server was killed and when it
    accepted again, epoch ms.
    """
    crashed = threading.Event()

    def crash() -> None:
        pg.kill()
        crashed.set()

    operations = threading.Thread(target=workload.run, args=(count, rate))
    operations.start()
    time.sleep(count / rate / 2)
    workload.before_commit = crash
    if not crashed.wait(60):
        msg = "the workload ran no transaction to crash PostgreSQL in"
        raise RuntimeError(msg)
    down_ms = time.time() * 1000
    time.sleep(POSTGRES_DOWN_S)
    pg.start()
    up_ms = time.time() * 1000
    operations.join(600)
    return down_ms, up_ms


def crash_connect(connect: DebeziumConnect, bootstrap: str) -> tuple[float, float]:
    """SIGKILL Kafka Connect between two offset flushes, then start it again.

    First Connect must be producing the running workload's transactions: after an idle spell
    its next flush may hold everything it produced, and a kill then would leave nothing to
    re-send. The restarted worker resumes from its last flushed offsets and re-sends what it
    produced after them (Connect is at-least-once). Returns when it was killed and when it ran
    again, epoch ms.
    """
    produced = topic_end_offsets(bootstrap, TRANSACTION_TOPIC, 1)[0]
    deadline = time.monotonic() + 60
    while topic_end_offsets(bootstrap, TRANSACTION_TOPIC, 1)[0] == produced:
        if time.monotonic() > deadline:
            msg = f"Kafka Connect produced nothing to {TRANSACTION_TOPIC} in 60 s"
            raise RuntimeError(msg)
        time.sleep(0.1)
    connect.handle.wait_for_offset_flush()
    time.sleep(CONNECT_KILL_AFTER_FLUSH_S)
    connect.kill()
    down_ms = time.time() * 1000
    connect.start()
    return down_ms, time.time() * 1000


def re_sent_transactions(bootstrap: str) -> int:
    """PostgreSQL transactions whose END is on the transaction topic more than once.

    Debezium's PostgreSQL id is ``<xid>:<LSN of the record>`` (docs/debezium.md), so a
    transaction is its xid.
    """
    end = topic_end_offsets(bootstrap, TRANSACTION_TOPIC, 1)[0]
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "demo-re-sent", "enable.auto.commit": False}
    )
    ends: Counter[str] = Counter()
    try:
        consumer.assign([TopicPartition(TRANSACTION_TOPIC, 0, 0)])
        read, deadline = 0, time.monotonic() + 60
        while read < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            read += 1
            marker = json.loads(msg.value() or b"{}")
            if marker.get("status") == "END":
                ends[str(marker["id"]).split(":")[0]] += 1
    finally:
        consumer.close()
    return sum(1 for n in ends.values() if n > 1)


def run_demo(workdir: Path, transactions: int, rate: float, seed: int = 12) -> dict[str, Any]:
    """Run the whole demo once (all three faults included); return the result as a dict.

    ``workdir`` is emptied first: PostgreSQL, Kafka and the checkpoint start fresh.
    """
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    with LocalStack(workdir / "stack") as stack, PostgresServer(workdir / "pg") as pg:
        source = prepare(stack, pg)
        with DebeziumConnect(workdir / "connect", stack.bootstrap, source) as connect:
            workload = Workload(pg.handle.conninfo(), seed)
            # A fifth while the pipeline starts, a fifth while it is down and restarts, a fifth
            # once it has caught up, a fifth with PostgreSQL's crash in it, the rest with
            # Connect's: the latency of each shows apart.
            part = transactions // 5
            first = threading.Thread(target=workload.run, args=(part, rate))
            started = time.monotonic()
            first.start()
            pipeline = start_pipeline(stack, workdir, "dbzdemo")
            stop = threading.Event()
            reports: list[Any] = []
            watch_conn = stack.connect()
            watcher = threading.Thread(
                target=lambda: reports.append(
                    watch(watch_conn, 3600, interval_s=0.1, stop_event=stop)
                ),
                daemon=True,
            )
            watcher.start()
            sampler = LatencySampler(stack.sql_settings()).start()
            if not pipeline.wait_for_line("batch      2", 300):
                msg = f"no progress before the kill; see {workdir / 'pipeline.log'}"
                raise RuntimeError(msg)
            pipeline.kill()
            killed_ms = time.time() * 1000
            first.join(600)
            second = threading.Thread(target=workload.run, args=(part, rate))
            second.start()
            pipeline = start_pipeline(stack, workdir, "dbzdemo")
            second.join(600)
            sr_conn = stack.connect()
            state: dict[str, Any] = {}

            def matching() -> tuple[int, int]:
                """Rows StarRocks has exactly as PostgreSQL does, of PostgreSQL's rows."""
                # A connection per look: PostgreSQL's crash breaks any kept one.
                with psycopg.connect(pg.handle.conninfo(), autocommit=True) as pg_conn:
                    want, got = state["want"], state["got"] = compare(pg_conn, sr_conn)
                if got == want:
                    return len(want), len(want)
                return min(len(set(got) & set(want)), len(want) - 1), len(want)

            wait_with_progress("caught up after the restart", matching, 600, every_s=5.0)
            back_ms = time.time() * 1000
            workload.run(part, rate)
            pg_down_ms, pg_up_ms = crash_postgres(pg, workload, part, rate)
            wait_with_progress("caught up after PostgreSQL's crash", matching, 600, every_s=5.0)
            pg_back_ms = time.time() * 1000
            last = threading.Thread(target=workload.run, args=(transactions - 4 * part, rate))
            last.start()
            connect_down_ms, connect_up_ms = crash_connect(connect, stack.bootstrap)
            last.join(600)
            produced_s = time.monotonic() - started
            wait_with_progress("rows equal to PostgreSQL", matching, 600, every_s=5.0)
            equal_ms = time.time() * 1000
            want, got = state["want"], state["got"]
            caught_up_s = time.monotonic() - started
            sampler.stop()
            pipeline.stop()
            stop.set()
            watcher.join(30)
            report = reports[0] if reports else None
            re_sent = re_sent_transactions(stack.bootstrap)
            applied = stack.rows_loaded("demo", ("orders", "order_items"))
            dead_lettered = dead_letters(sr_conn).records
    split = split_by_outages(
        sampler.samples,
        {
            "kill": (killed_ms, back_ms),
            "postgres": (pg_down_ms, pg_back_ms),
            "connect": (connect_down_ms, equal_ms),
        },
    )
    missing = [r for r in want if r not in got]
    extra = [r for r in got if r not in want]
    return {
        "transactions": workload.transactions,
        "rows_in_postgres": len(want),
        "missing": len(missing),
        "extra": len(extra),
        "examples": [str(r) for r in (missing + extra)[:5]],
        # Each row change once: a re-sent transaction applied again would count twice.
        "row_changes_in_postgres": workload.row_changes,
        "rows_applied_in_starrocks": applied,
        "dead_letter_records": dead_lettered,
        "watch_checks": report.checks if report else 0,
        "partial_visibility_observations": report.checks_with_violations if report else -1,
        "kill_9": 1,
        "postgres_kill_9": 1,
        "postgres_down_s": round((pg_up_ms - pg_down_ms) / 1000, 1),
        # Cut by the crash mid-transaction; those that committed all the same count above.
        "transactions_cut_by_postgres_crash": workload.cut,
        "of_which_committed": workload.cut_committed,
        "postgres_crash_to_caught_up_s": round((pg_back_ms - pg_down_ms) / 1000, 1),
        "connect_kill_9": 1,
        "connect_down_s": round((connect_up_ms - connect_down_ms) / 1000, 1),
        "transactions_re_sent_by_connect": re_sent,
        "seconds_producing": round(produced_s, 1),
        "seconds_until_equal": round(caught_up_s, 1),
        "transactions_per_s_end_to_end": round(workload.transactions / caught_up_s, 2),
        # The run's latency is mostly the kill: the transactions that waited out the restart
        # and the catch-up are reported apart from those the running pipeline applied.
        "kill_to_caught_up_s": round((back_ms - killed_ms) / 1000, 1),
        "begin_to_visible_ms": _rounded(sampler.percentiles()),
        "begin_to_visible_ms_running": _rounded(split["running"]),
        "begin_to_visible_ms_across_the_kill": _rounded(split["kill"]),
        "begin_to_visible_ms_across_postgres_crash": _rounded(split["postgres"]),
        # Produced before the end and seen after Connect's kill: those it delayed, and the
        # rest of the last fifth.
        "begin_to_visible_ms_from_connects_kill": _rounded(split["connect"]),
    }


def _rounded(stats: dict[str, float]) -> dict[str, float]:
    """Percentiles to the millisecond (the sampler's poll is 100 ms)."""
    return {k: round(v) for k, v in stats.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the demo; exit 0 only if StarRocks ended equal to PostgreSQL, exactly once."""
    parser = argparse.ArgumentParser(prog="python -m devstack.demo_debezium", description=__doc__)
    parser.add_argument("--workdir", type=Path, default=Path("var/demo-debezium"))
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--rate", type=float, default=10.0, help="transactions per second")
    parser.add_argument("--seed", type=int, default=12, help="the workload's random choices")
    args = parser.parse_args(argv)
    result = run_demo(args.workdir, args.transactions, args.rate, args.seed)
    print(json.dumps(result, indent=2))
    ok = (
        result["missing"] == 0
        and result["extra"] == 0
        and result["partial_visibility_observations"] == 0
        and result["watch_checks"] > 0
        and result["rows_applied_in_starrocks"] == result["row_changes_in_postgres"]
        and result["dead_letter_records"] == 0
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
