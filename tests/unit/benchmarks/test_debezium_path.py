"""The Debezium benchmark's split of BEGIN->visible into Debezium's part and the pipeline's."""

from __future__ import annotations

import json

from benchmarks.debezium_path import ORDERS_TOPIC, KafkaArrivals, split_latency
from devstack.demo_debezium import DATA_TOPICS, TRANSACTION_TOPIC

ITEMS_TOPIC = next(t for t in DATA_TOPICS if t != ORDERS_TOPIC)


def _data(txn: str, after: dict[str, object] | None, schemas: bool = False) -> bytes:
    # Debezium's PostgreSQL ids are "xid:lsn", a data event's LSN not the one of its END.
    payload = {"before": None, "after": after, "op": "c", "transaction": {"id": f"{txn}:100"}}
    return json.dumps({"schema": {}, "payload": payload} if schemas else payload).encode()


def _end(txn: str, events: int) -> bytes:
    return json.dumps({"status": "END", "id": f"{txn}:200", "event_count": events}).encode()


def _order(order_id: int, version: int, begin_ms: int) -> dict[str, object]:
    return {"order_id": order_id, "version": version, "updated_ts_ms": begin_ms}


def test_a_transaction_is_whole_at_its_last_event_end_marker_or_data() -> None:
    arrivals = KafkaArrivals("unused:9092")
    # Txn 1: END arrives before one of its two data events.
    arrivals._note(ORDERS_TOPIC, _data("t1", _order(1, 1, 1_000)), 1_100)
    arrivals._note(TRANSACTION_TOPIC, _end("t1", 2), 1_200)
    assert arrivals.whole_at("t1") is None  # one event still missing
    arrivals._note(ITEMS_TOPIC, _data("t1", {"item_id": 7}), 1_250)
    # Txn 2: END last; with JsonConverter's schema envelope.
    arrivals._note(ORDERS_TOPIC, _data("t2", _order(2, 1, 2_000), schemas=True), 2_050)
    arrivals._note(TRANSACTION_TOPIC, _end("t2", 1), 2_300)
    # Txn 3: never ended.
    arrivals._note(ORDERS_TOPIC, _data("t3", _order(3, 1, 3_000)), 3_010)

    assert arrivals.whole_at("t1") == 1_250
    assert arrivals.whole_at("t2") == 2_300
    assert arrivals.whole_at("t3") is None
    assert arrivals.whole_at("unknown") is None

    visible = {(1, 1): 1_500.0, (2, 1): 2_400.0, (3, 1): 3_500.0}
    split = split_latency(arrivals, visible)
    debezium, pipeline = split["begin_to_whole_in_kafka_ms"], split["whole_in_kafka_to_visible_ms"]
    # Only t1 and t2 count: t3 was never whole.
    assert debezium["n"] == pipeline["n"] == 2
    assert debezium["max"] == 300  # t2: 2,300 - 2,000 (t1: 250)
    assert pipeline["max"] == 250  # t1: 1,500 - 1,250 (t2: 100)


def test_an_order_version_not_seen_in_starrocks_is_left_out() -> None:
    arrivals = KafkaArrivals("unused:9092")
    for n in range(3):
        txn = f"t{n}"
        arrivals._note(ORDERS_TOPIC, _data(txn, _order(n, 1, 1_000 * n)), 1_000 * n + 10)
        arrivals._note(TRANSACTION_TOPIC, _end(txn, 1), 1_000 * n + 20)
    split = split_latency(arrivals, {(0, 1): 100.0, (1, 1): 1_120.0})
    assert split["whole_in_kafka_to_visible_ms"]["n"] == 2
    assert split["whole_in_kafka_to_visible_ms"]["max"] == 100
