"""Bad Debezium input through the whole pipeline (real Kafka, real Spark, the real sink on the
emulator): each rejected source transaction lands whole in the dead-letter table, named by
topic, partition, offset and transaction id, in the same StarRocks transaction as the good
ones around it; a restart replays nothing and does not fail."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.config import load_config
from app.pipeline import detach_listeners, query_id_of, start_query
from app.progress import ProgressReporter
from demo.ddl import split_statements
from devstack.kafka import create_topic, produce
from devstack.kafka.broker import KafkaBroker
from devstack.stack import DDL_FILE
from devstack.starrocks.launcher import EmulatorHandle
from sinks.starrocks.sink import StarRocksSink
from tests.fixtures.kafka import ExternalBroker
from tests.unit.assembler.dbz_builders import TXN_TOPIC, Source

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def order(order_id: int, version: int = 1) -> dict[str, Any]:
    return {
        "order_id": order_id,
        "customer_id": 7,
        "item_count": 1,
        "total_amount": "2.50",
        "version": version,
        "order_status": "new",
        "updated_ts_ms": 1,
    }


def item(item_id: int, order_id: int, version: int = 1) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "order_id": order_id,
        "product_name": "p",
        "quantity": 1,
        "price": "2.50",
        "amount": "2.50",
        "version": version,
    }


def run_until(query: Any, done: Any, state: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"not done in {timeout}s: {state()}"
        time.sleep(0.3)


def test_rejected_transactions_land_whole_in_the_dead_letter_table(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
) -> None:
    prefix = f"dl{uuid.uuid4().hex[:8]}"
    txn_topic = f"{prefix}.transaction"
    orders, items, customers = (f"{prefix}.public.{t}" for t in ("orders", "order_items", "x"))
    for topic in (txn_topic, orders, items, customers):
        create_topic(kafka_broker.bootstrap, topic, 1)
    for statement in split_statements(DDL_FILE.read_text()):
        starrocks_emulator.sql(statement)

    src = Source()
    # Records are built in order; each topic's offsets count from 0.
    good = [
        src.begin(900, 10),
        src.change(orders, "c", order(1), 900, 1, 11),
        src.change(items, "c", item(10, 1), 900, 2, 12),
        src.end(900, 13, {"orders": 1, "order_items": 1}),
    ]
    # 901 touches a table the map does not name: rejected whole, its order row included.
    unknown = [
        src.begin(901, 20),
        src.change(orders, "c", order(2), 901, 1, 21),
        src.change(customers, "c", {"id": 1}, 901, 2, 22),
        src.end(901, 23, {"orders": 1, "x": 1}),
    ]
    # A change without its transaction block (not a snapshot) and a record that is not JSON.
    no_metadata = src.change(orders, "u", order(1, version=9), None, 0, 30)
    undecodable = src.record(items, b"{not json")
    later = [
        src.begin(902, 40),
        src.change(orders, "u", order(1, version=2), 902, 1, 41),
        src.end(902, 42, {"orders": 1}),
    ]
    for rec in [*good, *unknown, no_metadata, undecodable, *later]:
        # The builder writes BEGIN/END to its fixed transaction topic; this test's is unique.
        topic = txn_topic if rec.topic == TXN_TOPIC else rec.topic
        produce(kafka_broker.bootstrap, topic, [rec.value], key=rec.key)

    emulator = starrocks_emulator
    overrides = [
        f"pipeline.name={prefix}",
        f"pipeline.checkpoint-location={tmp_path / 'ck'}",
        "pipeline.progress=quiet",
        f"source.bootstrap-servers={kafka_broker.bootstrap}",
        f"source.topics={orders},{items},{customers}",
        "source.envelope=debezium",
        f"source.debezium.transaction-topic={txn_topic}",
        "source.debezium.table.public.orders=demo.orders",
        "source.debezium.table.public.order_items=demo.order_items",
        f"starrocks.load-url={emulator.host}:{emulator.fe_port}",
        f"starrocks.jdbc-url=jdbc:mysql://{emulator.host}:{emulator.query_port}",
        f"starrocks.username={emulator.user}",
        f"starrocks.sink.label-prefix={prefix}",
        "starrocks.sink.buffer-flush.interval-ms=300",
    ]
    config = load_config(ROOT / "conf" / "local.yaml", overrides)
    reporter = ProgressReporter(enabled=False)

    def start() -> Any:
        sink = StarRocksSink(config.starrocks, query_id_provider=lambda: query_id_of(spark))
        sink.open()
        return start_query(spark, config, sink, reporter)

    def orders_now() -> dict[int, int]:
        return dict(emulator.sql("SELECT order_id, version FROM demo.orders"))

    def dead_letters() -> list[tuple[Any, ...]]:
        return emulator.sql(
            "SELECT topic, kafka_partition, first_offset, row_seq, txn_id, reason, payload "
            "FROM demo._cdc_dead_letter ORDER BY topic, first_offset, row_seq"
        )

    query = start()
    try:
        run_until(
            query,
            lambda: orders_now() == {1: 2} and len(dead_letters()) >= 5,
            lambda: (orders_now(), dead_letters()),
            240,
        )
    finally:
        query.stop()
        detach_listeners(spark)

    assert dict(emulator.sql("SELECT item_id, order_id FROM demo.order_items")) == {10: 1}
    # Every transaction is emitted or dead-lettered: none open, though the data topics'
    # records are emitted under the transaction topic's END.
    assert reporter.open_transactions == 0
    rows = dead_letters()
    by_txn: dict[str | None, list[tuple[Any, ...]]] = {}
    for r in rows:
        by_txn.setdefault(r[4], []).append(r)
    # 901 whole: its order row, its unknown-table row (kept as Kafka had it) and its END, each
    # keyed by its own record, one reason naming the violation.
    txn_901 = by_txn["901"]
    assert [(r[0], r[2]) for r in txn_901] == [(orders, 1), (customers, 0), (txn_topic, 3)]
    assert all(r[5].startswith("unknown-table: source table public.x") for r in txn_901)
    # A mapped data event keeps its target and op with its row image (docs/starrocks-sink.md).
    mapped = json.loads(txn_901[0][6])
    assert (mapped["database"], mapped["table"], mapped["op"]) == ("demo", "orders", "UPSERT")
    assert json.loads(mapped["row"])["order_id"] == 2
    assert json.loads(txn_901[1][6])["after"] == {"id": 1}
    reasons = [r[5] for r in rows]
    assert any(r.startswith("missing-metadata") for r in reasons), reasons
    undecodable_rows = [r for r in rows if r[5].startswith("undecodable")]
    assert [(r[0], r[1], r[2]) for r in undecodable_rows] == [(items, 0, 1)], rows
    assert len(rows) == 5, rows

    # A restart on the same checkpoint replays nothing and fails on nothing.
    query = start()
    try:
        time.sleep(5)
        assert query.exception() is None, query.exception()
        assert query.isActive
    finally:
        query.stop()
        detach_listeners(spark)
    assert orders_now() == {1: 2}
    assert len(dead_letters()) == 5
