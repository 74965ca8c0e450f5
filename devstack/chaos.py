"""The exactly-once proof: run the pipeline under a schedule of faults and check the result.

Each run starts a fresh local stack (broker + StarRocks emulator), runs generator, pipeline
(through ``spark-submit.sh``, as a user runs it) and a watching verifier, injects faults,
restarts the pipeline after every crash the way a supervisor would, and finally checks:

* nothing lost, nothing extra, every final version right (verifier vs ground truth);
* no partial transaction ever visible (the verifier's watch, all run long);
* no micro-batch committed twice (every committed label on the server, per query and batch);
* exactly the injected bad transactions dead-lettered, by reason;
* the pipeline exited only when a fault made it: a crash point that fired, or an injected
  fault the product treats as terminal (``TERMINAL_FAULTS``); a restart that fails again, or a
  fault the product should have ridden out, fails the run.

``python -m devstack.chaos --runs 30 --seed 1`` prints a table per run and a summary, and
exits 0 only if every run passed. ``make chaos`` runs a bounded named schedule (CI);
``make soak RUNS=100`` a long random one.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.main import INSTRUMENT_ENV
from demo.badinput import BadInputKind
from demo.generate import GenerationResult, GeneratorConfig, generate
from demo.verify import Verdict, WatchReport, run, watch
from demo.workload import WorkloadConfig
from devstack.faultproxy.launcher import ProxyHandle, start_proxy
from devstack.kafka.admin import create_topic
from devstack.pipeline_process import PipelineProcess
from devstack.progress import Tally
from devstack.stack import (
    COMMITTED_STATES,
    LOCAL_CONFIG,
    LocalStack,
    committed_offsets,
    topic_end_offsets,
)
from devstack.starrocks.crashpoints import CRASH_AT_ENV, CRASH_MARKER_ENV
from devstack.starrocks.faults import write_lock_timeout
from sinks.starrocks.labels import parse_label

TOPIC = "cdc.orders"
NAME = "chaos"
DATABASE = "demo"  # the workload's and conf/local.yaml's

# Driver crashes (kill -9 from inside, no cleanup) at named points of the sink protocol.
CRASH_POINTS = ("after_begin", "after_load", "before_commit", "after_commit")
# Faults the emulator answers with (its fault knobs), and the other kinds.
SINK_FAULTS = (
    "sink-5xx",
    "sink-timeout",
    "commit-lost",
    "publish-timeout",
    "too-many-txns",
    "txn-in-processing",
    "fe-restart",
    "fe-journal-restart",
    "commit-lock-timeout",
)
OTHER_FAULTS = ("kill9", "broker-restart", "crash-during-recovery")
# Faults the sink reports as terminal by design, so the pipeline may exit once for each
# (``TooManyTransactionsError``: the user must raise the FE limit; a restart retries).
TERMINAL_FAULTS = ("too-many-txns",)
# HTTP-level faults thrown by the fault proxy between the app and the FE (and, through its
# rewritten 307s, the BE): the same faults can be thrown at a real StarRocks this way.
PROXY_FAULTS = ("net-reset-load", "net-drop-commit", "net-503-begin", "net-jitter")
ALL_FAULTS = tuple(f"crash:{p}" for p in CRASH_POINTS) + SINK_FAULTS + OTHER_FAULTS + PROXY_FAULTS

# The bounded schedule of `make chaos`: every fault kind at least once, bad input in both;
# run 1 on the default path, run 2 with idle batches (see `run_once`).
NAMED_SCHEDULE: tuple[tuple[str, ...], ...] = (
    ("crash:after_load", "commit-lost", "sink-5xx", "broker-restart", "crash:after_commit",
     "txn-in-processing", "net-reset-load", "net-drop-commit", "net-503-begin", "net-jitter",
     "crash:after_begin", "kill9"),
    ("crash-during-recovery", "publish-timeout", "too-many-txns", "fe-restart",
     "sink-timeout", "crash:before_commit", "fe-journal-restart", "commit-lock-timeout"),
)  # fmt: skip

MAX_TXN_ROWS = 20  # the pipeline's assembler.max-txn-rows in chaos runs (>= 2 x max items)
SOCKET_TIMEOUT_MS = 4000  # the sink's HTTP read timeout in chaos runs; sink-timeout exceeds it


@dataclass
class RunResult:
    """What one chaos run did and found."""

    run: int
    seed: int
    faults: list[str]
    injected: Counter[str] = field(default_factory=Counter)
    restarts: int = 0
    transactions: int = 0
    rows_expected: int = 0
    rows_found: int = 0
    lost: int = 0
    extra: int = 0
    wrong_version: int = 0
    double_committed_batches: int = 0
    # DATA rows of the good transactions sent, and rows StarRocks' visible transactions loaded
    # into the data tables: equal when each row was applied exactly once.
    rows_sent: int = 0
    rows_loaded: int = 0
    partial_observations: int = 0
    watch_checks: int = 0
    dead_letters: dict[str, tuple[int, int]] = field(default_factory=dict)
    dead_letters_ok: bool = True
    caught_up: bool = False
    # The pipeline's own exits (its last ERROR line each), and how many no fault explains.
    exits: list[str] = field(default_factory=list)
    unexplained_exits: int = 0
    seconds: float = 0.0
    error: str | None = None
    # Per-table sink mode is exactly-once per table but not atomic across tables: partial
    # observations are expected there and reported, not failed.
    per_table: bool = False
    idle_batches: bool = False

    @property
    def passed(self) -> bool:
        """The run's verdict."""
        return (
            self.error is None
            and self.caught_up
            and self.lost == 0
            and self.extra == 0
            and self.wrong_version == 0
            and self.double_committed_batches == 0
            and self.rows_loaded == self.rows_sent
            and (self.partial_observations == 0 or self.per_table)
            and self.watch_checks > 0
            and self.dead_letters_ok
            and self.unexplained_exits == 0
        )


class Supervisor:
    """Keeps the pipeline running: restarts it whenever it exits, like a process manager."""

    def __init__(
        self, stack: LocalStack, workdir: Path, extra: Sequence[str], proxy: ProxyHandle
    ) -> None:
        self.stack = stack
        self.proxy = proxy
        self.workdir = workdir
        self.extra = list(extra)
        self.process: PipelineProcess | None = None
        self.starts = 0
        self.pending_crashes: list[str] = []
        self.armed: str | None = None
        # The driver's crash hook appends "point batch" here before it kills itself.
        self.marker = workdir / "crashes-fired.txt"
        self._fired_at_start = 0
        # The last ERROR line of every run that exited on its own (kill9 is not one).
        self.exits: list[str] = []

    def start(self) -> None:
        """Start (or restart) the pipeline, arming the next pending crash point if any."""
        if self.armed is not None and not self._armed_crash_fired():
            # Another fault ended that run first: keep the crash point for the next one.
            self.pending_crashes.insert(0, self.armed)
        self.armed = None
        overrides = self.stack.pipeline_overrides(TOPIC, self.workdir / "checkpoint", NAME)
        overrides += self.extra
        env: dict[str, str] = {}
        if self.pending_crashes:
            self.armed = self.pending_crashes.pop(0)
            # Injected through the entry point's instrumentation hook: the product has no
            # crash setting (devstack/starrocks/crashpoints.py wraps its TxnApi).
            env = {
                INSTRUMENT_ENV: "devstack.starrocks.crashpoints:from_env",
                CRASH_AT_ENV: self.armed,
                CRASH_MARKER_ENV: str(self.marker),
            }
        self._fired_at_start = len(crashes_in(self.marker))
        self.process = PipelineProcess(
            LOCAL_CONFIG, overrides, self.workdir / "pipeline.log", env=env
        )
        self.process.start()
        self.starts += 1

    def _armed_crash_fired(self) -> bool:
        return len(crashes_in(self.marker)) > self._fired_at_start

    def ensure_running(self) -> bool:
        """Restart a pipeline that has exited; True if it did."""
        if self.process is not None and not self.process.running():
            errors = [line for line in self.process.lines if "level=ERROR" in line]
            self.exits.append(errors[-1] if errors else "(no ERROR line)")
            self.start()
            return True
        return False

    def kill(self) -> None:
        """Kill -9 the driver (and its JVM), then restart."""
        if self.process is not None:
            self.process.kill()
        self.start()

    def stop(self) -> None:
        """Graceful stop at the end of the run."""
        if self.process is not None:
            self.process.stop()


def plan_faults(rng: random.Random, count: int) -> list[str]:
    """A random fault schedule."""
    return [rng.choice(ALL_FAULTS) for _ in range(count)]


def run_once(
    index: int,
    seed: int,
    faults: Sequence[str],
    workdir: Path,
    *,
    orders: int,
    partitions: int,
    rate: float,
    bad_input: bool,
    log: Callable[[str], None],
    max_offsets: int = 60,
    per_table: bool = False,
    idle_batches: bool = False,
) -> RunResult:
    """One chaos run on a fresh stack; never raises (errors go into the result).

    ``idle_batches=False`` runs the product's default path (one Spark job per micro-batch,
    counted by the load, no batch while idle); ``True`` runs Spark's no-data batches, which a
    never-ended transaction needs to time out once its partition goes quiet, so only such a
    run injects that kind of bad input.
    """
    result = RunResult(
        run=index, seed=seed, faults=list(faults), per_table=per_table, idle_batches=idle_batches
    )
    rng = random.Random(seed)
    started = time.monotonic()
    if workdir.exists():
        shutil.rmtree(workdir)
    stack = LocalStack(workdir / "stack")
    supervisor: Supervisor | None = None
    try:
        stack.start()
        stack.apply_ddl()
        create_topic(stack.bootstrap, TOPIC, partitions)
        assert stack.emulator is not None
        # All sink traffic goes through the fault proxy (it forwards untouched until a
        # proxy fault is armed).
        proxy = start_proxy(stack.emulator.fe_url)
        extra = [
            # Small enough that transactions straddle batches.
            f"source.max-offsets-per-trigger={max_offsets}",
            "starrocks.sink.buffer-flush.interval-ms=500",
            f"starrocks.sink.socket.timeout-ms={SOCKET_TIMEOUT_MS}",
            "starrocks.sink.commit.check-timeout-ms=20000",
            f"assembler.max-txn-rows={MAX_TXN_ROWS}",
            "assembler.txn-timeout=4s",
            f"pipeline.idle-batches={str(idle_batches).lower()}",
        ]
        extra.append(f"starrocks.load-url=127.0.0.1:{proxy.port}")
        if per_table:
            extra.append("starrocks.sink.transaction.multi-table.enabled=false")
        supervisor = Supervisor(stack, workdir, extra, proxy)
        # Crash points are armed at (re)starts, in schedule order.
        for fault in faults:
            if fault.startswith("crash:"):
                supervisor.pending_crashes.append(f"{fault.split(':', 1)[1]}@{rng.randint(1, 3)}")
            elif fault == "crash-during-recovery":
                # A crash that leaves a PREPARE transaction, then one while rolling it back.
                supervisor.pending_crashes += ["after_load@1", "during_recovery"]
        supervisor.start()
        assert supervisor.process is not None
        if not supervisor.process.wait_for_line("query started", 240):
            result.error = "pipeline did not start"
            return result

        watch_box: list[WatchReport] = []
        stop_watch = threading.Event()
        watch_conn = stack.connect()
        watcher = threading.Thread(
            target=lambda: watch_box.append(
                watch(watch_conn, 24 * 3600, interval_s=0.1, stop_event=stop_watch)
            ),
            daemon=True,
        )
        watcher.start()

        # A never-ended transaction ends its partition: it times out only with idle batches.
        kinds = [k for k in BadInputKind if idle_batches or k is not BadInputKind.TXN_TIMEOUT]
        bad = {k: 1 for k in kinds} if bad_input else {}
        gen_box: list[GenerationResult] = []
        gen_error: list[BaseException] = []
        gen_config = GeneratorConfig(
            bootstrap=stack.bootstrap,
            topic=TOPIC,
            workload=WorkloadConfig(orders=orders, partitions=partitions, seed=seed),
            rate=rate,
            bad_inputs=bad,
            max_txn_rows=MAX_TXN_ROWS if bad_input else None,
            progress_interval_s=3600,
        )

        def produce() -> None:
            try:
                gen_box.append(generate(gen_config))
            except BaseException as e:
                gen_error.append(e)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        produce_started = time.monotonic()

        # Faults start once the pipeline is processing (its first batch), spread over the
        # production window; a broker restart hits the generator's idempotent producer and
        # the pipeline's consumer alike.
        supervisor.process.wait_for_line("batch ", 240)
        production_s = orders * 1.7 / rate  # ~1.7 transactions per order (updates, deletes)
        window = max(5.0, production_s - (time.monotonic() - produce_started))
        timed = sorted((rng.uniform(1.0, window), f) for f in faults if not f.startswith("crash"))
        t0 = time.monotonic()
        deadline = t0 + 600
        conn = stack.connect()
        ends: dict[int, int] | None = None
        while time.monotonic() < deadline:
            if supervisor.ensure_running():
                result.restarts += 1
                log(f"    restart #{result.restarts} (pipeline exited)")
            while timed and time.monotonic() - t0 >= timed[0][0]:
                _, fault = timed.pop(0)
                log(f"    inject {fault} at {time.monotonic() - t0:.1f}s")
                if _inject(fault, stack, supervisor):
                    result.restarts += 1
                result.injected[fault] += 1
            if gen_error:
                raise gen_error[0]
            if not producer.is_alive() and not timed:
                if ends is None:
                    ends = topic_end_offsets(stack.bootstrap, TOPIC, partitions)
                if _caught_up(conn, ends):
                    result.caught_up = True
                    break
            time.sleep(0.3)
        supervisor.stop()
        result.exits = supervisor.exits
        result.unexplained_exits = unexplained_exits(
            len(supervisor.exits), len(crashes_in(supervisor.marker)), result.injected
        )
        stop_watch.set()
        watcher.join(30)
        if not gen_box:
            result.error = "generator did not finish"
            return result
        generated = gen_box[0]
        verdict = run(stack.connect(), truth=generated.truth)
        _score(result, generated, verdict, watch_box[0] if watch_box else None)
        result.double_committed_batches = _double_commits(stack)
        result.rows_sent = generated.counts.data_rows
        result.rows_loaded = stack.rows_loaded(DATABASE, generated.counts.data_events.keys())
        # Crash points count when they fired (an armed point may never be reached).
        result.injected.update(f"crash:{point}" for point in crashes_in(supervisor.marker))
        if not result.passed:
            (workdir / "verdict.txt").write_text(verdict.render())
    except Exception as e:
        result.error = f"{type(e).__name__}: {e}"
    finally:
        if supervisor is not None:
            if supervisor.process is not None:
                supervisor.process.kill()
            supervisor.proxy.stop()
        stack.stop()
        result.seconds = time.monotonic() - started
    return result


def _inject(fault: str, stack: LocalStack, supervisor: Supervisor) -> bool:
    """Throw one fault; True when it restarted the pipeline itself."""
    assert stack.emulator is not None
    control = stack.emulator.control
    if fault == "kill9":
        supervisor.kill()
        return True
    if fault == "broker-restart":
        assert stack.broker is not None
        stack.broker = stack.broker.restart()
    elif fault == "sink-5xx":
        control.fail_next(
            "commit", 1, status="INTERNAL_ERROR", message="injected 500", http_status=500
        )
        control.fail_next("load", 1, status="INTERNAL_ERROR", message="injected", http_status=503)
    elif fault == "sink-timeout":
        control.delay("commit", SOCKET_TIMEOUT_MS / 1000 + 2, 1)
    elif fault == "commit-lost":
        control.drop_commit_response(1)
    elif fault == "publish-timeout":
        control.publish_timeout(1)
    elif fault == "too-many-txns":
        control.too_many_txns(1)
    elif fault == "txn-in-processing":
        control.fail_next(
            "load", 2, status="TXN_IN_PROCESSING", message="Transaction in processing"
        )
    elif fault == "fe-restart":
        control.restart()
    elif fault == "fe-journal-restart":
        # The next commit lands, the FE comes back from its journal with the task CANCELLED,
        # and the answer is lost: the client's retry hears "Can not commit CANCELLED".
        control.journal_restart_after_commit(1)
    elif fault == "commit-lock-timeout":
        # The FE's commit fails on the database lock: a multi-table task rolls back, a
        # single-table transaction stays PREPARED (only the client would commit it).
        control.commit_failed(write_lock_timeout(DATABASE))
    elif fault == "net-reset-load":
        supervisor.proxy.control.reset_before("load", count=1)
    elif fault == "net-drop-commit":
        supervisor.proxy.control.drop_response("commit", count=1)
    elif fault == "net-503-begin":
        supervisor.proxy.control.http_error("begin", status=503, count=2)
    elif fault == "net-jitter":
        supervisor.proxy.control.jitter(50, 400, count=40)
    else:
        msg = f"unknown fault {fault!r}; known: {', '.join(ALL_FAULTS)}"
        raise ValueError(msg)
    return False


def _caught_up(conn: Any, ends: dict[int, int]) -> bool:
    try:
        got = committed_offsets(conn, NAME, TOPIC)
    except Exception:
        return False
    return all(got.get(p, -1) >= o - 1 for p, o in ends.items() if o > 0)


def _score(
    result: RunResult, generated: GenerationResult, verdict: Verdict, watched: WatchReport | None
) -> None:
    result.transactions = generated.transactions
    if verdict.comparison is not None:
        for t in verdict.comparison.tables:
            result.rows_expected += t.expected
            result.rows_found += t.actual
            result.lost += t.missing
            result.extra += t.extra
            result.wrong_version += t.wrong_version + t.wrong_value
    if not verdict.final.ok:
        result.partial_observations += 1
    if watched is not None:
        result.watch_checks = watched.checks
        result.partial_observations += watched.checks_with_violations
    if verdict.dead_letters is not None:
        result.dead_letters = {
            k.kind: (k.actual_txns, k.expected_txns)
            for k in verdict.dead_letters.kinds
            if k.actual_txns or k.expected_txns
        }
        result.dead_letters_ok = verdict.dead_letters.ok


def crashes_in(marker: Path) -> list[str]:
    """Crash points that actually killed the driver, from the crash hook's marker file."""
    if not marker.exists():
        return []
    return [line.split()[0] for line in marker.read_text().splitlines() if line.strip()]


def unexplained_exits(exits: int, fired_crashes: int, injected: Counter[str]) -> int:
    """Exits of the pipeline no fault explains (must be 0).

    Each crash point that fired explains one exit, each injected terminal fault
    (``TERMINAL_FAULTS``) at most one; kill9 restarts the pipeline itself and is no exit.
    """
    return max(0, exits - fired_crashes - sum(injected[f] for f in TERMINAL_FAULTS))


def _double_commits(stack: LocalStack, prefix: str = NAME) -> int:
    """Batches (per table in per-table mode) with more than one committed label (must be 0).

    Labels are read with the product's own rule (:func:`sinks.starrocks.labels.parse_label`),
    so per-table labels (``...-{batch}-{attempt}-{table}``) are counted too.
    """
    assert stack.emulator is not None
    per_batch: Counter[tuple[str, int, str | None]] = Counter()
    for label, state in stack.emulator.control.labels().items():
        parts = parse_label(label, prefix)
        if parts is not None and state in COMMITTED_STATES:
            per_batch[(parts.query_id, parts.batch_id, parts.table)] += 1
    return sum(1 for n in per_batch.values() if n > 1)


def render(results: Sequence[RunResult]) -> str:
    """The per-run table and the summary."""
    head = (
        f"{'run':>3} {'verdict':<7} {'idle':<4} {'faults':<58} {'restarts':>8} {'txns':>5} "
        f"{'rows exp/found':>15} {'loaded/sent':>11} {'lost':>4} {'dup':>4} {'partial':>7} "
        f"{'dlq txns':>8} {'s':>5}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        dlq = sum(a for a, _ in r.dead_letters.values())
        idle = "on" if r.idle_batches else "off"
        lines.append(
            f"{r.run:>3} {'PASS' if r.passed else 'FAIL':<7} {idle:<4} "
            f"{','.join(r.faults)[:58]:<58} "
            f"{r.restarts:>8} {r.transactions:>5} {f'{r.rows_expected}/{r.rows_found}':>15} "
            f"{f'{r.rows_loaded}/{r.rows_sent}':>11} "
            f"{r.lost:>4} {r.extra + r.wrong_version + r.double_committed_batches:>4} "
            f"{r.partial_observations:>7} {dlq:>8} {r.seconds:>5.0f}"
        )
        if r.error:
            lines.append(f"    error: {r.error}")
        if r.unexplained_exits:
            lines.append(f"    exits no fault explains: {r.unexplained_exits}; the exits:")
            lines += [f"      {line[-300:]}" for line in r.exits]
    injected: Counter[str] = Counter()
    dead: Counter[str] = Counter()
    for r in results:
        injected.update(r.injected)
        for kind, (actual, _expected) in r.dead_letters.items():
            dead[kind] += actual
    lines += ["", "faults injected by kind:"]
    lines += [f"  {k:<24} {n:>4}" for k, n in sorted(injected.items())]
    if dead:
        lines += ["", "dead-lettered transactions by reason:"]
        lines += [f"  {k:<24} {n:>4}" for k, n in sorted(dead.items())]
    passed = sum(r.passed for r in results)
    lines += [
        "",
        f"runs {len(results)}  passed {passed}  failed {len(results) - passed}  "
        f"restarts {sum(r.restarts for r in results)}  "
        f"transactions {sum(r.transactions for r in results)}  "
        f"rows expected {sum(r.rows_expected for r in results)}  "
        f"found {sum(r.rows_found for r in results)}  "
        f"rows loaded {sum(r.rows_loaded for r in results)} "
        f"of {sum(r.rows_sent for r in results)} sent  "
        f"lost {sum(r.lost for r in results)}  "
        f"duplicated {sum(r.extra + r.wrong_version + r.double_committed_batches for r in results)}"
        f"  partial-visibility observations {sum(r.partial_observations for r in results)}"
        f"  unexplained exits {sum(r.unexplained_exits for r in results)}",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(prog="python -m devstack.chaos", description=__doc__)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--schedule",
        choices=("named", "random"),
        default="random",
        help="named: the fixed bounded schedule covering every fault kind (make chaos)",
    )
    p.add_argument("--faults-per-run", type=int, default=3)
    p.add_argument("--orders", type=int, default=120)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--rate", type=float, default=10.0, help="transactions per second")
    p.add_argument("--no-bad-input", action="store_true")
    p.add_argument("--max-offsets-per-trigger", type=int, default=60)
    p.add_argument("--parallel", type=int, default=1, help="runs at the same time")
    p.add_argument(
        "--only",
        default="",
        metavar="N[,N...]",
        help="run only these runs of the schedule (same seeds and faults): reproduce a failure",
    )
    p.add_argument("--workdir", type=Path, default=Path("var/chaos"))
    p.add_argument("--json", type=Path, help="write the results as JSON here")
    p.add_argument(
        "--per-table",
        action="store_true",
        help="run the sink in per-table mode (exactly-once per table, not atomic across "
        "tables: partial observations are reported, not failed)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the schedule; exit 0 only if every run passed."""
    args = parse_args(argv)
    rng = random.Random(args.seed)
    schedule = (
        list(NAMED_SCHEDULE)[: args.runs] if args.schedule == "named" else
        [tuple(plan_faults(rng, args.faults_per_run)) for _ in range(args.runs)]
    )  # fmt: skip

    def one(i: int, faults: tuple[str, ...]) -> RunResult:
        seed = args.seed * 1000 + i
        # Odd runs take the default path, even ones Spark's no-data batches: both are proven.
        idle_batches = i % 2 == 0
        print(
            f"run {i}/{len(schedule)} seed={seed} faults={','.join(faults)} "
            f"idle-batches={str(idle_batches).lower()}",
            flush=True,
        )
        result = run_once(
            i,
            seed,
            faults,
            args.workdir / f"run-{i:03d}",
            orders=args.orders,
            partitions=args.partitions,
            rate=args.rate,
            bad_input=not args.no_bad_input,
            log=lambda s: print(f"  [{i}] {s.strip()}", flush=True),
            max_offsets=args.max_offsets_per_trigger,
            per_table=args.per_table,
            idle_batches=idle_batches,
        )
        print(
            f"  -> run {i} {'PASS' if result.passed else 'FAIL'} in {result.seconds:.0f}s "
            f"restarts={result.restarts} lost={result.lost} extra={result.extra} "
            f"wrong={result.wrong_version} double={result.double_committed_batches} "
            f"loaded={result.rows_loaded}/{result.rows_sent} "
            f"partial={result.partial_observations} "
            f"unexplained_exits={result.unexplained_exits} error={result.error}",
            flush=True,
        )
        with tally_lock:
            tally.record(result.passed)
        return result

    # Runs are independent (own stack, ports, folders); --parallel overlaps their waits.
    only = {int(n) for n in args.only.split(",") if n.strip()}
    planned = [(i, f) for i, f in enumerate(schedule, start=1) if not only or i in only]
    tally = Tally(len(planned), emit=lambda line: print(line, flush=True))
    tally_lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        results = list(pool.map(lambda a: one(*a), planned))
    print()
    print(render(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps([dict(r.__dict__, passed=r.passed) for r in results], default=str, indent=1)
        )
    passed = sum(r.passed for r in results)
    # The plain closing line CI tools read as the run's test count.
    print(f"chaos: {passed} passed, {len(results) - passed} failed")
    return 0 if results and passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
