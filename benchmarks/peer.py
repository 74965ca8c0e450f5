"""The seed's own system (Flink + flink-connector-starrocks) next to ours.

``make bench-peer`` = ``python -m benchmarks.peer``. One broker, one StarRocks emulator, the
orders demo workload (``demo``), the demo verifier. ``--flavour`` picks the peer's build
(``make peer``): ``per-table`` (the released connector 1.2.10, each table loaded on its own) or
``multi-table`` (1.2.15's multi-table transaction mode, the seed's; not on Maven Central).
Modes (``--modes``, in order):

- ``check``: the protocol check. The peer reads a pre-filled topic until the tables equal the
  ground truth; the verifier's verdict is printed (exit status 1 when it fails).
- ``throughput``: one pre-filled topic, read from the start by each system in turn (fresh
  tables each time), ``--rounds`` times with the order alternating: rows/s and MB/s after
  start-up and from the first visible row to the last, rows per CPU-second of the system's
  process tree (start-up included), peak RSS, and ours over the peer's round by round.
- ``latency``: each system in turn while the same workload (same seed) is produced at a steady
  ``--rate`` into a fresh topic: visibility latency p50/p95/p99 after warm-up.
- ``kill``: each system in turn, the workload produced at ``--rate``; ``--kill-after`` seconds
  after the first visible row the system is killed (SIGKILL, whole process group) and
  restarted (the peer from its last retained Flink checkpoint, ours from its checkpoint
  folder); afterwards the verifier's missing/extra/wrong counts, the partial-visibility
  observations of the invariant watcher and the order versions seen going backwards.

Numbers only, never a gate. Results: ``<workdir>/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import Consumer, TopicPartition

from benchmarks.procstat import RssSampler, tree_cpu_seconds
from demo.generate import GenerationResult, GeneratorConfig, generate
from demo.truth import GroundTruth
from demo.verify import compare_with_truth, run, watch
from demo.workload import WorkloadConfig
from devstack.kafka.admin import create_topic
from devstack.pipeline_process import PipelineProcess
from devstack.stack import LOCAL_CONFIG, LatencySampler, LocalStack

REPO_ROOT = Path(__file__).resolve().parent.parent
PEER_DIR = REPO_ROOT / "benchmarks" / "peers" / "flink-starrocks"
SYSTEMS = ("peer", "ours")
# The peer's builds (benchmarks/peers/flink-starrocks/build.sh).
FLAVOURS = ("per-table", "multi-table")


class Job(Protocol):
    """A running system under test."""

    @property
    def pid(self) -> int: ...

    def running(self) -> bool: ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...


@dataclass
class PeerProcess:
    """One run of the peer (``run.sh``, a Flink local mini-cluster in one JVM)."""

    args: list[str]
    log_path: Path
    parallelism: int = 2
    flavour: str = "per-table"
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> PeerProcess:
        """Launch it; the JVM's output goes to ``log_path`` (appended)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(  # our own script, arguments as a list
            [str(PEER_DIR / "run.sh"), "--parallelism", str(self.parallelism), *self.args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=os.environ | {"PEER_FLAVOUR": self.flavour},
        )
        log.close()
        return self

    @property
    def pid(self) -> int:
        """The JVM's PID (run.sh execs java)."""
        assert self.process is not None
        return self.process.pid

    def running(self) -> bool:
        """Whether the JVM is alive."""
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        if self.process is None or not self.running():
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL of the process group, as a crash."""
        if self.process is None:
            return
        if self.running():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)


@dataclass
class OurJob:
    """Our pipeline through ``spark-submit.sh`` (a :class:`PipelineProcess`)."""

    proc: PipelineProcess

    @property
    def pid(self) -> int:
        """spark-submit's PID."""
        return self.proc.pid

    def running(self) -> bool:
        """Whether spark-submit is alive."""
        return self.proc.running()

    def stop(self) -> None:
        """Graceful stop."""
        self.proc.stop()

    def kill(self) -> None:
        """kill -9 of the process group."""
        self.proc.kill()


def latest_checkpoint(root: Path) -> Path | None:
    """The newest completed Flink checkpoint (``<job id>/chk-N`` with ``_metadata``)."""
    done = [m.parent for m in root.glob("*/chk-*/_metadata")]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


@dataclass
class Harness:
    """The stack plus how to start each system on it."""

    stack: LocalStack
    workdir: Path
    parallelism: int
    checkpoint_ms: int
    flavour: str = "per-table"
    jobs: list[Job] = field(default_factory=list)

    def start(self, system: str, topic: str, name: str, restore: bool = False) -> Job:
        """Start ``system`` reading ``topic``; state (checkpoints, group) is keyed by ``name``."""
        emu = self.stack.emulator
        assert emu is not None
        state = (self.workdir / name).resolve()
        if system == "peer":
            chk_root = state / "flink-checkpoints"
            args = [
                "--bootstrap",
                self.stack.bootstrap,
                "--topic",
                topic,
                "--group",
                name,
                "--load-url",
                f"{emu.host}:{emu.fe_port}",
                "--jdbc-url",
                f"jdbc:mysql://{emu.host}:{emu.query_port}",
                "--user",
                emu.user,
                "--password",
                emu.password,
                "--checkpoint-dir",
                str(chk_root),
                "--checkpoint-interval-ms",
                str(self.checkpoint_ms),
                "--label-prefix",
                name.replace(".", "_"),
            ]
            if restore:
                chk = latest_checkpoint(chk_root)
                if chk is not None:
                    args += ["--restore", str(chk)]
                    print(f"    peer restores from {chk}", flush=True)
            job: Job = PeerProcess(args, state / "peer.log", self.parallelism, self.flavour).start()
        else:
            overrides = self.stack.pipeline_overrides(topic, state / "checkpoint", name)
            job = OurJob(PipelineProcess(LOCAL_CONFIG, overrides, state / "pipeline.log").start())
        self.jobs.append(job)
        return job

    def kill_leftovers(self) -> None:
        """Kill -9 every job still running (after an error in a mode)."""
        for job in self.jobs:
            if job.running():
                job.kill()

    def reset_tables(self) -> None:
        """Drop the demo database and create the tables again."""
        conn = self.stack.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("DROP DATABASE IF EXISTS demo")
        finally:
            conn.close()
        self.stack.apply_ddl()

    def produce(self, topic: str, args: argparse.Namespace, rate: float | None) -> GenerationResult:
        """The orders workload (always the same for one seed) into ``topic`` (created before)."""
        workload = WorkloadConfig(orders=args.orders, partitions=args.partitions, seed=args.seed)
        config = GeneratorConfig(
            bootstrap=self.stack.bootstrap,
            topic=topic,
            workload=workload,
            encoding="json",
            rate=rate,
            progress_interval_s=3600,
        )
        return generate(config)


def topic_bytes(bootstrap: str, topic: str, partitions: int) -> int:
    """Sum of the record values' sizes in ``topic`` (read once from the start)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-peer-size", "enable.auto.commit": False}
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        left, total = sum(ends.values()), 0
        while left > 0:
            for msg in consumer.consume(1000, 5):
                if msg.error() is None:
                    total += len(msg.value() or b"")
                    left -= 1
        return total
    finally:
        consumer.close()


def wait_equal(harness: Harness, truth: GroundTruth, job: Job, timeout_s: float) -> float | None:
    """Poll until the tables equal the truth; the time it happened, None on timeout/exit."""
    conn = harness.stack.connect()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and job.running():
            try:
                if compare_with_truth(conn, truth).ok:
                    return time.monotonic()
            except Exception:  # a failed poll is retried
                conn = harness.stack.connect()
            time.sleep(0.5)
    finally:
        conn.close()
    return None


@dataclass
class VersionWatch:
    """Counts order versions seen going backwards (an old version re-applied and visible)."""

    connect: Callable[[], Any]
    interval_s: float = 0.2
    first_visible: float | None = None
    regressions: int = 0
    regressed_orders: set[int] = field(default_factory=set)
    _seen: dict[int, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> VersionWatch:
        """Poll in a daemon thread."""
        self._thread = threading.Thread(target=self._run, daemon=True, name="version-watch")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        conn = self.connect()
        while not self._stop.is_set():
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT order_id, version FROM demo.orders")
                    rows = cur.fetchall()
            except Exception:  # reconnect and go on
                conn = self.connect()
                continue
            if rows and self.first_visible is None:
                self.first_visible = time.monotonic()
            for order_id, version in rows:
                oid, v = int(order_id), int(version)
                if v < self._seen.get(oid, -1):
                    self.regressions += 1
                    self.regressed_orders.add(oid)
                else:
                    self._seen[oid] = v
            self._stop.wait(self.interval_s)
        conn.close()


# A log line each system writes once it is ready to consume (start-up done).
READY_MARKERS = {
    "per-table": "Open sink function v2",
    "multi-table": "Eagerly opened shared transaction",
    "ours": "query started",
}


@dataclass
class ReadyMarker:
    """When a line containing ``marker`` first appears in a ``*.log`` under ``folder``."""

    folder: Path
    marker: str
    at: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> ReadyMarker:
        """Watch in a daemon thread."""
        threading.Thread(target=self._run, daemon=True, name="ready-marker").start()
        return self

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set() and self.at is None:
            for log in self.folder.glob("*.log"):
                try:
                    if self.marker in log.read_text(errors="replace"):
                        self.at = time.monotonic()
                        return
                except OSError:
                    pass
            self._stop.wait(0.1)


def mode_check(h: Harness, args: argparse.Namespace) -> dict[str, Any]:
    """The peer over a pre-filled topic, then the verifier."""
    h.reset_tables()
    create_topic(h.stack.bootstrap, "cdc.check", args.partitions)
    gen = h.produce("cdc.check", args, None)
    job = h.start("peer", "cdc.check", "peer-check")
    try:
        done = wait_equal(h, gen.truth, job, args.timeout)
    finally:
        job.stop()
    conn = h.stack.connect()
    verdict = run(conn, truth=gen.truth)
    conn.close()
    print(verdict.render(), flush=True)
    return {"passed": verdict.passed and done is not None, "verdict": verdict.to_dict()}


@dataclass
class Backlog:
    """A pre-filled topic both systems read from the start."""

    topic: str
    gen: GenerationResult
    rows: int
    size: int


def fill(h: Harness, args: argparse.Namespace, topic: str = "cdc.fill") -> Backlog:
    """The workload produced, as fast as it goes, into a fresh ``topic``."""
    create_topic(h.stack.bootstrap, topic, args.partitions)
    gen = h.produce(topic, args, None)
    rows = gen.counts.events - 2 * gen.transactions
    return Backlog(topic, gen, rows, topic_bytes(h.stack.bootstrap, topic, args.partitions))


def read_backlog(
    h: Harness, backlog: Backlog, system: str, name: str, timeout: float
) -> dict[str, Any]:
    """One system over the backlog, on fresh tables; its rates, CPU and peak RSS."""
    h.reset_tables()
    t0 = time.monotonic()
    job = h.start(system, backlog.topic, name)
    rss = RssSampler([job.pid])
    rss.start()
    seen = VersionWatch(h.stack.connect).start()
    marker = READY_MARKERS[h.flavour if system == "peer" else system]
    ready = ReadyMarker(h.workdir.resolve() / name, marker).start()
    done = wait_equal(h, backlog.gen.truth, job, timeout)
    ready.stop()
    cpu = tree_cpu_seconds(job.pid)
    seen.stop()
    job.stop()
    memory = rss.stop()
    first = seen.first_visible
    res: dict[str, Any] = {"caught_up": done is not None, "memory": memory, "cpu_s": cpu}
    if done is not None and first is not None:
        rows, mb = backlog.rows, backlog.size / 1e6
        span = max(done - first, 1e-3)
        res |= {
            "span_s": span,
            "wall_s": done - t0,
            "rows_per_s": rows / span,
            "mb_per_s": mb / span,
            "rows_per_cpu_s": rows / cpu if cpu else 0.0,
        }
        if ready.at is not None:
            res["ready_s"] = ready.at - t0
            res["rows_per_s_after_ready"] = rows / max(done - ready.at, 1e-3)
            res["mb_per_s_after_ready"] = mb / max(done - ready.at, 1e-3)
    return res


def mode_throughput(h: Harness, args: argparse.Namespace) -> dict[str, Any]:
    """Each system over one pre-filled topic, ``--rounds`` times, the order alternating."""
    backlog = fill(h, args)
    out: dict[str, Any] = {
        "rows": backlog.rows,
        "transactions": backlog.gen.transactions,
        "topic_bytes": backlog.size,
        "flavour": h.flavour,
        "rounds": [],
    }
    for r in range(args.rounds):
        order = args.systems if r % 2 == 0 else list(reversed(args.systems))
        one: dict[str, Any] = {"order": order}
        for system in order:
            one[system] = read_backlog(h, backlog, system, f"{system}-fill-{r}", args.timeout)
            print(f"    throughput {system}, round {r + 1}: {json.dumps(one[system])}", flush=True)
        out["rounds"].append(one)
    out |= side_by_side(out["rounds"])
    return out


#: The rates compared round by round, ours over the peer's.
RATES = ("rows_per_s_after_ready", "rows_per_s", "rows_per_cpu_s")


def side_by_side(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Ours over the peer per rate, round by round and the median round's (target 2)."""
    ratios: dict[str, list[float]] = {}
    for key in RATES:
        values = [
            one["ours"][key] / one["peer"][key]
            for one in rounds
            if one.get("ours", {}).get(key) and one.get("peer", {}).get(key)
        ]
        if values:
            ratios[key] = [round(v, 3) for v in values]
    median = {k: sorted(v)[(len(v) - 1) // 2] for k, v in ratios.items()}
    return {"ratios_by_round": ratios, "ratios": median}


def mode_latency(h: Harness, args: argparse.Namespace) -> dict[str, Any]:
    """Each system while the workload is produced at ``--rate``."""
    out: dict[str, Any] = {"rate_txn_s": args.rate}
    for system in args.systems:
        h.reset_tables()
        topic = f"cdc.steady.{system}"
        create_topic(h.stack.bootstrap, topic, args.partitions)
        job = h.start(system, topic, f"{system}-steady")
        time.sleep(args.warmup)  # start-up, so that production meets a running job
        rss = RssSampler([job.pid])
        rss.start()
        sampler = LatencySampler(h.stack.sql_settings()).start()
        gen = h.produce(topic, args, args.rate)
        done = wait_equal(h, gen.truth, job, args.timeout)
        sampler.stop()
        job.stop()
        memory = rss.stop()
        res = {
            "caught_up": done is not None,
            "latency_ms": sampler.percentiles(steady=True),
            "memory": memory,
        }
        out[system] = res
        print(f"    latency {system}: {json.dumps(res)}", flush=True)
    return out


def _collect(out: list[Any], fn: Callable[..., Any], *fn_args: Any) -> None:
    out.append(fn(*fn_args))


def mode_kill(h: Harness, args: argparse.Namespace) -> dict[str, Any]:
    """kill -9 mid-run and restart, then the verifier."""
    out: dict[str, Any] = {}
    for system in args.systems:
        h.reset_tables()
        topic, name = f"cdc.kill.{system}", f"{system}-kill"
        create_topic(h.stack.bootstrap, topic, args.partitions)
        job = h.start(system, topic, name)
        time.sleep(args.warmup)
        versions = VersionWatch(h.stack.connect).start()
        watched: list[Any] = []
        stop_file = h.workdir / f"{name}.stop-watch"
        stop_file.unlink(missing_ok=True)
        conn = h.stack.connect()
        watcher = threading.Thread(
            target=_collect,
            args=(watched, partial(watch, stop_file=stop_file), conn, 24 * 3600),
            daemon=True,
        )
        watcher.start()
        result: list[GenerationResult] = []
        producer = threading.Thread(
            target=_collect, args=(result, h.produce, topic, args, args.rate), daemon=True
        )
        producer.start()
        while versions.first_visible is None and job.running():
            time.sleep(0.2)
        time.sleep(args.kill_after)
        print(f"    kill -9 {system} (pid {job.pid})", flush=True)
        job.kill()
        time.sleep(2)
        job = h.start(system, topic, name, restore=True)
        producer.join()
        gen = result[0]
        done = wait_equal(h, gen.truth, job, args.timeout)
        time.sleep(2)
        job.stop()
        versions.stop()
        stop_file.touch()
        watcher.join(30)
        check = h.stack.connect()
        verdict = run(check, truth=gen.truth)
        check.close()
        comparison = verdict.comparison
        tables = comparison.to_dict()["tables"] if comparison is not None else {}
        w = watched[0] if watched else None
        res = {
            "caught_up": done is not None,
            "passed": verdict.passed,
            "missing": sum(t["missing"] for t in tables.values()),
            "extra": sum(t["extra"] for t in tables.values()),
            "wrong_version": sum(t["wrong_version"] for t in tables.values()),
            "wrong_value": sum(t["wrong_value"] for t in tables.values()),
            "partial_visibility_checks": getattr(w, "checks_with_violations", None),
            "watch_checks": getattr(w, "checks", None),
            "version_regressions": versions.regressions,
            "orders_regressed": len(versions.regressed_orders),
        }
        out[system] = res
        print(f"    kill {system}: {json.dumps(res)}", flush=True)
    return out


MODES: dict[str, Callable[[Harness, argparse.Namespace], dict[str, Any]]] = {
    "check": mode_check,
    "throughput": mode_throughput,
    "latency": mode_latency,
    "kill": mode_kill,
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.peer", description=__doc__)
    p.add_argument("--workdir", type=Path, default=Path("var/bench-peer"))
    p.add_argument("--modes", default="check,throughput,latency,kill")
    p.add_argument("--systems", default="peer,ours", help="peer,ours (in this order)")
    p.add_argument("--orders", type=int, default=2000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--rate", type=float, default=20.0, help="txn/s for latency and kill")
    p.add_argument("--parallelism", type=int, default=2, help="the peer's Flink parallelism")
    p.add_argument("--flavour", choices=FLAVOURS, default="per-table", help="the peer's build")
    p.add_argument("--checkpoint-ms", type=int, default=10_000, help="the peer's checkpoints")
    p.add_argument("--warmup", type=float, default=25.0, help="s between start and production")
    p.add_argument("--kill-after", type=float, default=15.0)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument(
        "--rounds", type=int, default=1, help="throughput: runs of each system, order alternating"
    )
    args = p.parse_args(argv)
    args.systems = [s for s in args.systems.split(",") if s]
    args.modes = [m for m in args.modes.split(",") if m]
    for s in args.systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s}")
    for m in args.modes:
        if m not in MODES:
            p.error(f"unknown mode {m}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the modes; exit status 1 only when the protocol check fails."""
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    stack = LocalStack(args.workdir / "stack")
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    status = 0
    harness = Harness(stack, args.workdir, args.parallelism, args.checkpoint_ms, args.flavour)
    try:
        stack.start()
        for mode in args.modes:
            print(f"== {mode}", flush=True)
            results[mode] = MODES[mode](harness, args)
            if mode == "check" and not results[mode]["passed"]:
                status = 1
            (args.workdir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    finally:
        harness.kill_leftovers()
        stack.stop()
    print(f"results: {args.workdir / 'results.json'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
