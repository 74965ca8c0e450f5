"""Synthetic CDC workload for the benchmarks: transactions of N rows of ~B bytes.

Every DATA row goes to one table, ``bench.rows`` (primary key ``id``), as an UPSERT whose row
JSON is padded to about ``row_bytes``. The TXN_END event's ``source_ts_ms`` is the wall-clock
time the transaction was handed to the producer (the "source commit time" of visibility
latency). Events are JSON-encoded with the product's codec (``assembler.codecs.encode_event``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import Producer

from assembler.codecs import encode_event
from assembler.events import Event

DATABASE = "bench"
TABLE = "rows"

# The emulator (and StarRocks) DDL of the benchmark database.
DDL = (
    f"CREATE DATABASE IF NOT EXISTS `{DATABASE}`",
    f"CREATE TABLE IF NOT EXISTS `{DATABASE}`.`{TABLE}` (\n"
    "  `id` BIGINT NOT NULL,\n"
    "  `txn` BIGINT NOT NULL,\n"
    "  `seq` INT NOT NULL,\n"
    "  `ts_ms` BIGINT NULL,\n"
    "  `payload` VARCHAR(4096) NULL\n"
    ") PRIMARY KEY (`id`) DISTRIBUTED BY HASH(`id`) "
    'PROPERTIES ("replication_num" = "1")',
)


def create_tables(stack: Any) -> None:
    """Run :data:`DDL` on a ``devstack.stack.LocalStack``'s emulator."""
    conn = stack.connect()
    try:
        with conn.cursor() as cur:
            for statement in DDL:
                cur.execute(statement)
    finally:
        conn.close()


@dataclass(frozen=True)
class Shape:
    """What one data set looks like."""

    partitions: int = 4
    txn_rows: int = 10
    row_bytes: int = 100

    def label(self) -> str:
        return f"p={self.partitions} txn={self.txn_rows} row={self.row_bytes}B"


def row_json(row_id: int, txn: int, seq: int, ts_ms: int, row_bytes: int) -> str:
    base = {"id": row_id, "txn": txn, "seq": seq, "ts_ms": ts_ms, "payload": ""}
    overhead = len(json.dumps(base, separators=(",", ":")))
    base["payload"] = "x" * max(0, row_bytes - overhead)
    return json.dumps(base, separators=(",", ":"))


def txn_events(
    partition: int, txn: int, txn_rows: int, row_bytes: int, ts_ms: int, *, close: bool = True
) -> list[Event]:
    """BEGIN, ``txn_rows`` DATA rows, END (unless ``close`` is false: an open transaction)."""
    tid = f"p{partition}-t{txn}"
    events = [Event(tid, "TXN_BEGIN", source_ts_ms=ts_ms)]
    for seq in range(txn_rows):
        row_id = (partition << 40) | (txn * txn_rows + seq)
        events.append(
            Event(
                tid,
                "DATA",
                DATABASE,
                TABLE,
                "UPSERT",
                row_json(row_id, txn, seq, ts_ms, row_bytes),
                ts_ms,
            )
        )
    if close:
        events.append(Event(tid, "TXN_END", source_ts_ms=ts_ms, event_count=txn_rows))
    return events


def _producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "batch.size": 1_000_000,
        }
    )


def _send(producer: Producer, topic: str, partition: int, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value=value, partition=partition)
            return
        except BufferError:
            producer.poll(0.05)


@dataclass
class Produced:
    """What a producer sent (totals over all partitions)."""

    transactions: int = 0
    rows: int = 0
    records: int = 0
    value_bytes: int = 0
    row_bytes: int = 0
    # (partition, offset of the TXN_END record, source commit time ms), for latency.
    ends: list[tuple[int, int, int]] = field(default_factory=list)


def prefill(bootstrap: str, topic: str, shape: Shape, rows: int, *, close: bool = True) -> Produced:
    """Produce about ``rows`` DATA rows, transactions spread round-robin over the partitions.

    ``close=False`` leaves exactly one open transaction per partition (BEGIN + rows, no END).
    """
    producer = _producer(bootstrap)
    out = Produced()
    ts = int(time.time() * 1000)
    if close:
        n_txns = max(shape.partitions, rows // shape.txn_rows)
        plan: Iterator[tuple[int, int]] = ((t % shape.partitions, t) for t in range(n_txns))
    else:
        plan = ((p, p) for p in range(shape.partitions))
    for partition, txn in plan:
        for event in txn_events(partition, txn, shape.txn_rows, shape.row_bytes, ts, close=close):
            value = encode_event(event, "json")
            _send(producer, topic, partition, value)
            out.records += 1
            out.value_bytes += len(value)
            if event.row is not None:
                out.rows += 1
                out.row_bytes += len(event.row)
        out.transactions += 1
        producer.poll(0)
    remaining = producer.flush(120)
    if remaining:
        raise RuntimeError(f"{remaining} records undelivered to {topic}")
    return out


class SteadyProducer(threading.Thread):
    """Produces ``rate`` transactions/s round-robin over the partitions until stopped.

    Each TXN_END carries the wall-clock time it was produced; delivery reports give its
    offset, so a transaction counts as visible once the sink's progress row for its
    partition reaches that offset.
    """

    def __init__(self, bootstrap: str, topic: str, shape: Shape, rate: float) -> None:
        super().__init__(daemon=True, name="bench-producer")
        self.bootstrap, self.topic, self.shape, self.rate = bootstrap, topic, shape, rate
        self.produced = Produced()
        self.stop_event = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        producer = _producer(self.bootstrap)
        # A steady stream needs small batches, not throughput settings.
        out = self.produced
        start = time.monotonic()
        txn = 0

        def on_end(ts: int, err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                out.ends.append((int(msg.partition()), int(msg.offset()), ts))

        while not self.stop_event.is_set():
            due = start + txn / self.rate
            while (delay := due - time.monotonic()) > 0:
                producer.poll(min(delay, 0.05))
            partition = txn % self.shape.partitions
            ts = int(time.time() * 1000)
            events = txn_events(partition, txn, self.shape.txn_rows, self.shape.row_bytes, ts)
            for i, event in enumerate(events):
                value = encode_event(event, "json")
                if i == len(events) - 1:
                    while True:
                        try:
                            producer.produce(
                                self.topic,
                                value=value,
                                partition=partition,
                                on_delivery=partial(on_end, ts),
                            )
                            break
                        except BufferError:
                            producer.poll(0.05)
                else:
                    _send(producer, self.topic, partition, value)
                out.records += 1
                out.value_bytes += len(value)
                if event.row is not None:
                    out.rows += 1
                    out.row_bytes += len(event.row)
            out.transactions += 1
            txn += 1
            producer.poll(0)
        producer.flush(60)


class VisibilitySampler(threading.Thread):
    """Polls the sink's progress table: when a partition's committed offset passes a
    transaction's TXN_END offset, that transaction has become visible (same sink transaction
    as its rows). Latency = first time seen - source commit time (upper bound by one poll).
    """

    def __init__(self, connect: Any, pipeline: str, topic: str, interval_s: float = 0.05) -> None:
        super().__init__(daemon=True, name="bench-visibility")
        self.connect, self.pipeline, self.topic, self.interval_s = (
            connect,
            pipeline,
            topic,
            interval_s,
        )
        # partition -> list of (committed offset, first seen at ms)
        self.advances: dict[int, list[tuple[int, float]]] = {}
        self.stop_event = threading.Event()
        self.first_advance = threading.Event()

    def run(self) -> None:
        conn = self.connect()
        last: dict[int, int] = {}
        try:
            while not self.stop_event.is_set():
                now_ms = time.time() * 1000
                try:
                    with conn.cursor() as cur:
                        cur.execute(
                            f"SELECT kafka_partition, last_offset FROM {DATABASE}._cdc_progress "
                            "WHERE pipeline = %s AND topic = %s",
                            (self.pipeline, self.topic),
                        )
                        got = {int(p): int(o) for p, o in cur.fetchall()}
                except Exception:
                    got = {}
                for p, o in got.items():
                    if o > last.get(p, -1):
                        last[p] = o
                        self.advances.setdefault(p, []).append((o, now_ms))
                        self.first_advance.set()
                self.stop_event.wait(self.interval_s)
        finally:
            conn.close()

    def latencies_ms(self, ends: list[tuple[int, int, int]]) -> list[tuple[float, float]]:
        """(source commit ms, latency ms) of every transaction seen visible."""
        out = []
        for partition, offset, ts in ends:
            for committed, seen in self.advances.get(partition, []):
                if committed >= offset:
                    out.append((float(ts), seen - ts))
                    break
        return out
