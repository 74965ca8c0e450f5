"""The Debezium adapter in real Spark (local mode) on real Kafka: one group per source, a
transaction whose topics arrive in different micro-batches comes out whole, in END order."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from app.assembly import assemble_debezium
from assembler.debezium import DebeziumSettings
from devstack.kafka import create_topic, produce
from devstack.kafka.broker import KafkaBroker
from tests.fixtures.kafka import ExternalBroker
from tests.unit.assembler.dbz_builders import Source

pytestmark = pytest.mark.integration


def wait_for_input(query: Any, rows: int, timeout: float) -> None:
    """Until the query's batches have read ``rows`` input rows in all."""
    deadline = time.monotonic() + timeout
    while sum(p["numInputRows"] for p in query.recentProgress) < rows:
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"fewer than {rows} input rows read in {timeout}s"
        time.sleep(0.2)


def test_transactions_across_topics_and_batches_come_out_whole(
    spark: Any, kafka_broker: KafkaBroker | ExternalBroker, tmp_path: Any
) -> None:
    prefix = f"it{uuid.uuid4().hex[:8]}"
    txn_topic, orders, items = f"{prefix}.transaction", f"{prefix}.orders", f"{prefix}.items"
    for topic in (txn_topic, orders, items):
        create_topic(kafka_broker.bootstrap, topic, 1)
    src = Source()
    records = {
        "b1": src.begin(900, 10),
        "o1": src.change(orders, "c", {"order_id": 1}, 900, 1, 11),
        "i1": src.change(items, "c", {"order_id": 1, "line": 1}, 900, 2, 12),
        "e1": src.end(900, 13, {"orders": 1, "items": 1}),
        "b2": src.begin(901, 20),
        "o2": src.change(orders, "u", {"order_id": 1, "v": 2}, 901, 1, 21),
        "e2": src.end(901, 22, {"orders": 1}),
    }
    # The data_collection names in END are "public.<table>"; the builder wrote "public.items"
    # for the items topic's source.table ("items"): consistent with the END above.

    def send(topic: str, *names: str) -> None:
        for name in names:
            rec = records[name]
            produce(kafka_broker.bootstrap, topic, [rec.value], key=rec.key)

    settings = DebeziumSettings(transaction_topic=txn_topic, database="demo")
    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", f"{txn_topic},{orders},{items}")
        .option("startingOffsets", "earliest")
        .load()
    )
    batches: list[list[dict[str, Any]]] = []
    status: dict[tuple[str, int], tuple[int, str | None]] = {}

    def collect(df: Any, batch_id: int) -> None:
        got = [r.asDict() for r in df.collect()]
        for r in got:
            if r["kind"] == "STATUS":
                status[(r["topic"], r["partition"])] = (r["first_offset"], r["txn_id"])
        got = [r for r in got if r["kind"] != "STATUS"]
        if got:
            batches.append(got)

    query = (
        assemble_debezium(events, settings)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        # Round 1: both transactions' markers and every order change; txn 900 lacks its item,
        # so 901 (complete) must wait behind it.
        send(txn_topic, "b1", "e1", "b2", "e2")
        send(orders, "o1", "o2")
        # No processAllAvailable(): a pending processing-time timeout keeps Spark running
        # batches, so it would never return (DESIGN.md §7). Count input rows instead.
        wait_for_input(query, 6, 180)
        assert batches == []
        # The orders partition holds both transactions' changes, 900's first (offset 0).
        assert status == {(txn_topic, 0): (-1, None), (orders, 0): (0, "900")}
        send(items, "i1")
        wait_for_input(query, 7, 120)
        deadline = time.monotonic() + 30
        while not batches and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
    assert len(batches) == 1, batches
    out = sorted(batches[0], key=lambda r: (r["txn_seq"], r["row_seq"]))
    assert [
        (r["kind"], r["txn_id"], r["txn_seq"], r["table"], json.loads(r["row"])) for r in out
    ] == [
        ("ROW", "900", 1, "orders", {"order_id": 1}),
        ("ROW", "900", 1, "items", {"order_id": 1, "line": 1}),
        ("ROW", "901", 2, "orders", {"order_id": 1, "v": 2}),
    ]
