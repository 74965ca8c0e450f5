"""The pipeline as users run it: ``spark-submit.sh --config conf/local.yaml`` in a child process.

Two runs, both with peak RSS of the JVM, the Python driver and the Python workers:

* catch-up: a pre-filled topic, trigger interval 0 (batches back to back), stopped once the
  sink's progress table shows every partition's last offset; committed rows/s from the
  ``query started`` line to the last batch line, and after the first batch. (Not
  ``pipeline.available-now=true``: with the assembler's processing-time timeouts Spark keeps
  planning empty batches and such a query does not end.) Optionally
  profiled with py-spy (Python workers and the Python driver, raw collapsed stacks);
* steady: transactions produced at a fixed rate while the pipeline runs with a processing-time
  trigger; visibility latency per transaction (TXN_END produced -> its partition's progress
  row committed past it), warm-up excluded, and the pipeline's CPU (cores busy) meanwhile.
"""

from __future__ import annotations

import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from benchmarks.procstat import (
    RssSampler,
    classify,
    descendants,
    jit_cpu_seconds,
    tree_cpu_seconds,
)
from benchmarks.workload import DATABASE, TABLE, Shape, SteadyProducer, VisibilitySampler
from devstack.pipeline_process import PipelineProcess
from devstack.stack import LOCAL_CONFIG, LocalStack, percentiles, wait_caught_up

# "batch N  [in X  ]rows R  txns T ..." (the app's progress line).
BATCH_LINE = re.compile(r"^batch\s+(\d+)\s.*?\brows\s+(\d+)\s+txns\s+(\d+)")


@dataclass
class TimedPipeline(PipelineProcess):
    """A PipelineProcess that also records when each output line arrived."""

    stamps: list[tuple[float, str]] = field(default_factory=list)

    def _pump(self, stream: IO[bytes]) -> None:
        with self.log_path.open("ab") as log:
            for raw in iter(stream.readline, b""):
                log.write(raw)
                line = raw.decode("utf-8", "replace").rstrip()
                self.stamps.append((time.monotonic(), line))
                self.lines.append(line)

    def batches(self) -> list[tuple[float, int, int]]:
        """(arrival time, rows, txns) of every progress line."""
        out = []
        for t, line in self.stamps:
            m = BATCH_LINE.match(line)
            if m:
                out.append((t, int(m.group(2)), int(m.group(3))))
        return out

    def started_at(self) -> float | None:
        for t, line in self.stamps:
            if "query started" in line:
                return t
        return None


_KV = re.compile(r"(\w+)=(\S+)")


def batch_breakdown(log_path: Path) -> dict[str, float]:
    """Where the batch time went, from the app's INFO lines (sums over all batches, ms).

    ``foreach_ms``: the foreachBatch call (``batch done total_ms``).
    ``sink_ms``: ``StarRocksSink.write_batch`` (recovery probe, begin, the one job that reads,
    assembles, loads and counts the batch, commit).
    ``commit_ms``: the commit call alone.
    ``trigger_ms`` / ``add_batch_ms``: Spark's ``durationMs`` of the batch (``batch timing``):
    the whole trigger, and ``addBatch`` (the stateful job and the foreachBatch call).
    ``warm_trigger_ms``: the median ``triggerExecution`` of the run's second half, where a
    fresh JVM has compiled most of what a batch runs (the first batch includes the start).
    """
    out = {
        "batches": 0.0,
        "foreach_ms": 0.0,
        "sink_ms": 0.0,
        "commit_ms": 0.0,
        "trigger_ms": 0.0,
        "add_batch_ms": 0.0,
        "warm_trigger_ms": 0.0,
    }
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    triggers: list[float] = []
    for line in lines:
        if "logger=app.pipeline batch done" in line:
            kv = dict(_KV.findall(line))
            out["batches"] += 1
            out["foreach_ms"] += float(kv.get("total_ms", 0))
            out["sink_ms"] += float(kv.get("sink_ms", 0))
        elif "batch timing batch_id=" in line:
            kv = dict(_KV.findall(line))
            triggers.append(float(kv.get("triggerExecution_ms", 0)))
            out["add_batch_ms"] += float(kv.get("addBatch_ms", 0))
        elif "logger=sinks.starrocks.sink starrocks batch" in line:
            kv = dict(_KV.findall(line))
            out["commit_ms"] += float(kv.get("commit_ms", 0))
    out["trigger_ms"] = sum(triggers)
    if len(triggers) > 1:
        out["warm_trigger_ms"] = statistics.median(triggers[len(triggers) // 2 :])
    return out


def overrides(
    stack: LocalStack, topic: str, workdir: Path, name: str, extra: Sequence[str]
) -> list[str]:
    return [
        *stack.pipeline_overrides(topic, workdir / "checkpoint", name),
        f"starrocks.database-name={DATABASE}",
        f"starrocks.table-name={TABLE}",
        *extra,
    ]


class Profiler:
    """py-spy on the Python workers (following forks) and on the Python driver."""

    def __init__(self, pyspy: str, outdir: Path, rate: int = 50) -> None:
        self.pyspy, self.outdir, self.rate = pyspy, outdir, rate
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.files: dict[str, Path] = {}

    def attach(self, role: str, pid: int, subprocesses: bool) -> None:
        out = self.outdir / f"pyspy-{role}.txt"
        cmd = [
            self.pyspy, "record", "--pid", str(pid), "--rate", str(self.rate),
            "--format", "raw", "--output", str(out), "--nonblocking", "--full-filenames",
        ]  # fmt: skip
        if subprocesses:
            cmd.append("--subprocesses")
        self.procs[role] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.files[role] = out

    def stop(self) -> dict[str, Path]:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        return {k: v for k, v in self.files.items() if v.exists()}


def find_role(root: int, role: str) -> int | None:
    for pid in descendants(root):
        if classify(pid) == role:
            return pid
    return None


def daemon_pid(root: int) -> int | None:
    """The executors' Python daemon (``app.pydaemon`` or ``pyspark.daemon``)."""
    pids = sorted(p for p in descendants(root) if classify(p) == "python-worker")
    return pids[0] if pids else None


def catch_up(
    stack: LocalStack,
    topic: str,
    workdir: Path,
    rows: int,
    row_bytes: int,
    max_offsets: int,
    profile_dir: Path | None,
    end_offsets: dict[int, int],
    timeout_s: float = 900,
    extra: Sequence[str] = (),
    name: str = "bench-catchup",
) -> dict[str, Any]:
    """Run the pipeline over the pre-filled topic until caught up; returns the numbers.

    ``extra``: more ``--set`` overrides (e.g. ``spark.master=local-cluster[2,1,1024]``);
    ``name``: the pipeline name (its progress rows tell when it has caught up).
    """
    proc = TimedPipeline(
        LOCAL_CONFIG,
        overrides(
            stack,
            topic,
            workdir,
            name,
            [
                "starrocks.sink.buffer-flush.interval-ms=0",
                f"source.max-offsets-per-trigger={max_offsets}",
                *extra,
            ],
        ),
        workdir / "pipeline.log",
    )
    t0 = time.monotonic()
    proc.start()
    rss = RssSampler([proc.pid])
    rss.start()
    profiler: Profiler | None = None
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    caught_up = False
    try:
        if profile_dir is not None and Path(pyspy).exists():
            profiler = Profiler(pyspy, profile_dir)
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and proc.running():
                daemon = daemon_pid(proc.pid)
                driver = find_role(proc.pid, "python-driver")
                if daemon is not None and driver is not None:
                    profiler.attach("workers", daemon, subprocesses=True)
                    profiler.attach("driver", driver, subprocesses=False)
                    break
                time.sleep(0.1)
        conn = stack.connect()
        caught_up = wait_caught_up(
            conn, name, topic, end_offsets, timeout_s, DATABASE, alive=proc.running
        )
        conn.close()
    finally:
        proc.stop()
        if proc._reader is not None:
            proc._reader.join(10)
        memory = rss.stop()
        profiles = profiler.stop() if profiler is not None else {}
    end = time.monotonic()
    batches = proc.batches()
    started = proc.started_at()
    committed = sum(b[1] for b in batches)
    out: dict[str, Any] = {
        "caught_up": caught_up,
        "returncode": proc.returncode(),
        "rows": committed,
        "expected_rows": rows,
        "batches": len(batches),
        "process_s": end - t0,
        "memory": memory,
        "profiles": {k: str(v) for k, v in profiles.items()},
    }
    if batches and started is not None:
        last = batches[-1][0]
        out["query_s"] = last - started
        out["rows_per_s"] = committed / (last - started)
        out["mb_per_s"] = committed * row_bytes / 1e6 / (last - started)
        if len(batches) > 1:
            after_first = sum(b[1] for b in batches[1:])
            out["steady_rows_per_s"] = after_first / (last - batches[0][0])
        out["first_batch_s"] = batches[0][0] - started
    out["breakdown"] = batch_breakdown(workdir / "pipeline.log")
    return out


#: Seconds after the first commit left out of the steady-state latency. A fresh JVM runs its
#: first ~10 batches at 1.5-2x the warm batch time (JIT, Python workers starting, the backlog
#: of the start-up); the first batch itself is target 4's, reported by the catch-up run.
STEADY_WARMUP_S = 15.0
#: The whole steady window of `make bench` runs before 2026-11-24 14:12 UTC, now its first
#: STEADY_FIRST_S seconds, still reported for comparison. The JVM's JIT compilers are busiest
#: in it (0.3-0.6 cores of the pipeline's 0.8-1.3 at 1,000 rows/s), ~0.1 after five minutes.
STEADY_FIRST_S = 40.0


def steady(
    stack: LocalStack,
    topic: str,
    workdir: Path,
    shape: Shape,
    rate_txn_s: float,
    duration_s: float,
    trigger_ms: int,
) -> dict[str, Any]:
    """Produce at ``rate_txn_s`` for ``duration_s`` while the pipeline runs; latency + RSS."""
    name = "bench-steady"
    proc = TimedPipeline(
        LOCAL_CONFIG,
        overrides(
            stack, topic, workdir, name, [f"starrocks.sink.buffer-flush.interval-ms={trigger_ms}"]
        ),
        workdir / "pipeline.log",
    )
    proc.start()
    rss = RssSampler([proc.pid])
    rss.start()
    sampler = VisibilitySampler(stack.connect, name, topic)
    producer = SteadyProducer(stack.bootstrap, topic, shape, rate_txn_s)
    try:
        if not proc.wait_for_line("query started", 180):
            raise RuntimeError(f"pipeline did not start; see {workdir / 'pipeline.log'}")
        sampler.start()
        producer.start()
        # Warm-up, then duration_s of steady state (first batch = start-up).
        if not sampler.first_advance.wait(180):
            raise RuntimeError("nothing became visible within 180 s")
        time.sleep(STEADY_WARMUP_S)
        # The pipeline's CPU (JVM, driver, workers) over the measured window.
        cpu_before, window_start = tree_cpu_seconds(proc.pid), time.monotonic()
        jit_before = jit_cpu_seconds(proc.pid)
        time.sleep(duration_s)
        cpu_s = tree_cpu_seconds(proc.pid) - cpu_before
        jit_s = jit_cpu_seconds(proc.pid) - jit_before
        window_s = time.monotonic() - window_start
        producer.stop_event.set()
        producer.join(60)
        # Wait until the last transaction is visible (or 60 s).
        deadline = time.monotonic() + 60
        ends = list(producer.produced.ends)
        while time.monotonic() < deadline:
            if len(sampler.latencies_ms(ends)) >= len(ends):
                break
            time.sleep(0.2)
        sampler.stop_event.set()
        sampler.join(5)
    finally:
        proc.stop()
        memory = rss.stop()
    pairs = sampler.latencies_ms(list(producer.produced.ends))
    first_visible = min((ts + lat for ts, lat in pairs), default=0.0)
    after_start = [lat for ts, lat in pairs if ts >= first_visible]
    warm_from = first_visible + STEADY_WARMUP_S * 1000
    warm = [lat for ts, lat in pairs if ts >= warm_from]
    first = [lat for ts, lat in pairs if warm_from <= ts < warm_from + STEADY_FIRST_S * 1000]
    produced = producer.produced
    return {
        "rate_txn_s": rate_txn_s,
        "rate_rows_s": rate_txn_s * shape.txn_rows,
        "trigger_ms": trigger_ms,
        "duration_s": duration_s,
        "transactions": produced.transactions,
        "visible": len(pairs),
        "latency_all": percentiles([lat for _, lat in pairs]),
        "latency_after_start": percentiles(after_start),
        "warmup_s": STEADY_WARMUP_S,
        "latency": percentiles(warm),
        "first_s": STEADY_FIRST_S,
        "latency_first": percentiles(first),
        "memory": memory,
        "cpu_cores": cpu_s / window_s,
        "jit_cores": jit_s / window_s,
        "producer_errors": producer.errors[:3],
    }
