"""Helpers for StarRocks sink integration tests: schema, config and batch DataFrames."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

import pytest

from devstack.starrocks.crashpoints import point_instrument
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.sink import StarRocksSink

DB = "shop"

INPUT_SCHEMA = (
    "topic string, partition int, txn_id string, txn_seq bigint, row_seq int, "
    "database string, table string, op string, row string, last_offset bigint, "
    "source_ts_ms bigint, kind string"
)


def create_schema(sr: Any) -> None:
    sr.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    sr.sql(
        f"CREATE TABLE {DB}.orders (order_id BIGINT NOT NULL, item_count INT, "
        "total_amount BIGINT, version INT) PRIMARY KEY(order_id) "
        'DISTRIBUTED BY HASH(order_id) PROPERTIES("replication_num" = "1")'
    )
    sr.sql(
        f"CREATE TABLE {DB}.order_items (order_id BIGINT NOT NULL, item_no INT NOT NULL, "
        "amount BIGINT, version INT) PRIMARY KEY(order_id, item_no) "
        'DISTRIBUTED BY HASH(order_id) PROPERTIES("replication_num" = "1")'
    )


def options(sr: Any, **overrides: str) -> dict[str, str]:
    base = {
        "load-url": f"{sr.host}:{sr.fe_port}",
        "jdbc-url": f"jdbc:mysql://{sr.host}:{sr.query_port}",
        "database-name": DB,
        "table-name": "orders,order_items",
        "username": sr.user,
        "password": sr.password,
        "sink.label-prefix": "t",
        "sink.pipeline-name": "test",
        "sink.retry.backoff-ms": "20",
        "sink.retry.max-backoff-ms": "200",
        "sink.commit.check-timeout-ms": "5000",
        "sink.connect.timeout-ms": "2000",
        "sink.socket.timeout-ms": "10000",
        "sink.transaction.timeout-s": "60",
    }
    base.update(overrides)
    return base


def make_sink(sr: Any, query_id: str | None = None, **overrides: Any) -> StarRocksSink:
    """A sink on the emulator; ``fault_hook(point)`` is called at the crash points of
    ``devstack/starrocks/crashpoints.py`` (injected from outside, as the chaos runner does)."""
    hook = overrides.pop("fault_hook", None)
    qid = query_id or str(uuid.uuid4())
    cfg = StarRocksSinkConfig.from_options(options(sr, **overrides))
    return StarRocksSink(cfg, lambda: qid, instrument=points(hook) if hook else None)


def points(hook: Any) -> Any:
    return point_instrument(lambda _batch, point: hook(point))


def order_txn(
    order_id: int,
    *,
    version: int = 1,
    items: int = 2,
    partition: int = 0,
    txn_seq: int = 0,
    offset: int = 0,
    topic: str = "cdc",
) -> list[dict[str, Any]]:
    """One source transaction: an order and its items (invariants: count and total match)."""
    rows: list[dict[str, Any]] = []
    txn_id = f"tx-{order_id}-{version}"
    amounts = [10 * (i + 1) + version for i in range(items)]
    images: list[tuple[str, dict[str, Any]]] = [
        (
            "orders",
            {
                "order_id": order_id,
                "item_count": items,
                "total_amount": sum(amounts),
                "version": version,
            },
        )
    ]
    images += [
        (
            "order_items",
            {"order_id": order_id, "item_no": i, "amount": amounts[i], "version": version},
        )
        for i in range(items)
    ]
    for seq, (table, image) in enumerate(images):
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "txn_id": txn_id,
                "txn_seq": txn_seq,
                "row_seq": seq,
                "database": DB,
                "table": table,
                "op": "UPSERT",
                "row": json.dumps(image),
                "last_offset": offset + len(images) + 1,
                "source_ts_ms": 1_700_000_000_000,
                "kind": "ROW",
            }
        )
    return rows


def batch(spark: Any, rows: Iterable[dict[str, Any]], partitions: int = 2) -> Any:
    data = list(rows)
    cols = [c.split()[0] for c in INPUT_SCHEMA.split(", ")]
    tuples = [tuple(r.get(c) for c in cols) for r in data]
    return spark.createDataFrame(tuples, INPUT_SCHEMA).repartition(partitions)


def table_rows(sr: Any, table: str, order_by: str = "1") -> list[tuple[Any, ...]]:
    return sr.sql(f"SELECT * FROM {DB}.{table} ORDER BY {order_by}")


@pytest.fixture
def sr(starrocks_emulator: Any) -> Any:
    create_schema(starrocks_emulator)
    return starrocks_emulator
