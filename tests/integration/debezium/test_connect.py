"""devstack.debezium: real Kafka Connect + Debezium Postgres against real Postgres and Kafka.

One multi-statement Postgres transaction (an order and two items) must appear as data events
on two topics, each with the transaction block, and as BEGIN/END on ``<prefix>.transaction``
with the right total and per-collection counts.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition

from devstack.debezium import DebeziumConnect, PostgresSource
from devstack.kafka import KafkaBroker
from devstack.postgres import PostgresServer
from tests.fixtures.kafka import ExternalBroker

pytestmark = pytest.mark.integration

DDL = (
    "CREATE TABLE orders (order_id bigint PRIMARY KEY, total numeric(12,2) NOT NULL, note text)",
    "CREATE TABLE order_items (order_id bigint, line int, qty int NOT NULL, "
    "PRIMARY KEY (order_id, line))",
)


def read_all(bootstrap: str, topics: list[str], want: int, timeout: float) -> list[Any]:
    """Every record of ``topics`` (partition 0, from offset 0) until ``want`` are read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"t-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(t, 0, 0) for t in topics])
        got: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(msg)
        return got
    finally:
        consumer.close()


@pytest.fixture
def debezium(
    kafka_broker: KafkaBroker | ExternalBroker, postgres_server: PostgresServer, tmp_path: Path
) -> Iterator[tuple[DebeziumConnect, PostgresSource]]:
    handle = postgres_server.handle
    with psycopg.connect(handle.conninfo(), autocommit=True) as conn:
        for statement in DDL:
            conn.execute(statement)
    source = PostgresSource(
        host=handle.host,
        port=handle.port,
        dbname="postgres",
        topic_prefix=f"dbz{uuid.uuid4().hex[:8]}",
        tables=("public.orders", "public.order_items"),
    )
    connect = DebeziumConnect(tmp_path / "connect", kafka_broker.bootstrap, source)
    connect.start()
    try:
        yield connect, source
    finally:
        connect.stop()


def test_a_transaction_over_two_tables_has_begin_end_and_counts(
    debezium: tuple[DebeziumConnect, PostgresSource],
    postgres_server: PostgresServer,
    kafka_broker: KafkaBroker | ExternalBroker,
) -> None:
    connect, source = debezium
    status = connect.handle.status()
    assert status["connector"]["state"] == "RUNNING"
    with psycopg.connect(postgres_server.handle.conninfo()) as conn:
        conn.execute("INSERT INTO orders VALUES (1, 12.50, 'first')")
        conn.execute("INSERT INTO order_items VALUES (1, 1, 2), (1, 2, 3)")
        conn.commit()

    orders = source.data_topic("public.orders")
    items = source.data_topic("public.order_items")
    records = read_all(
        kafka_broker.bootstrap, [source.transaction_topic, orders, items], want=5, timeout=60
    )
    by_topic: dict[str, list[Any]] = {}
    for msg in records:
        by_topic.setdefault(msg.topic(), []).append(json.loads(msg.value()))
    markers = by_topic[source.transaction_topic]
    assert [m["status"] for m in markers] == ["BEGIN", "END"]
    begin, end = markers
    # Debezium's Postgres id is "<xid>:<LSN of the event carrying it>": the LSN part differs
    # between BEGIN, every data event and END (PostgresTransactionMonitor.adjustTxId), only
    # the xid names the transaction. The assembler keys by it (docs/debezium.md).
    xid = begin["id"].split(":")[0]
    assert end["id"].split(":")[0] == xid
    assert begin["id"] != end["id"]
    assert end["event_count"] == 3
    assert sorted((c["data_collection"], c["event_count"]) for c in end["data_collections"]) == [
        ("public.order_items", 2),
        ("public.orders", 1),
    ]

    (order,) = by_topic[orders]
    assert order["op"] == "c"
    assert order["after"] == {"order_id": 1, "total": "12.50", "note": "first"}
    assert order["source"]["schema"] == "public"
    assert order["source"]["table"] == "orders"
    item_events = by_topic[items]
    assert [e["after"]["line"] for e in item_events] == [1, 2]
    for event in [order, *item_events]:
        assert event["transaction"]["id"] == f"{xid}:{event['source']['lsn']}"
        assert str(event["source"]["txId"]) == xid
    assert sorted(e["transaction"]["total_order"] for e in [order, *item_events]) == [1, 2, 3]
    assert [e["transaction"]["data_collection_order"] for e in item_events] == [1, 2]
