"""Throughput of the pure assembler core (no Spark): rows/s of TransactionAssembler.process.

Run from the repository root: ``.venv/bin/python -m benchmarks.assembler_core [--rows 200000]``

Builds JSON (and Avro/Confluent) encoded CDC events for ``--rows`` DATA rows in transactions of
``--txn-rows`` rows, then feeds them to ``process()`` in micro-batches of ``--batch`` records,
state round-tripped through ``to_tuple``/``from_tuple`` between batches as the Spark adapter
does. Prints rows/s for each encoding plus decode-only and state-size numbers.
"""

from __future__ import annotations

import argparse
import io
import json
import time

import avro.io
import avro.schema

from assembler import (
    AssemblerSettings,
    CodecSettings,
    Event,
    PartitionState,
    SourceRecord,
    TransactionAssembler,
    encode_event,
    make_decoder,
)
from assembler.events import EVENT_SCHEMA_PATH


def make_events(rows: int, txn_rows: int) -> list[Event]:
    events: list[Event] = []
    n = 0
    t = 0
    while n < rows:
        txn = f"txn-{t}"
        events.append(Event(txn, "TXN_BEGIN", source_ts_ms=1_700_000_000_000 + t))
        k = min(txn_rows, rows - n)
        for i in range(k):
            row = json.dumps(
                {
                    "order_id": t,
                    "item_id": t * 100 + i,
                    "product_name": f"product-{i}",
                    "quantity": i + 1,
                    "price": "12.50",
                    "version": 3,
                },
                separators=(",", ":"),
            )
            table = "orders" if i == 0 else "order_items"
            events.append(Event(txn, "DATA", "shop", table, "UPSERT", row, 1_700_000_000_000 + t))
        events.append(Event(txn, "TXN_END", source_ts_ms=1_700_000_000_000 + t, event_count=k))
        n += k
        t += 1
    return events


def run(encoding: str, events: list[Event], batch: int, rows: int) -> None:
    schemas = {1: EVENT_SCHEMA_PATH.read_text()}
    codec = CodecSettings(encoding=encoding, registry_schemas=schemas)  # type: ignore[arg-type]
    values = [encode_event(e, encoding) for e in events]  # type: ignore[arg-type]
    records = [SourceRecord("bench", 0, i, v) for i, v in enumerate(values)]
    asm = TransactionAssembler(AssemblerSettings(codec=codec))
    decoder = make_decoder(codec)

    t0 = time.perf_counter()
    for v in values:
        decoder.decode(v)
    t_decode = time.perf_counter() - t0

    best = best_cpu = float("inf")
    out_rows = 0
    for _ in range(3):
        state: PartitionState | None = None
        out_rows = 0
        t0 = time.perf_counter()
        c0 = time.process_time()
        for i in range(0, len(records), batch):
            step = asm.process(state, records[i : i + batch], now_ms=0)
            out_rows += len(step.outputs)
            tuples = [r.as_tuple() for r in step.outputs]  # what the adapter does
            del tuples
            state = PartitionState.from_tuple(step.state.to_tuple())
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    assert out_rows == rows, (out_rows, rows)
    print(
        f"{encoding:9s} process(): {rows / best:>9,.0f} rows/s wall, {rows / best_cpu:>9,.0f} "
        f"rows/s per CPU second ({len(events) / best_cpu:,.0f} events/s);  decode only: "
        f"{len(values) / t_decode:>9,.0f} events/s wall"
    )


def avro_package_decode_rate(events: list[Event], n: int = 20_000) -> float:
    """The pure-Python ``avro`` package's DatumReader, for comparison with the built-in codec."""
    schema = avro.schema.parse(EVENT_SCHEMA_PATH.read_text())
    reader = avro.io.DatumReader(schema, schema)
    values = [encode_event(e, "avro") for e in events[:n]]
    t0 = time.perf_counter()
    for v in values:
        reader.read(avro.io.BinaryDecoder(io.BytesIO(v)))
    return len(values) / (time.perf_counter() - t0)


def buffer_size(rows: int = 1000) -> None:
    """Bytes per buffered row in the state vs the raw JSON event and the row JSON alone."""
    asm = TransactionAssembler(AssemblerSettings())
    txn = make_events(rows, rows)[:-1]  # BEGIN + DATA, no END: everything stays buffered
    values = [encode_event(e, "json") for e in txn]
    recs = [SourceRecord("bench", 0, i, v) for i, v in enumerate(values)]
    state = asm.process(None, recs, now_ms=0).state
    data_json = sum(len(v) for v in values[1:])
    data_rows = sum(len((e.row or "").encode()) for e in txn[1:])
    buf = len(state.txn_buffer)
    print(
        f"state buffer: {buf / rows:.1f} bytes/row; raw JSON event {data_json / rows:.1f} "
        f"bytes/row; row JSON alone {data_rows / rows:.1f} bytes/row "
        f"(buffer = {buf / data_json:.0%} of the raw events)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--txn-rows", type=int, default=10)
    p.add_argument("--batch", type=int, default=10_000, help="records per process() call")
    a = p.parse_args()
    events = make_events(a.rows, a.txn_rows)
    print(f"{a.rows:,} DATA rows in {a.txn_rows}-row transactions, {len(events):,} events")
    for enc in ("json", "avro", "confluent"):
        run(enc, events, a.batch, a.rows)
    print(f"avro package DatumReader decode only: {avro_package_decode_rate(events):,.0f} events/s")
    buffer_size()


if __name__ == "__main__":
    main()
