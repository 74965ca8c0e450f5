"""The sink's exactly-once protocol on the driver, per micro-batch (numbers only, never a gate).

    .venv/bin/python -m benchmarks.sink_protocol [--batches 180] [--rounds 6]

Runs :class:`sinks.starrocks.committer.MultiTableCommitter` against the StarRocks emulator
over HTTP, as the sink does on the driver, with a load job that sends one row through the
same API instead of Spark's executors. It alternates rounds of batches checked for an earlier
attempt (a run's first batch, a replay) and fresh ones (every later batch,
``BatchPlan.fresh``), and prints the driver's FE calls (the data load is the executors') and
its time per batch, the data load included, for each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from devstack.starrocks.launcher import start_emulator
from devstack.starrocks.recording import RecordedApi
from sinks.starrocks.client import StarRocksClient
from sinks.starrocks.committer import BatchPlan, MultiTableCommitter, Outcome
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.httpapi import HttpTxnApi
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.sink import StarRocksSink
from sinks.starrocks.txnapi import LoadReport

DB = "bench"
TABLE = "orders"
ROW = {"order_id": 1, "version": 1}
PROGRESS = {"pipeline": "bench", "topic": "cdc", "kafka_partition": 0, "last_offset": 9}


def main(argv: Sequence[str] | None = None) -> None:
    """Run the rounds and print one line per kind of batch."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=180, help="batches of each kind")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    per_round = max(1, args.batches // args.rounds)
    with tempfile.TemporaryDirectory(prefix="sink-protocol-") as tmp:
        emulator = start_emulator(Path(tmp) / "sr", stderr_path=Path(tmp) / "emulator.log")
        try:
            sr = emulator.handle
            sr.sql(f"CREATE DATABASE {DB}")
            sr.sql(
                f"CREATE TABLE {DB}.{TABLE} (order_id BIGINT NOT NULL, version INT) "
                "PRIMARY KEY(order_id) DISTRIBUTED BY HASH(order_id)"
            )
            config = StarRocksSinkConfig.from_options(
                {
                    "load-url": f"{sr.host}:{sr.fe_port}",
                    "jdbc-url": f"jdbc:mysql://{sr.host}:{sr.query_port}",
                    "database-name": DB,
                    "table-name": TABLE,
                    "username": sr.user,
                    "password": sr.password,
                    "sink.label-prefix": "bench",
                    "sink.pipeline-name": "bench",
                }
            )
            StarRocksSink(config, lambda: "bench").open()  # creates the progress table
            client = StarRocksClient(config)
            executors = HttpTxnApi(client, txn_timeout_s=60)  # not the driver's calls
            api = RecordedApi(executors, [])
            body = json.dumps([ROW]).encode()

            def job(labels: Mapping[str, str], multi: bool) -> Sequence[LoadReport]:
                for table, label in labels.items():
                    executors.load(label, table, body, multi=multi)
                return [LoadReport(table, rows=1, requests=1) for table in labels]

            policy = RetryPolicy(
                max_retries=3, base_s=0.02, cap_s=0.2, check_timeout_s=5.0, batch_max_attempts=3
            )
            times: dict[bool, list[float]] = {False: [], True: []}
            calls: dict[bool, list[int]] = {False: [], True: []}
            batch_id = 0
            for _ in range(args.rounds):
                for fresh in (False, True):
                    for _ in range(per_round):
                        plan = BatchPlan(
                            "bench",
                            "bench-query",
                            batch_id,
                            (TABLE,),
                            config.progress_table,
                            ({**PROGRESS, "batch_id": batch_id},),
                            fresh=fresh,
                        )
                        before = len(api.calls)
                        started = time.perf_counter()
                        result = MultiTableCommitter(api, job, policy).run(plan)
                        times[fresh].append((time.perf_counter() - started) * 1000)
                        calls[fresh].append(len(api.calls) - before)
                        if result.outcome is not Outcome.COMMITTED:
                            raise SystemExit(f"batch {batch_id}: {result.outcome}")
                        batch_id += 1
            client.close()
        finally:
            emulator.stop()
    for fresh, name in (
        (False, "checked (a run's first batch)"),
        (True, "fresh (every later one)"),
    ):
        ms = sorted(times[fresh])
        print(
            f"{name}: {len(ms)} batches, FE calls per batch {statistics.mean(calls[fresh]):.0f}, "
            f"ms per batch median {statistics.median(ms):.1f}, "
            f"p90 {ms[int(len(ms) * 0.9)]:.1f}"
        )


if __name__ == "__main__":
    main()
