"""Process-tree CPU and RSS from /proc (Linux), and a background peak-RSS sampler."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from devstack.pipeline_process import descendant_pids

_TICK = os.sysconf("SC_CLK_TCK")
# How the local stack's own processes show in a command line (devstack.kafka.broker,
# devstack.starrocks.launcher).
_BROKER_MAIN = "kafka.Kafka"
_EMULATOR_MODULE = "devstack.starrocks"
_PAGE = os.sysconf("SC_PAGE_SIZE")


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    return [root, *descendant_pids(root)]


def _stat_fields(stat: Path) -> list[str] | None:
    """The fields of a ``/proc/.../stat`` after the command name (which may hold spaces and
    parentheses), so that utime and stime are fields 11 and 12; ``None`` once it is gone."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_seconds(pid: int) -> float:
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / _TICK


def tree_cpu_seconds(root: int) -> float:
    """User+system CPU of the live tree (exited children's CPU is counted via cutime)."""
    return sum(cpu_by_role(root).values())


def own_cpu(root: int) -> dict[tuple[int, int], float]:
    """``(pid, start time) -> user+system CPU seconds`` of each live process under ``root``,
    its own only (no children's): a process's exit then moves nothing to its parent."""
    out: dict[tuple[int, int], float] = {}
    for pid in descendants(root):
        fields = _stat_fields(Path(f"/proc/{pid}/stat"))
        if fields is not None:
            out[(pid, int(fields[19]))] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


def window_cpu_seconds(root: int, seconds: float, interval_s: float = 0.5) -> float:
    """CPU seconds the tree under ``root`` spends in the next ``seconds``, sampled per process.

    :func:`tree_cpu_seconds` twice can fall (an idle minute read -0.67 CPU-seconds, 12-07): a
    process that leaves the tree unreaped by it takes its CPU along. Here each process counts
    what it spent while seen: one that starts in the window from 0, one that ends up to its
    last sample (at most ``interval_s`` of its CPU is missed).
    """
    first = own_cpu(root)
    last = dict(first)
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(interval_s, left))
        last.update(own_cpu(root))
    return sum(cpu - first.get(key, 0.0) for key, cpu in last.items())


#: (kind, prefix of a Spark JVM thread's name in ``/proc/PID/task/TID/comm``, which keeps 15
#: bytes of it), first match wins; any other thread is ``other``.
JVM_THREAD_KINDS: tuple[tuple[str, str], ...] = (
    ("tasks", "Executor task"),  # Spark's task threads (local master: in the driver's JVM)
    ("stream", "stream executio"),  # a query's driver thread: planning, the batch's steps
    ("jit", "C1 CompilerThre"),
    ("jit", "C2 CompilerThre"),
    ("gc", "GC Thread"),
    ("gc", "VM Thread"),
    ("gc", "G1 "),
)
#: The part of a JVM's CPU no live thread holds: threads that ended in between.
EXITED = "exited"


def jvm_thread_kind(name: str) -> str:
    for kind, prefix in JVM_THREAD_KINDS:
        if name.startswith(prefix):
            return kind
    return "other"


def jvm_threads(root: int) -> dict[tuple[int, int], tuple[str, float]]:
    """``(pid, tid) -> (kind, CPU seconds)`` of every live thread of Spark's JVMs under ``root``.

    Other JVMs (the benchmark's own Kafka broker, :func:`classify`) are left out.
    """
    out: dict[tuple[int, int], tuple[str, float]] = {}
    for pid in descendants(root):
        if classify(pid) != "jvm":
            continue
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                name = (task / "comm").read_text().strip()
            except OSError:
                continue
            fields = _stat_fields(task / "stat")
            if fields is not None:
                cpu_s = (int(fields[11]) + int(fields[12])) / _TICK
                out[(pid, int(task.name))] = (jvm_thread_kind(name), cpu_s)
    return out


def jvm_cpu_by_thread(
    before: dict[tuple[int, int], tuple[str, float]],
    after: dict[tuple[int, int], tuple[str, float]],
    jvm_cpu_s: float,
) -> dict[str, float]:
    """CPU seconds of Spark's JVM threads between two :func:`jvm_threads` snapshots, by kind.

    A thread started in between counts from zero. ``jvm_cpu_s``, the JVMs' CPU over the same
    span (:func:`cpu_by_role`), less what the live threads took, is :data:`EXITED`.
    """
    out: dict[str, float] = {}
    for key, (kind, cpu_s) in after.items():
        spent = cpu_s - before.get(key, (kind, 0.0))[1]
        out[kind] = out.get(kind, 0.0) + max(0.0, spent)
    out[EXITED] = max(0.0, jvm_cpu_s - sum(out.values()))
    return out


def jit_cpu_seconds(root: int) -> float:
    """User+system CPU of the JIT compiler threads of Spark's JVMs in ``root``'s live tree.

    A fresh Spark JVM compiles for minutes after it starts; execution samplers (JFR) do not
    see these threads, so their share is read here.
    """
    return sum(cpu_s for kind, cpu_s in jvm_threads(root).values() if kind == "jit")


def rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    except OSError:
        return 0


def cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def classify(pid: int) -> str:
    """``jvm`` | ``python-driver`` | ``python-worker`` | ``broker`` | ``emulator`` | ``other``.

    ``jvm`` is Spark's (driver and executors); the benchmark's own Kafka broker is a JVM too,
    told apart by its main class.
    """
    cmd = cmdline(pid)
    if _BROKER_MAIN in cmd.split():
        return "broker"
    if "java" in cmd.split(" ", 1)[0] or "org.apache.spark" in cmd:
        return "jvm"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        # The executors' Python workers (UDFs, applyInPandasWithState, mapInArrow, reads).
        return "python-worker"
    if "app/main.py" in cmd:
        return "python-driver"
    if _EMULATOR_MODULE in cmd:
        return "emulator"
    return "other"


def cpu_by_role(root: int, driver: int | None = None) -> dict[str, float]:
    """User+system CPU seconds of the live tree under ``root`` by :func:`classify` role.

    A process's exited children count under its own role (cutime), as the Python workers a
    daemon forked count under ``python-worker``. ``driver``: the pid to count as
    ``python-driver`` whatever its command line (an in-process benchmark's own process).
    """
    out: dict[str, float] = {}
    for pid in descendants(root):
        fields = _stat_fields(Path(f"/proc/{pid}/stat"))
        if fields is None:
            continue
        role = "python-driver" if pid == driver else classify(pid)
        out[role] = out.get(role, 0.0) + sum(int(f) for f in fields[11:15]) / _TICK
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds each role spent between two :func:`cpu_by_role` snapshots.

    A role whose processes all ended in between (nothing left to read) counts 0, not less.
    """
    return {role: max(0.0, after[role] - before.get(role, 0.0)) for role in after}


@dataclass(eq=False)
class RssSampler(threading.Thread):
    """Peak RSS of a process tree, by role, sampled every ``interval_s``.

    ``roots``: tree roots. Processes of role ``exclude`` are skipped (e.g. the benchmark's own
    broker/emulator children when the root is the harness itself).
    """

    roots: list[int]
    interval_s: float = 0.25
    only_roles: tuple[str, ...] = ("jvm", "python-driver", "python-worker")
    peak: dict[str, int] = field(default_factory=dict)
    peak_worker_max: int = 0
    peak_workers: int = 0
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True, name="bench-rss")

    def sample(self) -> None:
        by_role: dict[str, int] = {}
        worker_max = workers = 0
        for root in self.roots:
            for pid in descendants(root):
                role = classify(pid)
                if role not in self.only_roles:
                    continue
                rss = rss_bytes(pid)
                by_role[role] = by_role.get(role, 0) + rss
                if role == "python-worker":
                    worker_max = max(worker_max, rss)
                    workers += 1
        for role, value in by_role.items():
            self.peak[role] = max(self.peak.get(role, 0), value)
        self.peak_worker_max = max(self.peak_worker_max, worker_max)
        self.peak_workers = max(self.peak_workers, workers)

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.sample()
            self.stop_event.wait(self.interval_s)

    def stop(self) -> dict[str, float]:
        self.stop_event.set()
        self.join(5)
        out = {f"{k}_mb": v / 1e6 for k, v in self.peak.items()}
        out["python-worker-max_mb"] = self.peak_worker_max / 1e6
        out["python-workers"] = float(self.peak_workers)
        return out
