"""``make demo``: the orders demo end to end on the local stack, with a verdict and numbers.

Starts Apache Kafka and the StarRocks emulator, creates the tables, starts the
pipeline through ``spark-submit.sh``, produces CDC transactions at a steady rate while a
verifier watches the invariants, waits until the sink has caught up, stops everything it
started and prints the verdict. Exit status 0 = pass.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from demo.generate import GeneratorConfig, generate
from demo.verify import run, watch
from demo.workload import WorkloadConfig
from devstack.pipeline_process import PipelineProcess
from devstack.progress import wait_with_progress
from devstack.stack import (
    LOCAL_CONFIG,
    LatencySampler,
    LocalStack,
    committed_offsets,
    topic_end_offsets,
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (all have demo-sized defaults)."""
    p = argparse.ArgumentParser(prog="python -m devstack.demo", description=__doc__)
    p.add_argument("--orders", type=int, default=2000, help="orders created (plus updates/deletes)")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--encoding", choices=("json", "avro", "confluent"), default="json")
    p.add_argument("--rate", type=float, default=100.0, help="transactions per second produced")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--workdir", type=Path, default=Path("var/demo"))
    p.add_argument("--catch-up-timeout", type=float, default=300.0)
    p.add_argument("--set", action="append", default=[], help="extra pipeline --set items")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; return 0 when the verifier passes."""
    args = parse_args(argv)
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    topic, name = "cdc.orders", "orders-demo"
    step = _Steps()
    stack = LocalStack(args.workdir / "stack")
    pipeline: PipelineProcess | None = None
    try:
        step("starting Apache Kafka (KRaft) and the StarRocks emulator")
        stack.start()
        assert stack.emulator is not None
        print(
            f"    broker {stack.bootstrap}   emulator fe={stack.emulator.fe_url} "
            f"query port={stack.emulator.query_port}"
        )
        step("creating tables (demo/sql/orders.sql)")
        stack.apply_ddl()

        step("starting the pipeline: ./spark-submit.sh --config conf/local.yaml")
        overrides = stack.pipeline_overrides(topic, args.workdir / "checkpoint", name)
        overrides += [f"assembler.encoding={args.encoding}", *args.set]
        if args.encoding == "confluent":
            overrides.append("assembler.registry-schemas=1:conf/events.avsc")
        # The topic exists before the query starts, so its partitions are known at once.
        workload = WorkloadConfig(orders=args.orders, partitions=args.partitions, seed=args.seed)
        gen_config = GeneratorConfig(
            bootstrap=stack.bootstrap,
            topic=topic,
            workload=workload,
            encoding=args.encoding,
            truth_path=args.workdir / "truth.json",
            rate=args.rate,
            create_topic=True,
        )
        pipeline = PipelineProcess(
            LOCAL_CONFIG, overrides, args.workdir / "pipeline.log", echo=True
        )
        _create_topic(stack.bootstrap, topic, args.partitions)
        pipeline.start()
        if not pipeline.wait_for_line("query started", 180):
            print("pipeline did not start; see", args.workdir / "pipeline.log")
            return 1

        step(f"producing ~{args.orders} orders as CDC transactions at {args.rate:.0f} txn/s")
        stop_watch = threading.Event()
        watch_result: list[object] = []
        conn = stack.connect()
        watcher = threading.Thread(
            target=lambda: watch_result.append(
                watch(conn, 24 * 3600, interval_s=0.2, stop_event=stop_watch)
            ),
            daemon=True,
        )
        watcher.start()
        sampler = LatencySampler(stack.sql_settings()).start()
        started = time.monotonic()
        result = generate(gen_config)
        produced_s = time.monotonic() - started
        print(
            f"    produced {result.transactions} transactions, {result.events} events "
            f"in {produced_s:.1f} s"
        )

        step("waiting until every transaction is visible in StarRocks")
        ends = topic_end_offsets(stack.bootstrap, topic, args.partitions)
        check = stack.connect()
        goal = sum(ends.values())

        def visible() -> tuple[int, int]:
            """Records whose transaction is visible (or dead-lettered) in StarRocks, of all."""
            try:
                got = committed_offsets(check, name, topic)
            except Exception:
                got = {}
            return sum(min(got.get(p, -1) + 1, end) for p, end in ends.items()), goal

        caught_up = wait_with_progress(
            "    records committed", visible, args.catch_up_timeout, every_s=5.0
        )
        total_s = time.monotonic() - started
        sampler.stop()
        stop_watch.set()
        watcher.join(30)

        step("stopping the pipeline")
        pipeline.stop()
        pipeline = None

        step("verifying: invariants, then exactly-once against the ground truth")
        verdict = run(check, truth=result.truth)
        print(verdict.render())
        watched = watch_result[0] if watch_result else None
        rows = result.counts.data_rows
        # A transaction applied twice may leave the tables as they were: count the loads.
        rows_loaded = stack.rows_loaded(workload.database, result.counts.data_events.keys())
        latency = sampler.percentiles()
        steady = sampler.percentiles(steady=True)
        print()
        print("numbers")
        print(f"  transactions          {result.transactions}")
        print(f"  row changes           {rows}")
        print(f"  caught up             {'yes' if caught_up else 'NO (timeout)'}")
        print(f"  end-to-end time       {total_s:.1f} s (production took {produced_s:.1f} s)")
        print(
            f"  throughput            {rows / total_s:,.0f} rows/s, "
            f"{result.transactions / total_s:,.0f} txn/s (bounded by --rate)"
        )
        for title, lat in (("all transactions", latency), ("after warm-up", steady)):
            if lat:
                print(
                    f"  visibility latency    {title}: p50 {lat['p50']:.0f} ms  "
                    f"p95 {lat['p95']:.0f} ms  p99 {lat['p99']:.0f} ms  max {lat['max']:.0f} ms"
                    f"  ({lat['n']:.0f} txns)"
                )
        print(f"  rows loaded           {rows_loaded} of the {rows} sent (each exactly once)")
        if watched is not None:
            print(
                f"  watch checks          {getattr(watched, 'checks', '?')} "
                f"(partial-visibility observations: "
                f"{getattr(watched, 'checks_with_violations', '?')})"
            )
        ok = caught_up and verdict.passed and _watch_ok(watched) and rows_loaded == rows
        print()
        print(f"DEMO {'PASSED' if ok else 'FAILED'}")
        return 0 if ok else 1
    finally:
        if pipeline is not None:
            pipeline.kill()
        stack.stop()


def _watch_ok(watched: object) -> bool:
    return watched is None or bool(getattr(watched, "ok", True))


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from devstack.kafka.admin import create_topic

    create_topic(bootstrap, topic, partitions)


class _Steps:
    def __init__(self) -> None:
        self.n = 0
        self.t0 = time.monotonic()

    def __call__(self, text: str) -> None:
        self.n += 1
        print(f"[{time.monotonic() - self.t0:6.1f}s] {self.n}. {text}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
