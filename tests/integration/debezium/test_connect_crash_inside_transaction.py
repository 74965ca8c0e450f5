"""Kafka Connect killed inside one large PostgreSQL transaction, real Debezium, real Kafka.

Debezium resumes after its last flushed offset, in the middle of the transaction: it writes
BEGIN again, numbers the rest of the events from 1 and counts only them in its END (Debezium
3.4). Numbering alone then looked complete while thousands of rows were missing. The first
write also got events past the flushed one out before the kill, so the two writes overlap:
the assembler must rebuild the transaction from both, by LSN, and apply it whole and once,
with the transactions around it flowing.
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

ITEMS = 30_000  # Connect writes them over several offset flushes (one a second)


def _end(bootstrap: str, topic: str) -> int:
    try:
        return topic_end_offsets(bootstrap, topic, 1)[0]
    except KafkaException:  # the topic does not exist yet
        return 0


def _small_ends(bootstrap: str, topic: str) -> int:
    """ENDs of two-event transactions on the transaction topic (the first and the last)."""
    docs = [json.loads(m.value()) for m in read_all(bootstrap, [topic], _end(bootstrap, topic), 5)]
    return sum(d["status"] == "END" and d["event_count"] == 2 for d in docs)


def _wait(what: str, done: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_transaction_connect_died_inside_is_rebuilt_and_applied_whole_once(
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
        connect.kill()
        connect.start()
        conn.execute("INSERT INTO orders VALUES (3, 3, 1, 2.50, 1, 'new', 0)")
        conn.execute("INSERT INTO order_items VALUES (30, 3, 'p', 1, 2.50, 2.50, 1)")
        conn.commit()
        _wait("the last transaction's END", lambda: _small_ends(bootstrap, markers) == 2, 300)
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
    ends = [d for d in docs if d["id"].startswith(f"{big_xid}:") and d["status"] == "END"]
    # What Debezium did (the premise of this test): BEGIN again, and an END that counts only
    # what it wrote after the restart. Either the kill cut the first write (one END), or the
    # first write got its END out and the flushed offsets were still inside the transaction.
    assert statuses in (["BEGIN", "BEGIN", "END"], ["BEGIN", "END", "BEGIN", "END"])
    assert ends[-1]["event_count"] < ITEMS + 1
    numbers: dict[str, set[int]] = {}
    for r in records:
        doc = json.loads(r.value or b"{}") if r.topic != markers else {}
        txn = doc.get("transaction") or {}
        if str(txn.get("id", "")).startswith(f"{big_xid}:"):
            numbers.setdefault(txn["id"], set()).add(txn["total_order"])
    both = sum(len(n) > 1 for n in numbers.values())
    assert both > 0, "Connect wrote nothing past its flushed offset before its kill"

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
    assert [r for r in out if r.kind == KIND_REJECT] == []
    applied = Counter(r.txn_id for r in out if r.kind == KIND_ROW)
    assert applied[big_xid] == ITEMS + 1
    assert sorted(applied.values()) == [2, 2, ITEMS + 1]  # and the transactions around it
    big = [r for r in out if r.kind == KIND_ROW and r.txn_id == big_xid]
    # Whole, once, in the transaction's order (the items in insert order, then their order),
    # one txn_seq, between the transactions before and after it.
    assert [json.loads(r.row or "{}")["item_id"] for r in big[:-1]] == list(range(101, 101 + ITEMS))
    assert (big[-1].table, json.loads(big[-1].row or "{}")["order_id"]) == ("orders", 2)
    assert {r.txn_seq for r in big} == {2}
    assert [r.txn_seq for r in out if r.is_txn_end] == [1, 2, 3]
    assert asm.expire(state, 10**12).outputs == []  # nothing left waiting
