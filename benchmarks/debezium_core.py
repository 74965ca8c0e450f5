"""The Debezium core (no Spark) catching up a backlog, with the topics read in step or not.

    .venv/bin/python -m benchmarks.debezium_core [--txns 40000] [--batch 10000] [--items 4]

A connector's topics are not ordered with each other, and Spark's Kafka source splits
``maxOffsetsPerTrigger`` over topic partitions by their lag, so in a catch-up one topic can run
far ahead of another. Three shapes of the same backlog (``--txns`` transactions of one order
and ``--items`` items, JsonConverter without schemas), fed to ``DebeziumAssembler.process`` in
calls of ``--batch`` records with the state round-tripped between calls as Spark does:

* ``in step``: each call holds the same share of the transaction topic and the data topics;
* ``markers first``: every BEGIN and END before any data event (ENDs queue up);
* ``data first``: every data event before any marker (data waits in the state).

Prints the time, records/s, the slowest call and the largest state per shape, and each
shape's time over ``in step``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from assembler.debezium import DebeziumAssembler, DebeziumSettings
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings

TXN_TOPIC = "shop.transaction"
ORDERS = "shop.public.orders"
ITEMS = "shop.public.order_items"


def backlog(txns: int, items: int) -> tuple[list[SourceRecord], list[SourceRecord]]:
    """(markers, data events) of ``txns`` transactions, each topic in its own offset order."""
    offsets = {TXN_TOPIC: 0, ORDERS: 0, ITEMS: 0}

    def record(topic: str, value: Mapping[str, object]) -> SourceRecord:
        offset = offsets[topic]
        offsets[topic] = offset + 1
        return SourceRecord(topic, 0, offset, orjson.dumps(value))

    def change(
        topic: str, table: str, row: dict[str, object], txn: str, order: int
    ) -> SourceRecord:
        source = {"schema": "public", "table": table, "ts_ms": 5}
        block = {"id": txn, "total_order": order, "data_collection_order": order}
        value = {"before": None, "after": row, "source": source, "transaction": block, "op": "c"}
        return record(topic, value)

    markers: list[SourceRecord] = []
    data: list[SourceRecord] = []
    for xid in range(txns):
        lsn = 1_000 + 10 * xid
        begin = {"status": "BEGIN", "id": f"{xid}:{lsn}", "ts_ms": 1}
        markers.append(record(TXN_TOPIC, begin))
        order = {"id": xid, "customer": "c" * 40}
        data.append(change(ORDERS, "orders", order, f"{xid}:{lsn + 1}", 1))
        for i in range(items):
            item = {"id": xid * 100 + i, "order_id": xid, "product": "p" * 40}
            data.append(change(ITEMS, "order_items", item, f"{xid}:{lsn + 2}", 2 + i))
        collections = [
            {"data_collection": "public.orders", "event_count": 1},
            {"data_collection": "public.order_items", "event_count": items},
        ]
        end = {
            "status": "END",
            "id": f"{xid}:{lsn + 5}",
            "event_count": 1 + items,
            "data_collections": collections,
            "ts_ms": 2,
        }
        markers.append(record(TXN_TOPIC, end))
    return markers, data


@dataclass
class Result:
    """One shape's run: wall time, records fed, rows emitted, slowest call, largest state."""

    seconds: float
    records: int
    rows: int
    slowest_ms: float
    peak_state_bytes: int


def run(calls: list[list[SourceRecord]]) -> Result:
    """Feed the calls in order, the state handed from one call to the next."""
    core = AssemblerSettings(txn_timeout_ms=10**9)  # a backlog is not a timeout
    assembler = DebeziumAssembler(DebeziumSettings(TXN_TOPIC, "shop", core=core))
    state = None
    rows = records = peak = 0
    slowest = 0.0
    started = time.perf_counter()
    for call in calls:
        t0 = time.perf_counter()
        step = assembler.process(state, call, 0)
        slowest = max(slowest, time.perf_counter() - t0)
        state = step.state
        rows += len(step.outputs)
        records += len(call)
        peak = max(peak, len(state[1]))
    return Result(time.perf_counter() - started, records, rows, slowest * 1000, peak)


def _chunks(records: list[SourceRecord], size: int) -> list[list[SourceRecord]]:
    return [records[i : i + size] for i in range(0, len(records), size)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--txns", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=10_000, help="records per call")
    parser.add_argument("--items", type=int, default=4, help="order items per transaction")
    args = parser.parse_args(argv)

    markers, data = backlog(args.txns, args.items)
    total = len(markers) + len(data)
    calls = -(-total // args.batch)
    in_step = [
        markers[i * len(markers) // calls : (i + 1) * len(markers) // calls]
        + data[i * len(data) // calls : (i + 1) * len(data) // calls]
        for i in range(calls)
    ]
    shapes = {
        "in step": in_step,
        "markers first": _chunks(markers, args.batch) + _chunks(data, args.batch),
        "data first": _chunks(data, args.batch) + _chunks(markers, args.batch),
    }
    print(
        f"{args.txns:,} transactions, {total:,} records, calls of {args.batch:,} records "
        f"({calls} calls in step)"
    )
    base: float | None = None
    for name, shape in shapes.items():
        r = run(shape)
        if r.rows != args.txns * (1 + args.items):
            raise SystemExit(
                f"{name}: emitted {r.rows:,} rows, expected {args.txns * (1 + args.items):,}"
            )
        base = base or r.seconds
        print(
            f"{name:14s} {r.seconds:7.2f} s  {r.records / r.seconds:9,.0f} records/s  "
            f"slowest call {r.slowest_ms:7.1f} ms  "
            f"largest state {r.peak_state_bytes / 1e6:6.1f} MB  x{r.seconds / base:.2f} of in step"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
