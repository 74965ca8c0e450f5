"""Where a micro-batch's time goes: Spark jobs and stages of the pipeline, from Spark's REST API.

    .venv/bin/python -m benchmarks.batch_jobs [--rows N] [--max-offsets N] [--query pipeline]
        [--partitions N] [--set KEY=VALUE ...]

Runs one query of ``benchmarks.spark_queries`` in process (Spark UI on, local[2]) on a
pre-filled topic, then prints every Spark job of each data batch with its duration and its
stages' task time, so that a fixed per-batch cost (jobs, stages, shuffles) is visible next to
the work that scales with the rows.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from typing import Any

from benchmarks.spark_queries import QUERIES

_STAGE_METRICS = (
    "executorDeserializeTime",
    "executorRunTime",
    "jvmGcTime",
    "resultSerializationTime",
    "shuffleFetchWaitTime",
    "shuffleWriteTime",
    "shuffleReadRecords",
    "outputRecords",
)


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(f"{base}{path}", timeout=30) as resp:
        return json.load(resp)


def _ms(start: str, end: str) -> float:
    from datetime import datetime

    fmt = "%Y-%m-%dT%H:%M:%S.%f%Z"
    return (
        datetime.strptime(end.replace("GMT", "UTC"), fmt)
        - datetime.strptime(start.replace("GMT", "UTC"), fmt)
    ).total_seconds() * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--max-offsets", type=int, default=30_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--txn-rows", type=int, default=10)
    parser.add_argument("--query", choices=QUERIES, default="pipeline")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a pipeline setting for --query pipeline (e.g. source.max-read-tasks=64)",
    )
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING, format="    %(name)s: %(message)s")
    for name in ("app.pipeline", "sinks.starrocks.sink"):
        logging.getLogger(name).setLevel(logging.INFO)

    from benchmarks import spark_queries as q
    from benchmarks.workload import Shape

    shape = Shape(args.partitions, args.txn_rows, 100)
    ui = {"spark.ui.enabled": "true", "spark.ui.port": "4077"}
    with q.prefilled(shape, args.rows, args.max_offsets, ui) as bench:
        spark = bench.spark
        # A warm-up run on the same topic first (worker start, imports, JIT), then the
        # measured one; jobs are read from the REST API after both.
        bench.measure("warm", bench.query(args.query, args.set))
        sc = spark.sparkContext
        base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
        jobs_before = {j["jobId"] for j in _get(base, "/jobs")}
        t0 = time.time()
        run = bench.measure(args.query, bench.query(args.query, args.set))
        jobs = [j for j in _get(base, "/jobs") if j["jobId"] not in jobs_before]
        stages = {s["stageId"]: s for s in _get(base, "/stages")}
        print(
            f"{args.query}: {run.rows_per_s:,.0f} rows/s, {run.batches} batches, "
            f"{run.batch_s:.2f} s of batches, wall {time.time() - t0:.1f} s"
        )
        for d in run.extra["durations_ms"]:
            print("  batch durations (ms): " + ", ".join(f"{k}={v}" for k, v in sorted(d.items())))
        total_ms = 0.0
        for job in sorted(jobs, key=lambda j: j["jobId"]):
            if "completionTime" not in job:
                continue
            dur = _ms(job["submissionTime"], job["completionTime"])
            desc = (job.get("description") or job.get("name") or "").replace("\n", " ")[:70]
            parts = []
            for sid in job["stageIds"]:
                st = stages.get(sid)
                if st is None or st.get("status") == "SKIPPED":
                    continue
                parts.append(
                    f"s{sid}:{st['numTasks']}t run={st['executorRunTime']}ms "
                    f"cpu={st['executorCpuTime'] / 1e6:.0f}ms"
                )
            print(f"  job {job['jobId']:4d} {dur:7.0f} ms  {desc:70s} {' | '.join(parts)}")
            total_ms += dur
        # Stage details of the last batch's jobs (the last two: aggregate and load).
        for job in sorted(jobs, key=lambda j: j["jobId"])[-2:]:
            for sid in job["stageIds"]:
                for st in _get(base, f"/stages/{sid}"):
                    detail = " ".join(
                        f"{k}={st.get(k)}" for k in _STAGE_METRICS if st.get(k) is not None
                    )
                    print(f"  stage {sid} ({job['jobId']}): {st.get('name', '')[:40]} {detail}")
        print(f"  {total_ms:.0f} ms in {len(jobs)} Spark jobs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
