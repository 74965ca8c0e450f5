"""What an idle pipeline costs (issue 14, target 5; numbers only, never a gate).

    .venv/bin/python -m benchmarks.idle [--seconds 60] [--trigger-ms 1000]

The pipeline as users run it (``spark-submit.sh``, local[2]) on the local stack: a few
transactions are committed, one more is left open (BEGIN and a DATA event, no END, so the
state store holds an open transaction with a deadline), then nothing arrives for
``--seconds``. Over that window it reports the CPU seconds of the whole process tree (driver
JVM, Python driver, Python workers) per minute, the micro-batches Spark ran, and the StarRocks
transactions begun. Each ``--set`` variant runs on its own fresh stack, so the default can be
compared with e.g. ``pipeline.idle-batches=true`` (no-data batches and Spark's state timeouts).
``make bench`` runs the default once, on its own stack (``idle_window``, part ``idle``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.procstat import window_cpu_seconds
from devstack.kafka.admin import create_topic, produce, produce_by_partition
from devstack.pipeline_process import PipelineProcess
from devstack.stack import LOCAL_CONFIG, LocalStack, wait_caught_up

TOPIC = "cdc.idle"
NAME = "idle"


def order_txn(order_id: int, *, end: bool = True) -> list[bytes]:
    txn = f"o{order_id}"
    row = {
        "order_id": order_id,
        "customer_id": 7,
        "item_count": 0,
        "total_amount": 0,
        "version": 1,
        "order_status": "NEW",
        "updated_ts_ms": int(time.time() * 1000),
    }
    events: list[dict[str, Any]] = [
        {"txn_id": txn, "type": "TXN_BEGIN", "source_ts_ms": row["updated_ts_ms"]},
        {
            "txn_id": txn,
            "type": "DATA",
            "database": "demo",
            "table": "orders",
            "op": "UPSERT",
            "row": json.dumps(row),
        },
    ]
    if end:
        events.append({"txn_id": txn, "type": "TXN_END", "event_count": 1})
    return [json.dumps(e).encode() for e in events]


def measure(workdir: Path, seconds: float, trigger_ms: int, settings: list[str]) -> dict[str, Any]:
    """One fresh stack, one pipeline, one idle window."""
    with LocalStack(workdir / "stack") as stack:
        stack.apply_ddl()
        return idle_window(stack, workdir, seconds, trigger_ms, settings)


def idle_window(
    stack: LocalStack, workdir: Path, seconds: float, trigger_ms: int, settings: list[str]
) -> dict[str, Any]:
    """One pipeline on ``stack`` (its demo tables created, no topic ``TOPIC`` yet), idle."""
    create_topic(stack.bootstrap, TOPIC, 2)
    values = {p: [v for i in range(5) for v in order_txn(p * 100 + i)] for p in (0, 1)}
    produce_by_partition(stack.bootstrap, TOPIC, values, key=b"k")
    overrides = stack.pipeline_overrides(TOPIC, workdir / "checkpoint", NAME)
    extra = [f"starrocks.sink.buffer-flush.interval-ms={trigger_ms}", *settings]
    proc = PipelineProcess(LOCAL_CONFIG, [*overrides, *extra], workdir / "pipeline.log")
    proc.start()
    assert proc.process is not None
    pid = proc.process.pid
    try:
        conn = stack.connect()
        try:
            if not wait_caught_up(conn, NAME, TOPIC, {0: 15, 1: 15}, 300):
                msg = f"pipeline did not catch up; see {workdir / 'pipeline.log'}"
                raise RuntimeError(msg)
        finally:
            conn.close()
        # An open transaction: its state (and, with idle batches, a Spark timeout) stays.
        produce(stack.bootstrap, TOPIC, order_txn(999, end=False), partition=0, key=b"k")
        time.sleep(max(5.0, 3 * trigger_ms / 1000))  # it is read, the batch settles
        assert stack.emulator is not None
        control = stack.emulator.control
        txns_before = len(control.transactions())
        batches_before = sum(line.startswith("batch ") for line in proc.lines)
        cpu = window_cpu_seconds(pid, seconds)
        batches = sum(line.startswith("batch ") for line in proc.lines) - batches_before
        txns = len(control.transactions()) - txns_before
    finally:
        proc.stop()
    return {
        "settings": settings,
        "idle_seconds": seconds,
        "trigger_ms": trigger_ms,
        "cpu_seconds_per_minute": round(cpu * 60 / seconds, 2),
        "micro_batches": batches,
        "starrocks_transactions_begun": txns,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure the default and each ``--variant`` (a comma-separated list of ``--set`` items)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.idle", description=__doc__)
    parser.add_argument("--workdir", type=Path, default=Path("var/bench-idle"))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--trigger-ms", type=int, default=1000)
    parser.add_argument("--variant", action="append", default=[], help="k=v[,k=v...]")
    args = parser.parse_args(argv)
    results = []
    for i, variant in enumerate(["", *args.variant]):
        workdir = args.workdir / f"run{i}"
        if workdir.exists():
            shutil.rmtree(workdir)
        settings = [s for s in variant.split(",") if s]
        print(f"[idle] run {i + 1}/{1 + len(args.variant)}: {settings or 'defaults'}", flush=True)
        results.append(measure(workdir, args.seconds, args.trigger_ms, settings))
        print(json.dumps(results[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
