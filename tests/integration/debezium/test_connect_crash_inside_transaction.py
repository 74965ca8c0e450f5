"""Kafka Connect killed inside one large PostgreSQL transaction, real Debezium, real Kafka.

Debezium resumes after its last flushed offset, in the middle of the transaction: it writes
BEGIN again, numbers the rest of the events from 1 and counts only them in its END (Debezium
3.4). Numbering alone then looked complete while thousands of rows were missing. The assembler
must never emit such a transaction, in part or whole: every event of it goes to the dead-letter
output, and the transactions around it flow.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import KafkaException

from assembler.debezium import DebeziumAssembler, DebeziumSettings
from assembler.output import KIND_REJECT, KIND_ROW
from assembler.records import SourceRecord
from devstack.debezium import DebeziumConnect, PostgresSource
from devstack.demo_debezium import PG_DDL
from devstack.kafka import KafkaBroker
from devstack.postgres import PostgresServer
from devstack.stack import topic_end_offsets
from tests.fixtures.kafka import ExternalBroker
from tests.integration.debezium.test_connect import read_all

pytestmark = pytest.mark.integration

ITEMS = 20_000  # Connect writes them over several offset flushes (one a second)


def _end(bootstrap: str, topic: str) -> int:
    try:
        return topic_end_offsets(bootstrap, topic, 1)[0]
    except KafkaException:  # the topic does not exist yet
        return 0


def _wait(what: str, done: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_transaction_connect_died_inside_is_dead_lettered_whole_never_applied_in_part(
    kafka_broker: KafkaBroker | ExternalBroker, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    conninfo = postgres_server.handle.conninfo()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for statement in PG_DDL:
            conn.execute(statement)
    source = PostgresSource(
        host=postgres_server.handle.host,
        port=postgres_server.handle.port,
        dbname="postgres",
        topic_prefix=f"dbz{uuid.uuid4().hex[:8]}",
        tables=("public.orders", "public.order_items"),
    )
    bootstrap = kafka_broker.bootstrap
    markers, items = source.transaction_topic, source.data_topic("public.order_items")
    orders = source.data_topic("public.orders")
    with (
        DebeziumConnect(tmp_path / "connect", bootstrap, source) as connect,
        psycopg.connect(conninfo) as conn,
    ):
        conn.execute("INSERT INTO orders VALUES (1, 1, 1, 2.50, 1, 'new', 0)")
        conn.execute("INSERT INTO order_items VALUES (10, 1, 'p', 1, 2.50, 2.50, 1)")
        conn.commit()
        _wait("the small transaction's END", lambda: _end(bootstrap, markers) >= 2)
        # The items first, their order last: the last event is in another topic.
        conn.execute(
            "INSERT INTO order_items SELECT 100 + g, 2, 'p', 1, 2.50, 2.50, 1 "
            "FROM generate_series(1, %s) g",
            (ITEMS,),
        )
        conn.execute("INSERT INTO orders VALUES (2, 2, %s, %s, 1, 'new', 0)", (ITEMS, ITEMS * 2.5))
        conn.commit()
        _wait("a quarter of the items", lambda: _end(bootstrap, items) > 1 + ITEMS // 4)
        connect.handle.wait_for_offset_flush()  # a flush inside the transaction
        time.sleep(0.2)
        if _end(bootstrap, items) > ITEMS:
            pytest.fail(f"Connect wrote all {ITEMS} items before its kill: raise ITEMS")
        connect.kill()
        connect.start()
        conn.execute("INSERT INTO orders VALUES (3, 3, 1, 2.50, 1, 'new', 0)")
        conn.execute("INSERT INTO order_items VALUES (30, 3, 'p', 1, 2.50, 2.50, 1)")
        conn.commit()
        _wait("the last transaction's END", lambda: _end(bootstrap, orders) >= 3, 300)
        _wait("every marker", lambda: _end(bootstrap, markers) >= 7, 60)
    topics = [markers, orders, items]
    everything = sum(_end(bootstrap, t) for t in topics)
    records = [
        SourceRecord(m.topic(), 0, m.offset(), m.value(), m.key())
        for m in read_all(bootstrap, topics, want=everything, timeout=120)
    ]
    assert len(records) == everything

    docs = [json.loads(r.value or b"{}") for r in records if r.topic == markers]
    big_xid = next(d["id"].split(":")[0] for d in docs if (d.get("event_count") or 0) > 2)
    statuses = [d["status"] for d in docs if d["id"].startswith(f"{big_xid}:")]
    end = next(d for d in docs if d["id"].startswith(f"{big_xid}:") and d["status"] == "END")
    # What Debezium did (the premise of this test): BEGIN again, and an END that counts only
    # what it wrote after the restart.
    assert statuses == ["BEGIN", "BEGIN", "END"]
    assert end["event_count"] < ITEMS + 1

    settings = DebeziumSettings(transaction_topic=markers, database="demo")
    asm = DebeziumAssembler(settings)
    out = []
    state = None
    # Calls of 5,000 records in Kafka's order per topic, the topics' records interleaved: the
    # big transaction's END comes before most of its data events.
    by_topic = {t: [r for r in records if r.topic == t] for t in (markers, orders, items)}
    for start in range(0, len(by_topic[items]) + 5_000, 5_000):
        call = [r for rs in by_topic.values() for r in rs if start <= r.offset < start + 5_000]
        step = asm.process(state, call, 0)
        out += step.outputs
        state = step.state
    applied = Counter(r.txn_id for r in out if r.kind == KIND_ROW)
    rejected = [r for r in out if r.kind == KIND_REJECT]
    assert big_xid not in applied
    assert sorted(applied.values()) == [2, 2]  # the transactions before and after
    assert {r.txn_id for r in rejected} == {big_xid}
    assert all(r.reason.startswith("restarted-mid-transaction:") for r in rejected)
    # Every data event of both writes and the END: nothing of it is lost.
    big_records = [
        r
        for r in records
        if r.topic != markers and f'"id":"{big_xid}:'.encode() in (r.value or b"")
    ]
    assert len(rejected) == len(big_records) + 1
