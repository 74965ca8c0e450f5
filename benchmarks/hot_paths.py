"""Per-record cost of the two Python hot paths on the executors, no Spark.

    .venv/bin/python -m benchmarks.hot_paths [--records 12500]

1. The assembler as ``applyInPandasWithState`` calls it: ``AssembleSlot.__call__`` on one
   pandas chunk of one slot (JSON events, 10-row transactions, 100-byte rows, as in
   ``make bench``), output DataFrame included.
2. The sink loader's per-row encoding (``sinks.starrocks.loader.encode_row``).

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
    """The part of ``GroupState`` the adapter uses, for a group without state."""

    exists = False
    hasTimedOut = False  # noqa: N815 - Spark's name

    def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802 - Spark's name
        return 1_700_000_000_000

    def update(self, value: Any) -> None:
        self.value = value

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

    from sinks.starrocks.loader import encode_row

    rows = [row_json(i, 1, i % 10, 1, 100) for i in range(args.records)]

    def encode() -> int:
        for r in rows:
            encode_row("UPSERT", r, "table=rows topic=bench partition=0 txn_id=x")
        return len(rows)

    print(f"assembler adapter + core (AssembleSlot):  {_best_us(assemble):6.2f} us per record")
    print(f"sink row encoding (encode_row):          {_best_us(encode):6.2f} us per row")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
