"""PostgreSQL -> Debezium -> Kafka -> pipeline (source.envelope=debezium) -> StarRocks emulator.

The orders workload runs in Postgres as real multi-statement transactions (an order with its
items, an order updated with all its items, an order deleted with its items); the verifier
watches the emulator's invariants throughout; the pipeline is killed with SIGKILL mid-run and
restarted; at the end the emulator must equal Postgres' own final state, row by row.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from devstack.debezium import DebeziumConnect, PostgresSource
from devstack.kafka.admin import create_topic
from devstack.pipeline_process import PipelineProcess
from devstack.postgres import PostgresServer
from devstack.stack import LOCAL_CONFIG, LocalStack
from tests.e2e.test_pipeline import Watcher

pytestmark = pytest.mark.e2e

NAME = "e2edbz"
PREFIX = "shop"
TABLES = ("public.orders", "public.order_items")
DATA_TOPICS = [f"{PREFIX}.{t}" for t in TABLES]
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
ORDER_COLUMNS = "order_id, customer_id, item_count, total_amount, version, order_status"
ITEM_COLUMNS = "item_id, order_id, product_name, quantity, price, amount, version"


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[tuple[LocalStack, PostgresServer]]:
    with LocalStack(tmp_path / "stack") as stack, PostgresServer(tmp_path / "pg") as pg:
        stack.apply_ddl()
        with psycopg.connect(pg.handle.conninfo(), autocommit=True) as conn:
            for statement in PG_DDL:
                conn.execute(statement)
        for topic in [*DATA_TOPICS, f"{PREFIX}.transaction"]:
            create_topic(stack.bootstrap, topic, 1)
        source = PostgresSource(
            host=pg.handle.host,
            port=pg.handle.port,
            dbname="postgres",
            topic_prefix=PREFIX,
            tables=TABLES,
        )
        with DebeziumConnect(tmp_path / "connect", stack.bootstrap, source):
            yield stack, pg


class Workload:
    """Orders in Postgres, one source transaction per business operation."""

    def __init__(self, conninfo: str, seed: int) -> None:
        self.conn = psycopg.connect(conninfo)
        self.rng = random.Random(seed)
        self.live: dict[int, int] = {}  # order_id -> version
        self.next_id = 1
        self.transactions = 0

    def create(self) -> None:
        oid = self.next_id
        self.next_id += 1
        n = self.rng.randint(1, 4)
        items = [
            (oid * 10 + j, oid, f"p{j}", self.rng.randint(1, 5), Decimal("2.50")) for j in range(n)
        ]
        total = sum(q * p for *_, q, p in items)
        self.conn.execute(
            "INSERT INTO orders VALUES (%s, %s, %s, %s, 1, 'new', %s)",
            (oid, oid % 7, n, total, int(time.time() * 1000)),
        )
        for item_id, order_id, name, q, p in items:
            self.conn.execute(
                "INSERT INTO order_items VALUES (%s, %s, %s, %s, %s, %s, 1)",
                (item_id, order_id, name, q, p, q * p),
            )
        self.conn.commit()
        self.live[oid] = 1

    def update(self) -> None:
        oid = self.rng.choice(sorted(self.live))
        version = self.live[oid] + 1
        self.conn.execute(
            "UPDATE order_items SET quantity = quantity + 1, amount = (quantity + 1) * price, "
            "version = %s WHERE order_id = %s",
            (version, oid),
        )
        self.conn.execute(
            "UPDATE orders SET version = %s, order_status = 'updated', total_amount = "
            "(SELECT sum(amount) FROM order_items WHERE order_id = %s) WHERE order_id = %s",
            (version, oid, oid),
        )
        self.conn.commit()
        self.live[oid] = version

    def delete(self) -> None:
        oid = self.rng.choice(sorted(self.live))
        self.conn.execute("DELETE FROM order_items WHERE order_id = %s", (oid,))
        self.conn.execute("DELETE FROM orders WHERE order_id = %s", (oid,))
        self.conn.commit()
        del self.live[oid]

    def run(self, count: int, rate: float) -> None:
        for _ in range(count):
            roll = self.rng.random()
            if len(self.live) < 3 or roll < 0.5:
                self.create()
            elif roll < 0.85:
                self.update()
            else:
                self.delete()
            self.transactions += 1
            time.sleep(1 / rate)


def rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


def snapshot(pg: Any, sr: Any) -> tuple[list[Any], list[Any]]:
    order_sql = f"SELECT {ORDER_COLUMNS} FROM %s ORDER BY order_id"
    item_sql = f"SELECT {ITEM_COLUMNS} FROM %s ORDER BY item_id"
    want = rows(pg, order_sql % "orders") + rows(pg, item_sql % "order_items")
    got = rows(sr, order_sql % "demo.orders") + rows(sr, item_sql % "demo.order_items")
    return want, got


def start_pipeline(stack: LocalStack, tmp_path: Path) -> PipelineProcess:
    overrides = stack.pipeline_overrides(",".join(DATA_TOPICS), tmp_path / "checkpoint", NAME)
    extra = [
        "source.envelope=debezium",
        f"source.debezium.transaction-topic={PREFIX}.transaction",
        "source.max-offsets-per-trigger=60",
        "starrocks.sink.buffer-flush.interval-ms=500",
    ]
    proc = PipelineProcess(LOCAL_CONFIG, [*overrides, *extra], tmp_path / "pipeline.log")
    proc.start()
    assert proc.wait_for_line("query started", 300), (tmp_path / "pipeline.log").read_text()[-3000:]
    return proc


def test_postgres_transactions_exactly_once_through_a_kill(
    chain: tuple[LocalStack, PostgresServer], tmp_path: Path
) -> None:
    stack, pg = chain
    workload = Workload(pg.handle.conninfo(), seed=12)
    first = threading.Thread(target=workload.run, args=(60, 10.0))
    first.start()
    pipeline = start_pipeline(stack, tmp_path)
    watcher = Watcher(stack)
    assert pipeline.wait_for_line("batch      2", 300), (tmp_path / "pipeline.log").read_text()[
        -3000:
    ]
    pipeline.kill()
    first.join(120)
    second = threading.Thread(target=workload.run, args=(60, 10.0))
    second.start()
    pipeline = start_pipeline(stack, tmp_path)
    second.join(120)
    pg_conn = psycopg.connect(pg.handle.conninfo(), autocommit=True)
    sr_conn = stack.connect()
    deadline = time.monotonic() + 300
    want, got = snapshot(pg_conn, sr_conn)
    while got != want and time.monotonic() < deadline:
        time.sleep(1)
        want, got = snapshot(pg_conn, sr_conn)
    pipeline.stop()
    report = watcher.stop()
    missing = [r for r in want if r not in got]
    extra = [r for r in got if r not in want]
    print(f"transactions={workload.transactions} rows={len(want)} checks={report.checks}")
    assert (missing, extra) == ([], [])
    assert len(want) > 50
    assert report.checks > 10
    assert report.checks_with_violations == 0, report.to_dict()
    assert (tmp_path / "pipeline.log").read_text().count("query started") == 2
