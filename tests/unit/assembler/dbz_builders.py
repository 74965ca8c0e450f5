"""Builders of Debezium records (JsonConverter, schemas off) for the Debezium core tests."""

from __future__ import annotations

import json
from typing import Any

from assembler.debezium import DebeziumSettings
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings

PREFIX = "shop"
TXN_TOPIC = f"{PREFIX}.transaction"
ORDERS = f"{PREFIX}.public.orders"
ITEMS = f"{PREFIX}.public.order_items"
TOPIC_TABLE = {ORDERS: "orders", ITEMS: "order_items"}


def settings(**kw: Any) -> DebeziumSettings:
    core = kw.pop("core", AssemblerSettings(txn_timeout_ms=10_000))
    return DebeziumSettings(transaction_topic=TXN_TOPIC, database="demo", core=core, **kw)


class Source:
    """Offsets per topic, so tests write records the way Kafka Connect would."""

    def __init__(self) -> None:
        self.next: dict[str, int] = {}

    def record(self, topic: str, value: Any, key: Any = None) -> SourceRecord:
        offset = self.next.get(topic, 0)
        self.next[topic] = offset + 1
        raw = (
            None
            if value is None
            else (value if isinstance(value, bytes) else json.dumps(value).encode())
        )
        k = None if key is None else json.dumps(key).encode()
        return SourceRecord(topic, 0, offset, raw, k)

    def begin(self, xid: int, lsn: int) -> SourceRecord:
        return self.record(
            TXN_TOPIC,
            {
                "status": "BEGIN",
                "id": f"{xid}:{lsn}",
                "event_count": None,
                "data_collections": None,
                "ts_ms": 1,
            },
        )

    def end(self, xid: int, lsn: int, counts: dict[str, int]) -> SourceRecord:
        return self.record(
            TXN_TOPIC,
            {
                "status": "END",
                "id": f"{xid}:{lsn}",
                "event_count": sum(counts.values()),
                "data_collections": [
                    {"data_collection": f"public.{t}", "event_count": n} for t, n in counts.items()
                ],
                "ts_ms": 2,
            },
        )

    def change(
        self,
        topic: str,
        op: str,
        row: dict[str, Any],
        xid: int | None,
        order: int = 1,
        lsn: int = 0,
        key: dict[str, Any] | None = None,
    ) -> SourceRecord:
        table = TOPIC_TABLE.get(topic, topic.rsplit(".", 1)[-1])
        value = {
            "before": row if op == "d" else None,
            "after": None if op == "d" else row,
            "source": {"schema": "public", "table": table, "ts_ms": 5, "txId": xid, "lsn": lsn},
            "transaction": None
            if xid is None
            else {"id": f"{xid}:{lsn}", "total_order": order, "data_collection_order": order},
            "op": op,
            "ts_ms": 6,
        }
        return self.record(topic, value, key)
