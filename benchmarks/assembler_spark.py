"""The assembler alone inside Spark: the real state machine vs a trivial function, side by side.

    .venv/bin/python -m benchmarks.assembler_spark [--rows 200000] [--partitions 4]
        [--txn-rows 10] [--row-bytes 100] [--per-file 50000]

No Kafka, no sink: the same CDC records (JSON events, the Kafka connector's schema) are written
as parquet files, one file per micro-batch, and read by a file stream (trigger interval 0) into
``groupBy(topic, partition).applyInPandasWithState`` with

* ``app.assembly.assemble_transactions`` (the real adapter and state machine), and
* a trivial function that counts the rows and keeps a counter as state,

both into the noop sink, in one warm local[2] session (a warm-up query runs first). Rates are
DATA rows per second of batch time (query start excluded), plus rows per CPU-second of the
whole process tree, which is less sensitive to other load on the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from assembler.codecs import encode_event
from benchmarks import spark_queries as q
from benchmarks.workload import Shape, txn_events


def feed_values(shape: Shape, rows: int) -> tuple[dict[int, list[bytes]], int, int]:
    """Encoded records per partition; returns (values, DATA rows, row bytes)."""
    values: dict[int, list[bytes]] = {p: [] for p in range(shape.partitions)}
    n_txns = max(shape.partitions, rows // shape.txn_rows)
    data_rows = row_bytes = 0
    for t in range(n_txns):
        p = t % shape.partitions
        for event in txn_events(p, t, shape.txn_rows, shape.row_bytes, 1_700_000_000_000):
            values[p].append(encode_event(event, "json"))
            if event.row is not None:
                data_rows += 1
                row_bytes += len(event.row)
    return values, data_rows, row_bytes


def run(
    spark: Any, workdir: Path, shape: Shape, rows: int, per_file: int, repeats: int = 1
) -> dict[str, Any]:
    """Measure real vs trivial on a parquet feed; returns both runs and the ratio."""
    values, data_rows, row_bytes = feed_values(shape, rows)
    records = sum(len(v) for v in values.values())
    folder = workdir / "assembler-feed"
    files = q.write_parquet_feed(folder, "bench", values, per_file)
    kw: dict[str, Any] = {"records": records, "rows": data_rows, "row_bytes": row_bytes}
    results: dict[str, list[q.QueryRun]] = {"real": [], "trivial": []}
    for i in range(repeats):
        for kind in ("trivial", "real"):
            stream = q.parquet_stream(spark, folder)
            df = q.real_assembler(stream) if kind == "real" else q.trivial_stateful(stream)
            results[kind].append(q.measure(f"asm-{kind}-{i}", q.to_noop(df, f"asm_{kind}"), **kw))
    best = {k: max(v, key=lambda r: r.rows_per_s) for k, v in results.items()}
    return {
        "shape": shape.label(),
        "records": records,
        "rows": data_rows,
        "files": files,
        "real": best["real"].as_dict(),
        "trivial": best["trivial"].as_dict(),
        "ratio": best["real"].rows_per_s / best["trivial"].rows_per_s,
        "ratio_cpu": best["real"].rows_per_cpu_s / best["trivial"].rows_per_cpu_s,
    }


def warm_up(spark: Any, workdir: Path) -> None:
    """Start the Python workers and JIT the plans once, on a tiny feed."""
    run(spark, workdir / "warm", Shape(2, 10, 100), 2000, 1000)


def print_result(res: dict[str, Any]) -> None:
    print(
        f"assembler alone in Spark ({res['shape']}, {res['rows']:,} rows, {res['files']} batches)"
    )
    print(f"  {'function':<10} {'rows/s':>10} {'rows/cpu-s':>11} {'batch s':>8} {'wall s':>7}")
    for kind in ("real", "trivial"):
        r = res[kind]
        print(
            f"  {kind:<10} {r['rows_per_s']:>10,.0f} {r['rows_per_cpu_s']:>11,.0f} "
            f"{r['batch_s']:>8.2f} {r['wall_s']:>7.2f}"
        )
    print(f"  real / trivial = {res['ratio']:.2f} (per CPU-second {res['ratio_cpu']:.2f})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--txn-rows", type=int, default=10)
    p.add_argument("--row-bytes", type=int, default=100)
    p.add_argument("--per-file", type=int, default=50_000, help="records per micro-batch")
    p.add_argument("--repeats", type=int, default=2, help="best of N")
    a = p.parse_args()
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = q.make_session()
    with tempfile.TemporaryDirectory(prefix="bench-asm-") as d:
        warm_up(spark, Path(d))
        shape = Shape(a.partitions, a.txn_rows, a.row_bytes)
        print_result(run(spark, Path(d), shape, a.rows, a.per_file, a.repeats))
    spark.stop()


if __name__ == "__main__":
    main()
