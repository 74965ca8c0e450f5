"""Kafka behaviour users hit, on real Apache Kafka with Spark's own connector.

Each test runs the product through ``spark-submit.sh`` against a fresh broker and emulator:
records deleted by retention while the pipeline is down, a topic deleted and re-created,
partitions added while running, and a backlog beyond ``maxOffsetsPerTrigger``.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from devstack.kafka.admin import add_partitions, create_topic, produce
from devstack.kafka.broker import free_port
from devstack.pipeline_process import PipelineProcess
from devstack.stack import LOCAL_CONFIG, LocalStack, committed_offsets, wait_caught_up

pytestmark = pytest.mark.e2e

NAME = "kafka-behaviour"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    with LocalStack(tmp_path / "stack") as s:
        s.apply_ddl()
        yield s


def order_txn(order_id: int, version: int = 1) -> list[bytes]:
    """One source transaction: BEGIN, an UPSERT of an order with no items, END (3 records)."""
    txn = f"o{order_id}-v{version}"
    row = {
        "order_id": order_id,
        "customer_id": 7,
        "item_count": 0,
        "total_amount": 0,
        "version": version,
        "order_status": "NEW",
        "updated_ts_ms": 1,
    }
    events = [
        {"txn_id": txn, "type": "TXN_BEGIN", "source_ts_ms": int(time.time() * 1000)},
        {
            "txn_id": txn,
            "type": "DATA",
            "database": "demo",
            "table": "orders",
            "op": "UPSERT",
            "row": json.dumps(row),
        },
        {"txn_id": txn, "type": "TXN_END", "event_count": 1},
    ]
    return [json.dumps(e).encode() for e in events]


def produce_orders(stack: LocalStack, topic: str, ids: range, partition: int = 0) -> None:
    values = [v for i in ids for v in order_txn(i)]
    produce(stack.bootstrap, topic, values, partition=partition, key=b"k")


def order_ids(stack: LocalStack) -> set[int]:
    conn = stack.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT order_id FROM demo.orders")
            return {int(r[0]) for r in cur.fetchall()}
    finally:
        conn.close()


def pipeline(stack: LocalStack, tmp_path: Path, topic: str, *extra: str) -> PipelineProcess:
    overrides = stack.pipeline_overrides(topic, tmp_path / "checkpoint", NAME)
    return PipelineProcess(LOCAL_CONFIG, [*overrides, *extra], tmp_path / "pipeline.log").start()


def caught_up(stack: LocalStack, topic: str, ends: dict[int, int]) -> bool:
    conn = stack.connect()
    try:
        return wait_caught_up(conn, NAME, topic, ends, 240)
    finally:
        conn.close()


def wait_exit(proc: PipelineProcess, timeout_s: float) -> int | None:
    deadline = time.monotonic() + timeout_s
    while proc.running() and time.monotonic() < deadline:
        time.sleep(0.2)
    return proc.returncode()


def scrape(port: int) -> dict[str, float]:
    """``/metrics`` as {sample with labels: value} (Prometheus text format)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, number = line.rpartition(" ")
            samples[name] = float(number)
    return samples


def scrape_until(port: int, name: str, want: float, timeout_s: float = 30) -> dict[str, float]:
    deadline = time.monotonic() + timeout_s
    while True:
        samples = scrape(port)
        if samples.get(name) == want or time.monotonic() > deadline:
            assert samples.get(name) == want, samples
            return samples
        time.sleep(0.2)


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """What retention does: the partition's log start moves to ``offset``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        assert future.result(30).low_watermark == offset


def test_backlog_beyond_max_offsets_then_records_deleted_while_down(
    stack: LocalStack, tmp_path: Path
) -> None:
    topic = "cdc.retention"
    create_topic(stack.bootstrap, topic, 1)
    # A backlog of 40 transactions (120 records), read 30 records per trigger.
    produce_orders(stack, topic, range(40))
    run = pipeline(stack, tmp_path, topic, "source.max-offsets-per-trigger=30")
    assert caught_up(stack, topic, {0: 120}), (tmp_path / "pipeline.log").read_text()[-3000:]
    assert run.stop() == 0
    # The per-batch progress lines: "batch N  in <input records> ...".
    text = "\n".join(run.lines)
    inputs = [int(m.group(1)) for m in re.finditer(r"^batch\s+\d+\s+in\s+(\d+)", text, re.M)]
    assert len(inputs) >= 4, text[-3000:]
    assert max(inputs) <= 30
    assert order_ids(stack) == set(range(40))

    # While it is down: 3 more transactions (offsets 120..128), and retention deletes the
    # first one of them (120..122) before the pipeline reads it.
    produce_orders(stack, topic, range(40, 43))
    delete_records_before(stack.bootstrap, topic, 0, 123)
    failed = pipeline(stack, tmp_path, topic)
    assert wait_exit(failed, 240) == 1
    log = "\n".join(failed.lines)
    assert "Kafka data loss" in log, log[-3000:]
    assert f"{topic}-0" in log, log[-3000:]
    assert "[120, 129)" in log
    assert "the earliest offset Kafka still has there is 123" in log
    assert "source.fail-on-data-loss=false" in log
    assert order_ids(stack) == set(range(40)), "a failed start wrote nothing"

    # The user accepts the loss: the two remaining transactions land, the lost one does not,
    # and Spark's log says which offsets were skipped.
    skipping = pipeline(stack, tmp_path, topic, "source.fail-on-data-loss=false")
    assert caught_up(stack, topic, {0: 129}), (tmp_path / "pipeline.log").read_text()[-3000:]
    assert skipping.stop() == 0
    assert order_ids(stack) == set(range(40)) | {41, 42}
    skipped = "\n".join(skipping.lines)
    pattern = rf"Cannot fetch offset 120\b.*TopicPartition: {re.escape(topic)}-0"
    assert re.search(pattern, skipped), skipped[-3000:]
    # ... and the pipeline says exactly which offsets it never saw.
    line = f"offsets skipped topic={topic} partition=0 first=120 last=122 count=3"
    assert line in skipped, skipped[-3000:]


def test_partitions_added_while_running_are_read_from_their_start(
    stack: LocalStack, tmp_path: Path
) -> None:
    topic = "cdc.growing"
    create_topic(stack.bootstrap, topic, 2)
    produce_orders(stack, topic, range(3), partition=0)
    produce_orders(stack, topic, range(3, 6), partition=1)
    port = free_port()
    run = pipeline(stack, tmp_path, topic, f"pipeline.metrics-port={port}")
    assert caught_up(stack, topic, {0: 9, 1: 9})
    # The metrics endpoint, scraped while the pipeline runs.
    # (The sink's commit is visible a moment before the batch's metrics are recorded.)
    first = scrape_until(port, "cdc_rows_committed_total", 6)
    assert first["cdc_transactions_committed_total"] == 6
    assert first['cdc_batches_total{outcome="committed"}'] >= 1
    assert first["cdc_begin_to_visible_seconds_count"] == 6
    assert first['cdc_last_committed_offset{partition="0",topic="cdc.growing"}'] == 8
    assert first["cdc_open_transactions"] == 0
    # A BEGIN and its row, no END yet: one transaction open, aged from the batch that read it.
    produce(stack.bootstrap, topic, order_txn(99)[:-1], partition=0, key=b"k")
    opened = scrape_until(port, "cdc_open_transactions", 1)
    assert opened['cdc_oldest_open_transaction_seconds{partition="0",topic="cdc.growing"}'] > 0
    assert opened['cdc_oldest_open_transaction_seconds{partition="1",topic="cdc.growing"}'] == 0

    add_partitions(stack.bootstrap, topic, 3)
    produce_orders(stack, topic, range(6, 10), partition=2)
    assert caught_up(stack, topic, {0: 9, 1: 9, 2: 12}), (tmp_path / "pipeline.log").read_text()[
        -3000:
    ]
    later = scrape_until(port, "cdc_rows_committed_total", 10)
    assert later['cdc_last_committed_offset{partition="2",topic="cdc.growing"}'] == 11
    assert later["cdc_open_transactions"] == 1  # order 99 is still waiting for its END
    assert run.stop() == 0
    assert order_ids(stack) == set(range(10))
    # A quiet start (conf/log4j2.properties): no Spark INFO lines, and no Java stack while it
    # runs. (During query.stop() Spark and Hadoop may still warn about interrupted threads.)
    log = "\n".join(run.lines)
    assert not re.search(r"^\d\d/\d\d/\d\d \S+ INFO ", log, re.M), log[:3000]
    running = log.split("stop requested")[0]
    assert "\tat org.apache" not in running, running[-3000:]
    conn = stack.connect()
    try:
        assert committed_offsets(conn, NAME, topic) == {0: 8, 1: 8, 2: 11}
    finally:
        conn.close()
