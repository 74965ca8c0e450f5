"""Per-record cost of the two Python hot paths on the executors, no Spark.

    .venv/bin/python -m benchmarks.hot_paths [--records 12500]

1. The assembler as ``applyInPandasWithState`` calls it: ``AssembleSlot.__call__`` on one
   pandas chunk of one slot (JSON events, 10-row transactions, 100-byte rows, as in
   ``make bench``), output DataFrame included.
2. The same over eight consecutive batches of one slot with its state carried, where
   transactions are cut by the batches' ends: 10-row transactions of 2 and of 32 partitions
   in the slot, and 1,000-row transactions, at 1,500 records a batch (a partition's
   transaction open at a batch's end is buffered in the state and finished in a later
   batch; target 6 of issue 14: cost flat in partitions and open transactions). And a slot
   whose state holds 1,024 partitions with records in 2 of them (600 a batch), in ms a
   batch: the quiet partitions' entries are copied, not decoded (``assembler/slots.py``).
3. The sink loader's per-row encoding (``sinks.starrocks.loader.encode_row``).

Prints microseconds per record, best of five runs. Run it on two checkouts to compare commits
(``PYTHONPATH=<checkout> python -m benchmarks.hot_paths``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from assembler.codecs import encode_event
from assembler.settings import AssemblerSettings
from benchmarks.workload import row_json, txn_events


class _State:
    """The part of ``GroupState`` the adapter uses; a group without state until updated."""

    exists = False
    hasTimedOut = False  # noqa: N815 - Spark's name
    value: Any = None

    def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802 - Spark's name
        return 1_700_000_000_000

    @property
    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value
        self.exists = True

    def setTimeoutDuration(self, duration: int) -> None:  # noqa: N802 - Spark's name
        self.duration = duration


def _best_us(fn: Callable[[], int], repeats: int = 5) -> float:
    best = float("inf")
    n = 1
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = fn()
        best = min(best, time.perf_counter() - t0)
    return best / max(1, n) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=12_500)
    args = parser.parse_args(argv)

    from app.assembly import AssembleSlot

    values: list[bytes] = []
    txn = 0
    while len(values) < args.records:
        values.extend(encode_event(e, "json") for e in txn_events(0, txn, 10, 100, 1))
        txn += 1
    chunk = pd.DataFrame(
        {
            "topic": "bench",
            "partition": 0,
            "offset": range(len(values)),
            "value": values,
            "timestamp": pd.to_datetime([1_700_000_000_000] * len(values), unit="ms"),
        }
    )
    group = AssembleSlot(AssemblerSettings())

    def assemble() -> int:
        out = list(group((0,), iter([chunk]), _State()))  # type: ignore[arg-type]
        assert sum(len(df) for df in out) > 0
        return len(values)

    cut = {
        "10-row txns, 2 partitions": _cut_batches(10, 2),
        "10-row txns, 32 partitions": _cut_batches(10, 32),
        "1,000-row txns, 2 partitions": _cut_batches(1000, 2),
    }

    timed: list[float] = []

    def carried(batches: list[pd.DataFrame], seed: pd.DataFrame | None = None) -> Callable[[], int]:
        def run() -> int:
            slot, state = AssembleSlot(AssemblerSettings()), _State()
            if seed is not None:  # not timed: fills the slot's state
                for _ in slot((0,), iter([seed]), state):  # type: ignore[arg-type]
                    pass
            t0 = time.perf_counter()
            for batch in batches:
                for _ in slot((0,), iter([batch]), state):  # type: ignore[arg-type]
                    pass
            timed.append(time.perf_counter() - t0)
            return sum(len(b) for b in batches)

        return run

    from sinks.starrocks.loader import encode_row

    rows = [row_json(i, 1, i % 10, 1, 100) for i in range(args.records)]

    def encode() -> int:
        for r in rows:
            encode_row("UPSERT", r, "table=rows topic=bench partition=0 txn_id=x")
        return len(rows)

    print(f"assembler adapter + core (AssembleSlot):  {_best_us(assemble):6.2f} us per record")
    for name, batches in cut.items():
        us = _best_us(carried(batches), repeats=3)
        print(f"  8 batches of 1,500, state carried, {name}: {us:6.2f} us per record")
    active, quiet = _cut_batches(10, 2, per_batch=600, batches=9), _quiet_partitions(2, 1_022)
    timed.clear()
    run = carried(active[1:], pd.concat([active[0], quiet], ignore_index=True))
    for _ in range(5):
        run()
    ms = min(timed) / 8 * 1000
    print(f"  8 batches of 600 of 2 partitions, 1,022 quiet ones in the slot: {ms:6.2f} ms a batch")
    print(f"sink row encoding (encode_row):          {_best_us(encode):6.2f} us per row")
    return 0


def _quiet_partitions(first: int, count: int) -> pd.DataFrame:
    """A transaction left open (BEGIN and one DATA) in each of ``count`` partitions."""
    rows = []
    for partition in range(first, first + count):
        events = txn_events(partition, 0, 1, 100, 1, close=False)
        rows += [("bench", partition, o, encode_event(e, "json")) for o, e in enumerate(events)]
    return pd.DataFrame(rows, columns=["topic", "partition", "offset", "value"])


def _cut_batches(
    txn_rows: int, partitions: int, per_batch: int = 1_500, batches: int = 8
) -> list[pd.DataFrame]:
    """One slot's ``batches`` chunks of ``partitions`` partitions' records, in offset order."""
    per_partition = per_batch // partitions
    need = per_partition * batches
    frames: list[list[tuple[str, int, int, bytes]]] = [[] for _ in range(batches)]
    for partition in range(partitions):
        values: list[bytes] = []
        txn = 0
        while len(values) < need:
            events = txn_events(partition, txn, txn_rows, 100, 1)
            values.extend(encode_event(e, "json") for e in events)
            txn += 1
        for offset, value in enumerate(values[:need]):
            frames[offset // per_partition].append(("bench", partition, offset, value))
    columns = ["topic", "partition", "offset", "value"]
    return [pd.DataFrame(rows, columns=columns) for rows in frames]


if __name__ == "__main__":
    raise SystemExit(main())
