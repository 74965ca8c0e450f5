"""``make bench``: the pipeline end to end next to its ceilings, scaling sweeps, latency, memory.

    .venv/bin/python -m benchmarks.run [--quick] [--out results/bench] [--skip e2e,sweeps,...]

Starts its own Apache Kafka broker and StarRocks emulator (loopback, fresh data dirs under
``--out``), then measures, on the same synthetic CDC data (``benchmarks.workload``):

1. ceilings: the broker's consume rate (one confluent-kafka consumer on the real broker), the
   emulator's ingest (begin -> load -> commit of the same rows, batch-sized transactions), and
   in one warm local[2] SparkSession reading through Spark's Kafka connector: source -> noop,
   source -> bare ``applyInPandasWithState`` (trivial function), source -> real assembler ->
   noop, and a pass-through pipeline (source -> decode -> plain Stream Load, no assembly, no
   exactly-once protocol);
2. the pipeline in the same session (``app.pipeline.start_query`` + the real sink) and the
   ratios pipeline / each ceiling;
3. the assembler alone over a parquet file stream: real state machine vs trivial function;
4. scaling: partitions, transaction size, row size (throughput); the pipeline's own cost at 4
   and 64 partitions in steady state (target 6: longer queries, their first batches left
   out); trigger interval (visibility latency at a steady rate); state memory with many open
   transactions;
5. the pipeline as users run it (``spark-submit.sh``): catch-up rate on a pre-filled topic
   with py-spy profiles of the Python workers and driver, then visibility latency at a steady
   rate, with peak RSS of the JVM, the Python driver and the Python workers;
6. the pipeline idle (``benchmarks.idle``): its CPU per minute, micro-batches and StarRocks
   transactions while nothing arrives, with an open transaction's timeout pending.

One line per step with the elapsed time and an ETA (``devstack.progress``). Writes
``report.md``, ``results.json`` and PNG plots to ``--out`` and prints the summary. Never gates
anything: it reports numbers and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks import spark_queries
from benchmarks.report import TARGETS
from benchmarks.spark_queries import SOURCE
from devstack.progress import Progress

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Sizes:
    """How much data each part uses (``--quick`` shrinks everything for a smoke run)."""

    main_rows: int
    max_offsets: int
    sweep_rows: int
    asm_rows: int
    trigger_run_s: float
    steady_s: float
    steady_rate: float  # transactions/s (10 rows each)
    trigger_rate: float
    open_rows: tuple[int, ...]
    open_partitions: int
    ceiling_rounds: int
    ceiling_warm_up_round: bool  # one more round of the ceilings first, not counted
    sweep_rounds: int
    sweep_batches: int  # micro-batches per sweep run (the first one is left out of warm rates)
    flat_rounds: int  # rounds of the steady target-6 pair (4 and 64 partitions alternating)
    flat_batches: int  # micro-batches per query of that pair
    flat_skip: int  # its first batches, left out (a query's first seconds cost more)
    idle_s: float  # seconds of the idle window
    peer_orders: int  # the demo workload both systems read in the peer part (target 2)
    peer_rounds: int  # runs of each system over it, the order alternating


FULL = Sizes(
    # 16 micro-batches a run: with 4 (100,000 rows) one run's first batch and timing jitter
    # moved pipeline / bare by +-0.15 between runs (medians 0.54-0.90 on 11-28); two 16-batch
    # runs at 18:28 and 18:42 gave medians 0.59 and 0.58 (docs/bench/history.md, "Longer ceilings").
    main_rows=400_000,
    max_offsets=30_000,
    sweep_rows=45_000,
    asm_rows=100_000,
    trigger_run_s=20,
    # Three minutes: the JVM's JIT compiles for minutes after a start, and p99 over 40 s was
    # the worst ~1 % of ~80 batches (docs/bench/history.md, "The JIT in the steady window").
    steady_s=180,
    steady_rate=100,
    trigger_rate=50,
    open_rows=(250, 1000, 4000),
    open_partitions=16,
    # Five: one round of a query moves by up to half on a busy 2-core machine (pipeline over
    # bare 0.65 / 0.80 / 0.40 in three rounds on 11-27); the median of five moves less.
    ceiling_rounds=5,
    ceiling_warm_up_round=True,
    # Five too: the pipeline's own cost at 64 partitions was 34.0 / 51.0 / 52.0 µs per row in
    # three rounds on 11-28, so one round moved the 64 / 4 ratio by a third.
    sweep_rounds=5,
    sweep_batches=15,
    # 45-batch queries, their first 10 left out: the first ~20-30 batches of a query cost more,
    # the more so in a session's first queries at a shape (docs/benchmarks.md, "Target 6 in
    # steady state").
    flat_rounds=5,
    flat_batches=45,
    flat_skip=10,
    idle_s=60,
    # 50,000 orders: 372,741 row changes, 109 MB of events; each system takes 15-30 s over
    # them, start-up included (docs/benchmarks.md, "Side by side with the seed's own system").
    peer_orders=50_000,
    peer_rounds=2,
)
QUICK = Sizes(
    main_rows=4_000,
    max_offsets=2_000,
    sweep_rows=1_000,
    asm_rows=4_000,
    trigger_run_s=6,
    steady_s=8,
    steady_rate=20,
    trigger_rate=20,
    open_rows=(50, 200),
    open_partitions=4,
    ceiling_rounds=1,
    ceiling_warm_up_round=False,
    sweep_rounds=1,
    sweep_batches=5,
    flat_rounds=1,
    flat_batches=6,
    flat_skip=2,
    idle_s=10,
    peer_orders=1_000,
    peer_rounds=1,
)
PARTS = (
    "ceilings",
    "assembler",
    "sweeps",
    "flat",
    "latency",
    "state",
    "catchup",
    "steady",
    "idle",
    "peer",
    "profile",
)
#: The steady target-6 pair: its shapes' partitions and records per micro-batch (the sweep's).
FLAT_PARTITIONS = (4, 64)
FLAT_BATCH_RECORDS = 3_600
#: The in-process queries of the ceilings part, in the order they run.
CEILING_QUERIES = (
    "source_only",
    "bare_stateful",
    "source_assembler",
    "passthrough",
    "pipeline_load_job",
    "pipeline",
    "pipeline_writes_off",
)
#: A diagnostic, not a target: the pipeline with the emulator dropping the data table's rows at
#: commit (``EmulatorControl.discard_rows``). StarRocks writes them on its own nodes; the
#: stand-in writes them in SQLite on the two cores under test, in the batch's serial commit.
WRITES_OFF = "pipeline_writes_off"
#: The pipeline as it loaded before tasks loaded what they assemble (``sink.load-in-task``).
LOAD_JOB = ["starrocks.sink.load-in-task=false"]
# Rough seconds of each step at full sizes on a quiet 2-core machine: the ETA's weights
# (devstack.progress scales them by how fast the run actually goes).
STEP_WEIGHTS = {
    "stack": 15.0,
    "prefill": 15.0,
    "broker": 3.0,
    "emulator": 5.0,
    "warm-up": 25.0,
    # 16 batches a run (main_rows)
    "source_only": 8.0,
    "bare_stateful": 14.0,
    "source_assembler": 18.0,
    "passthrough": 18.0,
    "pipeline_load_job": 32.0,
    "pipeline": 22.0,
    "pipeline_writes_off": 20.0,
    "assembler": 60.0,
    "sweeps": 150.0,
    "flat": 300.0,
    "latency": 100.0,
    "state": 40.0,
    "catchup": 60.0,
    "steady": 450.0,
    "idle": 90.0,
    "peer": 150.0,
}


def plan_steps(
    skip: set[str], rounds: int = 1, sweep_rounds: int = 1, warm_up_round: bool = False
) -> list[tuple[str, float]]:
    """The steps ``main`` will announce, in order, with their ETA weights.

    ``rounds``: how many times the ceiling queries run, one after the other each round;
    ``warm_up_round``: one more round before them, not counted;
    ``sweep_rounds``: the same for the sweeps' shapes (one step).
    """
    steps: list[tuple[str, float]] = [("start broker + emulator", STEP_WEIGHTS["stack"])]
    if "ceilings" not in skip:
        steps += [
            ("ceilings: prefill", STEP_WEIGHTS["prefill"]),
            ("broker consume", STEP_WEIGHTS["broker"]),
            ("emulator ingest", STEP_WEIGHTS["emulator"]),
        ]
        if not warm_up_round:
            steps.append((f"warm-up ({SOURCE})", STEP_WEIGHTS["warm-up"]))
        steps += [
            (_round_label(f"{query} ({SOURCE})", r, rounds), STEP_WEIGHTS[query])
            for r in range(0 if warm_up_round else 1, rounds + 1)
            for query in CEILING_QUERIES
        ]
    # The ceilings' steps are above; the profile rides on the catch-up, no step of its own.
    for part in PARTS:
        if part not in skip and part not in ("ceilings", "profile"):
            label = part if part == "assembler" else f"{part} ({SOURCE})"
            weight = STEP_WEIGHTS[part] * (sweep_rounds if part == "sweeps" else 1)
            steps.append((label, weight))
    return steps


def _round_label(label: str, r: int, rounds: int) -> str:
    if r == 0:
        return f"{label}, warm-up round"
    return f"{label}, round {r}/{rounds}" if rounds > 1 else label


def git_commit() -> str:
    """The checked-out commit (``+dirty`` with local changes), for the report."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def other_load() -> list[str]:
    """Other heavy processes on the machine (chaos soaks, test suites), for the report."""
    from benchmarks.procstat import cmdline, descendants

    mine = set(descendants(os.getpid()))
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        cmd = cmdline(int(entry.name))
        if any(k in cmd for k in ("devstack.chaos", "pytest", "org.apache.spark.deploy")):
            out.append(cmd[:120])
    return out


class Bench:
    """Holds the stack, the Spark session and the results while the parts run."""

    def __init__(self, out: Path, sizes: Sizes) -> None:
        from devstack.progress import Progress
        from devstack.stack import LocalStack

        self.out = out
        self.sizes = sizes
        self.stack = LocalStack(out / "stack")
        self.results: dict[str, Any] = {}
        self._spark: Any = None
        self.progress = Progress([], emit=log)

    def step(self, label: str) -> None:
        """Announce the next planned step (one line, elapsed time, ETA)."""
        self.progress.step(label)

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from benchmarks import spark_queries as q

            log("starting the SparkSession (local[2])")
            self._spark = q.make_session()
        return self._spark

    def stop_spark(self) -> None:
        if self._spark is not None:
            self._spark.stop()
            self._spark = None

    def ddl(self) -> None:
        from benchmarks.workload import create_tables

        create_tables(self.stack)

    def measure_ceiling(self, q: Any, name: str, start: Any, kw: dict[str, Any]) -> Any:
        """One ceiling query's run; ``WRITES_OFF`` with the emulator dropping the data rows."""
        if name != WRITES_OFF:
            return q.measure(name, start, **kw)
        from benchmarks.workload import DATABASE, TABLE

        control = self.stack.emulator.control
        control.discard_rows([f"{DATABASE}.{TABLE}"])
        try:
            return q.measure(name, start, **kw)
        finally:
            control.discard_rows([])

    def truncate(self) -> None:
        from benchmarks.workload import DATABASE, TABLE

        conn = self.stack.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"TRUNCATE TABLE {DATABASE}.{TABLE}")
        finally:
            conn.close()

    def topic(self, shape: Any, prefix: str) -> str:
        from devstack.kafka import create_topic

        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        create_topic(self.stack.bootstrap, name, shape.partitions)
        return name

    def prefill(self, shape: Any, rows: int, prefix: str, *, close: bool = True) -> tuple[str, Any]:
        from benchmarks.workload import prefill

        topic = self.topic(shape, prefix)
        t0 = time.perf_counter()
        produced = prefill(self.stack.bootstrap, topic, shape, rows, close=close)
        log(
            f"  produced {produced.records:,} records ({produced.rows:,} rows, "
            f"{shape.label()}) to {topic} in {time.perf_counter() - t0:.1f} s"
        )
        return topic, produced

    def warm_up(self) -> None:
        """One tiny query through each kind of plan, so every measured query runs warm."""
        from benchmarks import spark_queries as q
        from benchmarks.workload import Shape

        shape = Shape(2, 10, 100)
        topic, prod = self.prefill(shape, 1000, "warm")
        kw = {"records": prod.records, "rows": prod.rows, "row_bytes": prod.row_bytes}
        src = q.kafka_stream(self.spark, self.stack.bootstrap, topic, 1000)
        q.measure("warm-bare", q.to_noop(q.trivial_stateful(src), "warm_bare"), **kw)
        q.measure(
            "warm-pipeline",
            q.pipeline(self.spark, self.stack, topic, 1000, f"warm-{uuid.uuid4().hex[:6]}"),
            **kw,
        )

    # -- 1 + 2: ceilings and the pipeline on the same data -------------------------------------

    def ceilings(self) -> None:
        from benchmarks import spark_queries as q
        from benchmarks.broker_consume import raw_rate
        from benchmarks.workload import Shape

        s = self.sizes
        shape = Shape(4, 10, 100)
        self.step("ceilings: prefill")
        topic, prod = self.prefill(shape, s.main_rows, "main")
        self.results["main"] = {
            "shape": shape.label(),
            "topic": topic,
            "records": prod.records,
            "rows": prod.rows,
            "row_bytes": prod.row_bytes,
            "value_bytes": prod.value_bytes,
            "max_offsets_per_trigger": s.max_offsets,
        }
        self.main_topic, self.main_prod, self.main_shape = topic, prod, shape
        rows_per_record = prod.rows / prod.records
        shared: dict[str, Any] = {}

        self.step("broker consume")
        rec_s = raw_rate(self.stack.bootstrap, topic, shape.partitions, prod.records)
        shared["broker"] = {
            "name": "broker",
            "rows_per_s": rec_s * rows_per_record,
            "records_per_s": rec_s,
            "mb_per_s": rec_s * rows_per_record * prod.row_bytes / prod.rows / 1e6,
        }

        self.step("emulator ingest")
        shared["emulator"] = emulator_ingest(self, prod, rows_per_record)

        if not s.ceiling_warm_up_round:
            # The warm-up round below runs every query on the real data; without it, one tiny
            # query through each kind of plan.
            self.step(f"warm-up ({SOURCE})")
            self.warm_up()
        kw = {"records": prod.records, "rows": prod.rows, "row_bytes": prod.row_bytes}

        def plan(name: str) -> Any:
            src = q.kafka_stream(self.spark, self.stack.bootstrap, topic, s.max_offsets)
            if name == "source_only":
                return q.to_noop(src, "b_source")
            if name == "bare_stateful":
                return q.to_noop(q.trivial_stateful(src), "b_bare")
            if name == "source_assembler":
                return q.to_noop(q.real_assembler(src), "b_asm")
            if name == "passthrough":
                return q.passthrough(self.spark, self.stack, topic, s.max_offsets, "b_pt")
            extra = LOAD_JOB if name == "pipeline_load_job" else None
            tag = f"bench-{uuid.uuid4().hex[:6]}"
            return q.pipeline(self.spark, self.stack, topic, s.max_offsets, tag, extra)

        # Each query runs once per round, rounds one after the other, so that a burst of
        # other load hits one round of every query, not every round of one; each query's
        # median round is the one compared (one run of 16 batches varies by ~+-10 %). Round 0
        # is not counted: the JIT has compiled little by then, and the ceilings gain more from
        # it than the pipeline (over bare, first rounds 1.15 and 0.93 against 0.49-0.83 after,
        # two nine-round runs on 11-28; docs/bench/history.md, "Cold rounds").
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in CEILING_QUERIES}
        cold: dict[str, float] = {}
        for r in range(0 if s.ceiling_warm_up_round else 1, s.ceiling_rounds + 1):
            for name in CEILING_QUERIES:
                self.step(_round_label(f"{name} ({SOURCE})", r, s.ceiling_rounds))
                if name in ("passthrough", "pipeline_load_job", "pipeline"):
                    self.truncate()
                run = self.measure_ceiling(q, name, plan(name), kw)
                if r == 0:
                    cold[name] = run.rows_per_s
                else:
                    rounds[name].append(run.as_dict())
                log(
                    f"  {run.rows_per_s:,.0f} rows/s ({run.batches} batches, "
                    f"{run.batch_s:.1f} s; wall {run.wall_s:.1f} s; "
                    f"{run.rows_per_cpu_s:,.0f} rows/cpu-s)"
                )
        runs = {**shared, **{name: median_round(done) for name, done in rounds.items()}}
        self.results["ceilings"] = {
            **ceiling_ratios(runs),
            "source": SOURCE,
            "warm_up_round_rows_per_s": cold,
        }

    # -- 3: the assembler alone ------------------------------------------------------------------

    def assembler(self) -> None:
        from benchmarks import assembler_spark
        from benchmarks.workload import Shape

        self.step("assembler")
        log("assembler alone (parquet feed): real state machine vs trivial function")
        res = assembler_spark.run(
            self.spark,
            self.out / "work",
            Shape(4, 10, 100),
            self.sizes.asm_rows,
            self.sizes.max_offsets,
        )
        self.results["assembler"] = res
        log(
            f"  real {res['real']['rows_per_s']:,.0f} rows/s, trivial "
            f"{res['trivial']['rows_per_s']:,.0f} rows/s, ratio {res['ratio']:.2f}"
        )

    # -- 4: scaling ------------------------------------------------------------------------------

    def sweeps(self) -> None:
        from benchmarks import spark_queries as q
        from benchmarks.workload import Shape

        s = self.sizes
        points = {
            "partitions": [Shape(p, 10, 100) for p in (1, 4, 16, 64)],
            "txn_rows": [Shape(4, 1, 100), Shape(4, 10, 100), Shape(4, 1000, 100)],
            "row_bytes": [Shape(4, 10, 100), Shape(4, 10, 1000)],
        }
        self.step(f"sweeps ({SOURCE})")
        shapes = list(dict.fromkeys(shape for shapes in points.values() for shape in shapes))
        data: dict[Shape, tuple[str, Any]] = {}
        for shape in shapes:
            # Transactions of 1000 rows: at least 8 per partition every five batches.
            rows = max(s.sweep_rows, shape.partitions * shape.txn_rows * 8 * s.sweep_batches // 5)
            if shape.txn_rows >= 1000 and s is QUICK:
                rows = shape.partitions * shape.txn_rows * 2
            data[shape] = self.prefill(shape, rows, "sweep")
        # Every shape once per round, rounds one after the other (as the ceilings): each
        # shape's median round is reported, by the warm rate.
        runs: dict[Shape, dict[str, list[dict[str, Any]]]] = {
            shape: {"pipeline": [], "bare": [], "source": []} for shape in shapes
        }
        for r in range(1, s.sweep_rounds + 1):
            for shape in shapes:
                topic, prod = data[shape]
                kw = {"records": prod.records, "rows": prod.rows, "row_bytes": prod.row_bytes}
                # The first batch's start is reported apart from the warm rate; fifteen
                # batches, not five: a four-batch warm rate of ~2 s varied by +-8 % between
                # rounds (64 / 4 partitions 0.96, 0.80, 0.90 in three rounds at 20:18).
                per_batch = max(1, prod.records // s.sweep_batches)
                src = q.kafka_stream(self.spark, self.stack.bootstrap, topic, per_batch)
                # Spark's own reading of the topic, which grows with its partitions: what the
                # pipeline costs beyond it is the product's (own_us_per_row).
                read = q.measure("source", q.to_noop(src, "sweep_source"), **kw)
                bare = q.measure("bare", q.to_noop(q.trivial_stateful(src), "sweep_bare"), **kw)
                self.truncate()
                name = f"sweep-{uuid.uuid4().hex[:6]}"
                pipe = q.measure(
                    "pipeline", q.pipeline(self.spark, self.stack, topic, per_batch, name), **kw
                )
                runs[shape]["pipeline"].append(pipe.as_dict())
                runs[shape]["bare"].append(bare.as_dict())
                runs[shape]["source"].append(read.as_dict())
                log(
                    f"  {shape.label()}{_round_label('', r, s.sweep_rounds)}: pipeline "
                    f"{pipe.rows_per_s:,.0f} rows/s ({pipe.mb_per_s:.2f} MB/s), bare "
                    f"{bare.rows_per_s:,.0f} rows/s; after the first batch: pipeline "
                    f"{pipe.extra.get('warm_rows_per_s', 0.0):,.0f}, bare "
                    f"{bare.extra.get('warm_rows_per_s', 0.0):,.0f}, source -> noop "
                    f"{read.extra.get('warm_rows_per_s', 0.0):,.0f} rows/s"
                )
        done: dict[Shape, dict[str, Any]] = {}
        for shape in shapes:
            pipe_d = median_round(runs[shape]["pipeline"], "warm_rows_per_s")
            bare_d = median_round(runs[shape]["bare"], "warm_rows_per_s")
            own = own_costs(runs[shape]["pipeline"], runs[shape]["source"])
            warm = {
                "pipeline": pipe_d.get("warm_rows_per_s", 0.0),
                "bare": bare_d.get("warm_rows_per_s", 0.0),
            }
            done[shape] = {
                "shape": shape.label(),
                "partitions": shape.partitions,
                "txn_rows": shape.txn_rows,
                "row_bytes": shape.row_bytes,
                "rows": data[shape][1].rows,
                "pipeline": pipe_d,
                "bare_stateful": bare_d,
                "source": median_round(runs[shape]["source"], "warm_rows_per_s"),
                "own_us_per_row": statistics.median(own) if own else None,
                "rounds_own_us_per_row": own,
                "ratio": (
                    pipe_d["rows_per_s"] / bare_d["rows_per_s"] if bare_d["rows_per_s"] else 0.0
                ),
                "warm_ratio": warm["pipeline"] / warm["bare"] if warm["bare"] else 0.0,
            }
        self.results["sweeps"] = {
            axis: [done[shape] for shape in shapes] for axis, shapes in points.items()
        }

    def flat(self) -> None:
        """Target 6 in steady state: the pipeline's own cost per row at 4 and at 64 partitions.

        The sweep's 15-batch runs measure a query's first seconds, which cost more at 64
        partitions, and one of its rounds moved the 64 / 4 ratio by a third. Here each query
        reads ``flat_batches`` batches of the sweep's size and the first ``flat_skip`` are left
        out; the two shapes alternate their order round by round, and each pipeline run has
        the source -> noop run just before it subtracted (:func:`steady_own_us_per_row`).
        Bare ``applyInPandasWithState`` grouped by slot runs between them, measured the same
        way: the part of the growth that is Spark's stateful plan, not the product's.
        Each query starts once the one before has no consumer left in Spark's cache: a
        64-partition pipeline started right after source -> noop paid ~3.5 µs a record more
        for that query's idle consumers (docs/benchmarks.md, "Target 6 in steady state").
        """
        from benchmarks import spark_queries as q
        from benchmarks.workload import Shape

        s = self.sizes
        self.step(f"flat ({SOURCE})")
        shapes = [Shape(p, 10, 100) for p in FLAT_PARTITIONS]
        # 10-row transactions are 12 records per 10 rows.
        rows = s.flat_batches * FLAT_BATCH_RECORDS * 10 // 12
        data = {shape: self.prefill(shape, rows, "flat") for shape in shapes}
        own: dict[int, list[float]] = {shape.partitions: [] for shape in shapes}
        bare: dict[int, list[float]] = {shape.partitions: [] for shape in shapes}
        full_gc: dict[int, list[tuple[int, int]]] = {shape.partitions: [] for shape in shapes}
        # Run alone, the part starts a new session, whose first pipeline queries stay slower
        # for dozens of batches: the first rounds of three such runs read 1.83, 1.63 and 1.39
        # against ~1.1 after (12-06). Then a round left out warms the session, as the parts
        # before it do in `make bench`.
        warm_up = self._spark is None
        for r in range(-1 if warm_up else 0, s.flat_rounds):
            for shape in shapes if r % 2 == 0 else shapes[::-1]:
                topic, prod = data[shape]
                kw = {"records": prod.records, "rows": prod.rows, "row_bytes": prod.row_bytes}
                src = q.kafka_stream(self.spark, self.stack.bootstrap, topic, FLAT_BATCH_RECORDS)
                q.wait_for_idle_consumers()
                read = q.measure("source", q.to_noop(src, "flat_source"), **kw).as_dict()
                q.wait_for_idle_consumers()
                by_slot = q.measure(
                    "bare_by_slot", q.to_noop(q.trivial_by_slot(src), "flat_bare"), **kw
                )
                bare_cost = steady_own_us_per_row(by_slot.as_dict(), read, s.flat_skip)
                self.truncate()
                name = f"flat-{uuid.uuid4().hex[:6]}"
                start = q.pipeline(self.spark, self.stack, topic, FLAT_BATCH_RECORDS, name)
                q.wait_for_idle_consumers()
                pipe = q.measure("pipeline", start, **kw)
                cost = steady_own_us_per_row(pipe.as_dict(), read, s.flat_skip)
                full = q.full_collections(pipe.extra.get("gc") or {})
                which = "warm-up round (left out)" if r < 0 else f"round {r + 1}/{s.flat_rounds}"
                log(
                    f"  {shape.label()}, {which}: own cost per row over batches "
                    f"{s.flat_skip + 1}-{pipe.batches}: pipeline {cost:.1f} us, bare by slot "
                    f"{bare_cost:.1f} us; the pipeline's full collections {full[0]} "
                    f"({full[1]} ms)"
                )
                if r >= 0:
                    own[shape.partitions].append(cost)
                    bare[shape.partitions].append(bare_cost)
                    full_gc[shape.partitions].append(full)
        self.results["flat"] = {
            **flat_summary(own, s.flat_skip, s.flat_batches, bare, full_gc),
            "warm_up_round": warm_up,
        }

    def latency(self) -> None:
        """Visibility latency vs trigger interval, in process, at a steady moderate rate."""
        from benchmarks import spark_queries as q
        from benchmarks.workload import Shape, SteadyProducer, VisibilitySampler
        from devstack.stack import percentiles

        s = self.sizes
        shape = Shape(4, 10, 100)
        out = []
        self.step(f"latency ({SOURCE})")
        for trigger_ms in (250, 1000, 5000):
            topic = self.topic(shape, "lat")
            name = f"lat{trigger_ms}-{uuid.uuid4().hex[:4]}"
            ckpt = self.out / "work" / name
            query = q.start_pipeline_streaming(
                self.spark, self.stack, topic, str(ckpt), name, trigger_ms, s.max_offsets
            )
            sampler = VisibilitySampler(self.stack.connect, name, topic)
            producer = SteadyProducer(self.stack.bootstrap, topic, shape, s.trigger_rate)
            try:
                sampler.start()
                producer.start()
                # Measure trigger_run_s of steady state after the first commit (the first
                # batch of a new query includes planning and worker start-up).
                if not sampler.first_advance.wait(180):
                    raise RuntimeError("nothing became visible within 180 s")
                time.sleep(s.trigger_run_s)
                if not query.isActive:
                    raise RuntimeError(f"latency query died: {query.exception()}")
                producer.stop_event.set()
                producer.join(30)
                ends = list(producer.produced.ends)
                deadline = time.monotonic() + 60 + trigger_ms / 1000
                while time.monotonic() < deadline and len(sampler.latencies_ms(ends)) < len(ends):
                    time.sleep(0.2)
            finally:
                sampler.stop_event.set()
                sampler.join(5)
                query.stop()
                q.drop_listeners()
            pairs = sampler.latencies_ms(list(producer.produced.ends))
            first_visible = min((ts + lat for ts, lat in pairs), default=0.0)
            warm = [lat for ts, lat in pairs if ts >= first_visible]
            res: dict[str, Any] = {
                "trigger_ms": trigger_ms,
                "rate_txn_s": s.trigger_rate,
                "rate_rows_s": s.trigger_rate * shape.txn_rows,
                "transactions": producer.produced.transactions,
                "visible": len(pairs),
                "latency": percentiles(warm),
                "latency_all": percentiles([lat for _, lat in pairs]),
                "samples": sorted(warm),
            }
            out.append(res)
            lat = res["latency"]
            log(
                f"  trigger {trigger_ms} ms: p50 {lat.get('p50', 0):.0f} p95 "
                f"{lat.get('p95', 0):.0f} p99 {lat.get('p99', 0):.0f} ms "
                f"({len(warm)}/{producer.produced.transactions} txns)"
            )
        self.results["latency_vs_trigger"] = out

    def state(self) -> None:
        """State-store and worker memory with one open transaction per partition."""
        from benchmarks import spark_queries as q
        from benchmarks.procstat import RssSampler
        from benchmarks.workload import Shape

        s = self.sizes
        out = []
        self.step(f"state ({SOURCE})")
        for open_rows in s.open_rows:
            shape = Shape(s.open_partitions, open_rows, 100)
            topic, prod = self.prefill(shape, 0, "open", close=False)
            df = q.real_assembler(
                q.kafka_stream(self.spark, self.stack.bootstrap, topic, s.max_offsets)
            )
            rss = RssSampler([os.getpid()], only_roles=("jvm", "python-worker"))
            rss.start()
            run = q.measure(
                "open", q.to_noop(df, "b_open"), records=prod.records, rows=prod.rows,
                row_bytes=prod.row_bytes, keep_last=True,
            )  # fmt: skip
            memory = rss.stop()
            op = run.extra.get("state", {})
            res = {
                "open_txns": shape.partitions,
                "open_rows_per_txn": open_rows,
                "open_rows": prod.rows,
                "open_row_json_mb": prod.row_bytes / 1e6,
                "state_rows": op.get("numRowsTotal"),
                "state_memory_mb": (op.get("memoryUsedBytes") or 0) / 1e6,
                "state_custom": op.get("customMetrics", {}),
                "rss": memory,
            }
            out.append(res)
            log(
                f"  {shape.partitions} open txns x {open_rows} rows: state store "
                f"{res['state_memory_mb']:.1f} MB (row JSON {res['open_row_json_mb']:.1f} MB), "
                f"workers peak {memory.get('python-worker_mb', 0):.0f} MB"
            )
        self.results["state_memory"] = out

    # -- 5: as users run it ------------------------------------------------------------------------

    def e2e(self, profile: bool, catchup: bool = True, steady: bool = True) -> None:
        from benchmarks.workload import Shape

        self.stop_spark()  # the spark-submit runs get the machine to themselves
        s = self.sizes
        if catchup and not hasattr(self, "main_topic"):
            shape = Shape(4, 10, 100)
            self.main_topic, self.main_prod = self.prefill(shape, s.main_rows, "main")
            self.main_shape = shape
        if catchup:
            self.e2e_catchup(self.main_topic, self.main_prod, self.main_shape, profile)
        if steady:
            self.e2e_steady()

    def e2e_catchup(self, topic: str, prod: Any, shape: Any, profile: bool) -> None:
        from benchmarks import e2e
        from devstack.stack import topic_end_offsets

        s = self.sizes
        self.step(f"catchup ({SOURCE})")
        self.truncate()
        log("spark-submit: catch-up on the pre-filled topic" + (" (py-spy)" if profile else ""))
        workdir = self.out / "work" / "catchup"
        prof_dir = self.out / "profile" if profile else None
        if prof_dir is not None:
            prof_dir.mkdir(parents=True, exist_ok=True)
        ends = topic_end_offsets(self.stack.bootstrap, topic, shape.partitions)
        res = e2e.catch_up(
            self.stack, topic, workdir, prod.rows, prod.row_bytes // max(1, prod.rows),
            s.max_offsets, prof_dir, ends,
        )  # fmt: skip
        if prof_dir is not None:
            from benchmarks.profile import summarize

            res["profile_summary"] = {
                role: summarize(Path(path)) for role, path in res["profiles"].items()
            }
        self.results["e2e_catchup"] = res
        log(
            f"  {res.get('rows_per_s', 0):,.0f} rows/s from query start "
            f"({res.get('steady_rows_per_s', 0):,.0f} after the first batch), "
            f"caught up: {res['caught_up']}"
        )

    def e2e_steady(self) -> None:
        from benchmarks import e2e
        from benchmarks.workload import Shape

        s = self.sizes
        self.step(f"steady ({SOURCE})")
        log("spark-submit: steady rate, visibility latency")
        shape = Shape(4, 10, 100)
        # Issue 14 target 3: p99 <= trigger + 1 s, with a 1 s and a 250 ms trigger.
        for key, trigger_ms in (("e2e_steady", 1000), ("e2e_steady_250", 250)):
            topic = self.topic(shape, "steady")
            workdir = self.out / "work" / key
            res = e2e.steady(
                self.stack, topic, workdir, shape, s.steady_rate, s.steady_s, trigger_ms
            )
            self.results[key] = res
            p = {k: res["latency"].get(k, 0) for k in ("p50", "p95", "p99")}
            log(
                f"  {res['rate_rows_s']:.0f} rows/s offered, trigger {trigger_ms} ms: p50 "
                f"{p['p50']:.0f} p95 {p['p95']:.0f} p99 {p['p99']:.0f} ms in steady state "
                f"(p99 {res['latency_after_start'].get('p99', 0):.0f} ms from the first commit, "
                f"{res['latency_first'].get('p99', 0):.0f} ms in its first "
                f"{res['first_s']:.0f} s); "
                f"CPU {res['cpu_cores']:.2f} cores, JIT compilers {res['jit_cores']:.2f}"
            )

    def idle(self) -> None:
        """Target 5: what the pipeline costs while nothing arrives (``benchmarks.idle``)."""
        from benchmarks.idle import idle_window

        self.stop_spark()  # the idle pipeline's CPU is measured by its process tree alone
        self.step(f"idle ({SOURCE})")
        self.stack.apply_ddl()
        res = idle_window(self.stack, self.out / "work" / "idle", self.sizes.idle_s, 1000, [])
        self.results["idle"] = res
        log(
            f"  idle {res['idle_seconds']:.0f} s at a 1 s trigger: "
            f"{res['cpu_seconds_per_minute']:.2f} CPU-s per minute, "
            f"{res['micro_batches']} micro-batches, "
            f"{res['starrocks_transactions_begun']} StarRocks transactions"
        )

    def peer(self) -> None:
        """Target 2: the Flink + StarRocks-connector peer and ``spark-submit.sh`` over one backlog.

        ``benchmarks.peer``'s throughput mode on this stack: the orders demo workload, each
        system in turn from the start of the topic, ``peer_rounds`` times, the order alternating.
        The peer is the released connector's build (``make peer``: per-table loads).
        """
        from benchmarks import peer as side

        self.stop_spark()
        self.step(f"peer ({SOURCE})")
        s = self.sizes
        args = side.parse_args(
            ["--orders", str(s.peer_orders), "--rounds", str(s.peer_rounds), "--timeout", "900"]
        )
        harness = side.Harness(
            self.stack, self.out / "work" / "peer", args.parallelism, args.checkpoint_ms
        )
        try:
            res = side.mode_throughput(harness, args)
        finally:
            harness.kill_leftovers()
        self.results["peer"] = res
        ratios = res["ratios"]
        log(
            f"  {res['rows']:,} rows, connector {res['flavour']}: ours / peer rows/s after "
            f"start-up {ratios.get('rows_per_s_after_ready', 0):.2f} (by round "
            f"{res['ratios_by_round'].get('rows_per_s_after_ready')}), first visible row to "
            f"last {ratios.get('rows_per_s', 0):.2f}, per CPU-second "
            f"{ratios.get('rows_per_cpu_s', 0):.2f}"
        )


def median_round(done: list[dict[str, Any]], by: str = "rows_per_s") -> dict[str, Any]:
    """The run of median ``by`` (the lower one of an even count), with every round's value."""
    ordered = sorted(done, key=lambda run: float(run.get(by, 0.0)))
    return {**ordered[(len(ordered) - 1) // 2], f"rounds_{by}": [run.get(by) for run in done]}


def own_costs(pipeline: list[dict[str, Any]], source: list[dict[str, Any]]) -> list[float]:
    """µs per row the pipeline spends beyond Spark's reading of the topic, round by round.

    Warm pipeline minus warm source -> noop, each round's pair measured seconds apart: the
    time per row of the assembler, the sink and their Spark stages, without the Kafka read
    (one fetch per topic partition and batch) that any query of the topic pays.
    """
    costs = []
    for pipe, read in zip(pipeline, source, strict=True):
        p, r = pipe.get("warm_rows_per_s"), read.get("warm_rows_per_s")
        if p and r:
            costs.append(round(1e6 / p - 1e6 / r, 2))
    return costs


def steady_us_per_record(run: dict[str, Any], skip: int) -> float:
    """Median µs of ``triggerExecution`` per record over a run's batches after the first ``skip``.

    A short last batch is left out, as the sweep's warm rates leave it out
    (:func:`benchmarks.spark_queries.without_short_last`).
    """
    pairs = list(zip(run["durations_ms"], run["batch_records"], strict=True))[skip:]
    batches = spark_queries.without_short_last(pairs, lambda b: int(b[1]))
    if not batches:
        raise ValueError(f"{run.get('name')}: no batches after the first {skip}")
    return statistics.median(d.get("triggerExecution", 0) * 1000 / n for d, n in batches if n)


def steady_own_us_per_row(pipeline: dict[str, Any], source: dict[str, Any], skip: int) -> float:
    """The pipeline's steady µs per row beyond Spark's reading of the same topic."""
    per_record = steady_us_per_record(pipeline, skip) - steady_us_per_record(source, skip)
    return round(per_record * pipeline["records"] / pipeline["rows"], 2)


def flat_summary(
    own: dict[int, list[float]],
    skip: int,
    batches: int,
    bare: dict[int, list[float]] | None = None,
    full_gc: dict[int, list[tuple[int, int]]] | None = None,
) -> dict[str, Any]:
    """The steady pair's result: each shape's rounds and median, 64 ÷ 4 of the medians and
    round by round (each round's two shapes measured a minute apart at most).

    ``bare``: the own cost of bare ``applyInPandasWithState`` grouped by slot, the same
    rounds; then also ``above_bare``, the pipeline's own cost minus bare's, round by round:
    what the product adds to Spark's stateful plan. ``full_gc``: the driver JVM's full
    collections (count, ms) in each pipeline run (``spark_queries.full_collections``).
    """
    summary: dict[str, Any] = {"skip": skip, "batches": batches, **_by_partitions(own)}
    if full_gc:
        summary["full_collections"] = [
            {
                "partitions": p,
                "count": sum(n for n, _ in runs),
                "ms": sum(ms for _, ms in runs),
                "runs": len(runs),
            }
            for p, runs in sorted(full_gc.items())
        ]
    if bare:
        summary["bare"] = _by_partitions(bare)
        summary["above_bare"] = _by_partitions(
            {p: [round(a - b, 2) for a, b in zip(own[p], bare[p], strict=True)] for p in own}
        )
    return summary


def _by_partitions(costs: dict[int, list[float]]) -> dict[str, Any]:
    """Rounds and median per shape; most over fewest partitions, of the medians and by round."""
    low, high = min(costs), max(costs)
    lows = statistics.median(costs[low])
    return {
        "shapes": [
            {"partitions": p, "own_us_per_row": c, "median": statistics.median(c)}
            for p, c in sorted(costs.items())
        ],
        "ratio": statistics.median(costs[high]) / lows if lows > 0 else None,
        # A difference of noisy costs can be <= 0 in a round: no ratio for that round.
        "round_ratios": [
            round(h / lo, 2) if lo > 0 else None
            for h, lo in zip(costs[high], costs[low], strict=True)
        ],
    }


def ceiling_ratios(runs: dict[str, Any]) -> dict[str, Any]:
    """``{"runs", "ratios", "ratios_cpu"}``: the pipeline's rate over each other run's."""
    pipe = runs.get("pipeline") or {}
    ratios = {
        k: pipe["rows_per_s"] / v["rows_per_s"]
        for k, v in runs.items()
        if k != "pipeline" and v.get("rows_per_s") and pipe.get("rows_per_s")
    }
    ratios_cpu = {
        k: pipe["rows_per_cpu_s"] / v["rows_per_cpu_s"]
        for k, v in runs.items()
        if k != "pipeline" and v.get("rows_per_cpu_s") and pipe.get("rows_per_cpu_s")
    }
    # Round by round (queries measured a few seconds apart): how much the ratio moves.
    pipe_rounds = pipe.get("rounds_rows_per_s") or []
    round_ratios = {
        k: _by_round(pipe, v)
        for k, v in runs.items()
        if k != "pipeline" and len(v.get("rounds_rows_per_s") or []) == len(pipe_rounds) > 1
    }
    # Source -> assembler -> noop over a targeted ceiling: what the assembler costs with its
    # output rows handed back to the JVM (which the pipeline's loading tasks skip).
    asm = (runs.get("source_assembler") or {}).get("rows_per_s")
    bounds = {
        k: asm / v["rows_per_s"]
        for k, v in runs.items()
        if asm and k in TARGETS and v.get("rows_per_s")
    }
    return {
        "runs": runs,
        "ratios": ratios,
        "ratios_cpu": ratios_cpu,
        "round_ratios": round_ratios,
        "assembler_bounds": bounds,
        "writes_off": _writes_off_over_bare(runs),
    }


def _writes_off_over_bare(runs: dict[str, Any]) -> dict[str, Any]:
    """The pipeline with the stand-in's writes off over bare: its ratio and each round's."""
    off, bare = runs.get(WRITES_OFF) or {}, runs.get("bare_stateful") or {}
    if not (off.get("rows_per_s") and bare.get("rows_per_s")):
        return {}
    return {"ratio": off["rows_per_s"] / bare["rows_per_s"], "rounds": _by_round(off, bare)}


def _by_round(run: dict[str, Any], other: dict[str, Any]) -> list[float]:
    """``run``'s rate over ``other``'s, round by round (rounds measured seconds apart)."""
    pairs = zip(
        run.get("rounds_rows_per_s") or [], other.get("rounds_rows_per_s") or [], strict=True
    )
    return [a / b for a, b in pairs if b]


def emulator_ingest(bench: Bench, prod: Any, rows_per_record: float) -> dict[str, Any]:
    """The emulator alone: the main data set's rows as batch-sized multi-table transactions."""
    import requests

    from benchmarks.emulator_ingest import call, cpu_seconds
    from benchmarks.workload import DATABASE, TABLE, Shape, row_json

    emu = bench.stack.emulator
    assert emu is not None
    bench.truncate()
    shape: Shape = bench.main_shape
    per_txn = max(1, int(bench.sizes.max_offsets * rows_per_record))
    bodies: list[bytes] = []
    parts: list[bytes] = []
    n = 0
    n_txns = prod.rows // shape.txn_rows
    for t in range(n_txns):
        p = t % shape.partitions
        for seq in range(shape.txn_rows):
            row = json.loads(
                row_json((p << 40) | (t * shape.txn_rows + seq), t, seq, 0, shape.row_bytes)
            )
            row["__op"] = 0
            parts.append(json.dumps(row, separators=(",", ":")).encode())
            n += 1
            if len(parts) >= per_txn:
                bodies.append(b"[" + b",".join(parts) + b"]")
                parts = []
    if parts:
        bodies.append(b"[" + b",".join(parts) + b"]")
    session = requests.Session()
    load_h = {"format": "json", "strip_outer_array": "true"}
    cpu0 = cpu_seconds(emu.pid)
    t0 = time.perf_counter()
    for i, body in enumerate(bodies):
        base = {
            "label": f"ceiling-{uuid.uuid4().hex[:8]}-{i}",
            "db": DATABASE,
            "timeout": "600",
            "transaction_type": "multi",
        }
        call(session, emu, "begin", base)
        call(session, emu, "load", {**base, **load_h, "table": TABLE}, body)
        call(session, emu, "commit", base)
    secs = time.perf_counter() - t0
    cpu = cpu_seconds(emu.pid) - cpu0
    row_bytes = prod.row_bytes
    return {
        "name": "emulator",
        "rows": n,
        "transactions": len(bodies),
        "wall_s": secs,
        "rows_per_s": n / secs,
        "mb_per_s": row_bytes / 1e6 / secs,
        "emulator_cpu_s": cpu,
        "rows_per_cpu_s": n / cpu if cpu else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test of the harness)")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "bench")
    p.add_argument("--skip", default="", help=f"comma-separated parts to skip: {','.join(PARTS)}")
    p.add_argument("--steady-rate", type=float, help="txn/s (10 rows each) of the steady run")
    p.add_argument("--steady-s", type=float, help="seconds of steady state measured")
    a = p.parse_args(argv)
    skip = {x.strip() for x in a.skip.split(",") if x.strip()}
    unknown = skip - set(PARTS)
    if unknown:
        p.error(f"unknown parts {sorted(unknown)}; known: {PARTS}")
    sizes = QUICK if a.quick else FULL
    if a.steady_rate is not None:
        sizes = replace(sizes, steady_rate=a.steady_rate)
    if a.steady_s is not None:
        sizes = replace(sizes, steady_s=a.steady_s)
    # Executors import benchmarks.* (the trivial function, the pass-through loader).
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
    )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    out: Path = a.out.resolve()
    for sub in ("stack", "work", "profile"):
        shutil.rmtree(out / sub, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)

    (out / "work" / "checkpoints").mkdir(parents=True)
    spark_queries.CHECKPOINT_ROOT = str(out / "work" / "checkpoints")
    bench = Bench(out, sizes)
    env = {
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "cpus": os.cpu_count(),
        "loadavg_start": loadavg(),
        "other_load_start": other_load(),
        "quick": a.quick,
        "sizes": sizes.__dict__,
        "source": SOURCE,
        "skip": sorted(skip),
        "commit": git_commit(),
        "argv": sys.argv[1:] if argv is None else argv,
    }
    bench.results["env"] = env
    started = time.monotonic()
    load_samples: list[float] = []
    stop_load = threading.Event()

    def sample_load() -> None:
        while not stop_load.wait(5):
            load_samples.append(float(loadavg().split()[0]))

    threading.Thread(target=sample_load, daemon=True).start()
    log(f"load average {env['loadavg_start']}; starting broker and emulator under {out}")
    bench.progress = Progress(
        plan_steps(skip, sizes.ceiling_rounds, sizes.sweep_rounds, sizes.ceiling_warm_up_round),
        emit=log,
    )
    try:
        bench.step("start broker + emulator")
        bench.stack.start()
        bench.ddl()
        steps = [
            ("ceilings", bench.ceilings),
            ("assembler", bench.assembler),
            ("sweeps", bench.sweeps),
            ("flat", bench.flat),
            ("latency", bench.latency),
            ("state", bench.state),
            (
                "e2e",
                lambda: bench.e2e(
                    "profile" not in skip, "catchup" not in skip, "steady" not in skip
                ),
            ),
            ("idle", bench.idle),
            ("peer", bench.peer),
        ]
        errors: dict[str, str] = {}
        bench.results["errors"] = errors
        for part, step in steps:
            if part in skip:
                continue
            try:
                step()
            except Exception as e:  # one broken part must not lose the others' numbers
                bench.progress.finish()
                log(f"PART {part} FAILED: {type(e).__name__}: {e}")
                traceback.print_exc()
                errors[part] = f"{type(e).__name__}: {str(e)[:500]}"
    finally:
        bench.progress.finish()
        stop_load.set()
        bench.stop_spark()
        bench.stack.stop()
        env["loadavg_end"] = loadavg()
        env["loadavg_1m_mean"] = sum(load_samples) / len(load_samples) if load_samples else None
        env["loadavg_1m_max"] = max(load_samples, default=None)
        env["other_load_end"] = other_load()
        env["duration_s"] = time.monotonic() - started
        (out / "results.json").write_text(json.dumps(bench.results, indent=2, default=str))
    from benchmarks.report import write_report

    summary = write_report(bench.results, out)
    print()
    print(summary)
    log(f"report: {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
