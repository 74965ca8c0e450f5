"""The same job with 1 and 2 executors (issue 14, "scale beyond one machine").

``python -m benchmarks.cluster [--rows N] [--partitions N] [--masters M ...]``: one pre-filled
topic, then the pipeline through ``spark-submit.sh`` until caught up, once per Spark master, on
the same data: ``local[2]`` (one JVM, as the demo runs), and Spark's ``local-cluster[n,1,1024]``
(a standalone master and ``n`` workers inside the driver, each executor its own JVM and Python
workers), and ``standalone:n``: a standalone master and ``n`` one-core workers started with
pyspark's own ``bin/spark-class`` (:mod:`benchmarks.standalone`). Prints rows/s and
the per-batch costs the model in ``docs/scaling.md`` is built from.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.run import FULL, Bench, loadavg, log

DEFAULT_MASTERS = (
    "local[2]",
    "local-cluster[1,1,1024]",
    "local-cluster[2,1,1024]",
    "standalone:1",
    "standalone:2",
)


def run_master(
    bench: Bench, index: int, master: str, topic: str, prod: Any, partitions: int
) -> dict[str, Any]:
    from benchmarks import e2e
    from devstack.stack import topic_end_offsets

    bench.truncate()
    workdir = bench.out / "work" / re.sub(r"[^A-Za-z0-9]+", "-", master).strip("-")
    ends = topic_end_offsets(bench.stack.bootstrap, topic, partitions)
    res = e2e.catch_up(
        bench.stack,
        topic,
        workdir,
        prod.rows,
        prod.row_bytes // max(1, prod.rows),
        FULL.max_offsets,
        None,
        ends,
        extra=[f"spark.master={master}"],
        name=f"bench-cluster-{index}",  # it is the label prefix too: 32 characters at most
    )
    res["master"] = master
    res["load"] = loadavg()
    return res


def run_on(
    bench: Bench, index: int, master: str, topic: str, prod: Any, partitions: int
) -> dict[str, Any]:
    """``standalone:N`` starts a standalone master with N one-core workers for the run."""
    if not master.startswith("standalone:"):
        return run_master(bench, index, master, topic, prod, partitions)
    from benchmarks.standalone import standalone

    workers = int(master.split(":", 1)[1])
    with standalone(workers, bench.out / "work" / f"standalone-{workers}") as url:
        res = run_master(bench, index, url, topic, prod, partitions)
    res["master"] = f"standalone, {workers} worker(s) x 1 core ({url})"
    return res


def per_batch(res: dict[str, Any]) -> dict[str, float]:
    b = res.get("breakdown", {})
    n = max(1.0, b.get("batches", 0.0))
    return {
        "rows": res.get("rows", 0) / n,
        "trigger_ms": b.get("trigger_ms", 0.0) / n,
        "add_batch_ms": b.get("add_batch_ms", 0.0) / n,
        "sink_ms": b.get("sink_ms", 0.0) / n,
        "commit_ms": b.get("commit_ms", 0.0) / n,
        "warm_trigger_ms": b.get("warm_trigger_ms", 0.0),
    }


def render(results: list[dict[str, Any]]) -> str:
    head = (
        "| master | rows/s from query start | rows/s after the first batch | first batch s "
        "| batches | rows/batch | trigger ms/batch | warm batch ms | addBatch ms | sink ms "
        "| commit ms |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in results:
        pb = per_batch(r)
        lines.append(
            f"| `{r['master']}` | {r.get('rows_per_s', 0):,.0f} | "
            f"{r.get('steady_rows_per_s', 0):,.0f} | {r.get('first_batch_s', 0):.1f} | "
            f"{r.get('batches', 0)} | {pb['rows']:,.0f} | {pb['trigger_ms']:,.0f} | "
            f"{pb['warm_trigger_ms']:,.0f} | {pb['add_batch_ms']:,.0f} | "
            f"{pb['sink_ms']:,.0f} | {pb['commit_ms']:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.workload import Shape

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--masters", nargs="+", default=list(DEFAULT_MASTERS))
    ap.add_argument("--out", type=Path, default=Path("results/cluster"))
    args = ap.parse_args(argv)
    masters: list[str] = args.masters
    shutil.rmtree(args.out / "stack", ignore_errors=True)
    shutil.rmtree(args.out / "work", ignore_errors=True)  # old checkpoints name old topics
    bench = Bench(args.out, FULL)
    results = []
    with bench.stack:
        bench.ddl()
        shape = Shape(args.partitions, 10, 100)
        topic, prod = bench.prefill(shape, args.rows, "cluster")
        for i, master in enumerate(masters, 1):
            log(f"[{i}/{len(masters)}] {master}: catch-up through spark-submit.sh")
            started = time.monotonic()
            res = run_on(bench, i, master, topic, prod, args.partitions)
            log(
                f"  {res.get('rows_per_s', 0):,.0f} rows/s from query start, "
                f"{res.get('steady_rows_per_s', 0):,.0f} after the first batch, caught up: "
                f"{res['caught_up']} ({time.monotonic() - started:.0f} s, load {res['load']})"
            )
            results.append(res)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cluster.json").write_text(json.dumps(results, indent=2, default=str))
    print(render(results))
    return 0 if all(r["caught_up"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
