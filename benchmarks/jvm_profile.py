"""Where the Spark JVM's CPU goes: a JDK Flight Recorder profile of one in-process query.

    .venv/bin/python -m benchmarks.jvm_profile [--query pipeline] [--rows 300000]
        [--max-offsets 30000] [--period-ms 2] [--top 25] [--out DIR] [--set KEY=VALUE ...]

Runs the query (:data:`benchmarks.spark_queries.QUERIES`) once to warm up, then once measured
with a JFR recording of execution samples only (``jcmd JFR.start``; JFR is in every JDK 17).
Python's share is py-spy's (``make bench``'s profile part); this is the JVM's. Prints the
samples by thread (executor tasks, the driver's stream execution thread, the driver's py4j
threads), by a few known costs (each sample counted once) and the top frames by self time,
beside the JVM's CPU per Kafka record. The recording is kept (``jfr print``, JMC).

A sample is taken only of a thread running Java code: a task thread waiting on its Python
worker is not in it, so the shares are of the JVM's own CPU.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Execution samples only: the profile's own cost stays small and the rest of JFR off.
_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="cpu" description="execution samples only">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting><setting name="period">{period} ms</setting>
  </event>
</configuration>
"""

#: (thread kind, prefix of the JVM thread's name), first match wins. JFR keeps a thread's
#: name from when it first saw it; Spark renames its task threads per task.
THREADS: tuple[tuple[str, str], ...] = (
    ("executor tasks", "Executor task"),
    ("driver: stream execution (planning, batch)", "stream execution thread"),
    ("driver: py4j calls from Python", "Thread-"),
)

#: (cost, substring of a frame ``package.Class.method``). A sample goes to the cost of the
#: frame nearest its leaf that matches: Spark's operators pull rows from their inputs, so
#: an operator's frame is below (outside) the work of every operator upstream of it, and
#: only the innermost match says whose work a sample is.
AREAS: tuple[tuple[str, str], ...] = (
    ("Kafka reads (Spark's Kafka source, Kafka client)", "org.apache.spark.sql.kafka010."),
    (
        "shuffle write (serialize, compress, write)",
        "org.apache.spark.storage.DiskBlockObjectWriter.",
    ),
    ("shuffle read", "org.apache.spark.storage.ShuffleBlockFetcherIterator."),
    ("shuffle read", "org.apache.spark.shuffle.BlockStoreShuffleReader."),
    ("rows -> Arrow, to Python", "org.apache.spark.sql.execution.arrow.ArrowWriter."),
    ("Arrow -> rows, from Python", "org.apache.spark.sql.vectorized.ArrowColumnVector"),
    ("Arrow -> rows, from Python", "org.apache.spark.sql.execution.python.PythonArrowOutput"),
    (
        "building rows (UnsafeRow projections)",
        "org.apache.spark.sql.catalyst.expressions.codegen.Unsafe",
    ),
    ("hashing (partitioning)", "org.apache.spark.sql.catalyst.expressions.XXH64"),
    ("hashing (partitioning)", "org.apache.spark.sql.catalyst.expressions.Murmur3"),
    ("state store", "org.apache.spark.sql.execution.streaming.state."),
    ("sort", "org.apache.spark.util.collection.unsafe.sort."),
    ("sort", "org.apache.spark.sql.execution.UnsafeExternalRowSorter"),
    ("Java (de)serialization (tasks, closures, results)", "java.io.ObjectInputStream."),
    ("Java (de)serialization (tasks, closures, results)", "java.io.ObjectOutputStream."),
    ("code generation (Janino)", "org.codehaus.janino."),
    (
        "analysis, optimization (rule executors)",
        "org.apache.spark.sql.catalyst.rules.RuleExecutor.",
    ),
    ("py4j", "py4j."),
)
OTHER = "other"


@dataclass
class Sample:
    thread: str
    frames: list[str] = field(default_factory=list)  # leaf first, ``package.Class.method``


def parse(lines: Iterable[str]) -> Iterator[Sample]:
    """The execution samples of ``jfr print --events jdk.ExecutionSample`` text."""
    sample: Sample | None = None
    in_stack = False
    for raw in lines:
        line = raw.strip()
        if line.startswith("jdk.ExecutionSample {"):
            sample, in_stack = Sample(thread=""), False
        elif sample is None:
            continue
        elif line.startswith("sampledThread = "):
            sample.thread = line.split('"', 2)[1]
        elif line.startswith("stackTrace = ["):
            in_stack = True
        elif in_stack and line == "]":
            in_stack = False
        elif in_stack and line != "...":
            sample.frames.append(line.split("(", 1)[0])
        elif line == "}":
            yield sample
            sample = None


def thread_kind(name: str) -> str:
    for kind, prefix in THREADS:
        if name.startswith(prefix):
            return kind
    return "other JVM threads"


@dataclass
class Profile:
    samples: int
    threads: Counter[str]
    areas: Counter[str]
    self_frames: Counter[str]


def area(frames: list[str]) -> str:
    """The cost a sample's stack (leaf first) is counted under: its innermost known frame's."""
    for frame in frames:
        for name, needle in AREAS:
            if needle in frame:
                return name
    return OTHER


def summarize(samples: Iterable[Sample]) -> Profile:
    threads: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    n = 0
    for s in samples:
        n += 1
        threads[thread_kind(s.thread)] += 1
        areas[area(s.frames)] += 1
        if s.frames:
            leaves[s.frames[0]] += 1
    return Profile(n, threads, areas, leaves)


def report(profile: Profile, jvm_us_per_record: float, top: int) -> list[str]:
    """The profile as text: shares of the sampled Java threads' time.

    The JVM's CPU per record is given beside, not split by the shares: it also holds the
    CPU of the JVM's own threads (garbage collection, JIT compilation), which execution
    samples never see.
    """
    n = max(1, profile.samples)

    def line(title: str, count: int) -> str:
        return f"  {count / n * 100:5.1f} %  {title}"

    out = [
        f"{profile.samples} samples of Java threads; the Spark JVM's CPU (all its threads, "
        f"GC and JIT included): {jvm_us_per_record:.1f} µs per record"
    ]
    out += ["by thread:"] + [line(k, v) for k, v in profile.threads.most_common()]
    out += ["by cost (each sample once, its innermost known frame):"]
    out += [line(a, c) for a, c in profile.areas.most_common()]
    out += ["self:"] + [line(f, c) for f, c in profile.self_frames.most_common(top)]
    return out


def _jcmd(pid: int, *args: str) -> None:
    subprocess.run(["jcmd", str(pid), *args], check=True, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.spark_queries import QUERIES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", choices=QUERIES, default="pipeline")
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--max-offsets", type=int, default=30_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--period-ms", type=int, default=2)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", type=Path, default=None, help="where the .jfr is kept")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)

    from benchmarks import spark_queries as q
    from benchmarks.workload import Shape

    out = args.out or Path(tempfile.mkdtemp(prefix="jvm-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    settings = out / "cpu.jfc"
    settings.write_text(_SETTINGS.format(period=args.period_ms))
    recording = out / f"{args.query}.jfr"
    with q.prefilled(Shape(args.partitions, 10, 100), args.rows, args.max_offsets) as bench:
        jvm = bench.spark.sparkContext._jvm
        assert jvm is not None
        pid = int(jvm.java.lang.ProcessHandle.current().pid())
        # JFR's own start-up (its classes, first recording) happens during the warm-up run.
        _jcmd(pid, "JFR.start", "name=warm", f"settings={settings}")
        bench.measure("warm", bench.query(args.query, args.set))
        _jcmd(pid, "JFR.stop", "name=warm")
        _jcmd(pid, "JFR.start", "name=measured", f"settings={settings}", f"filename={recording}")
        run = bench.measure(args.query, bench.query(args.query, args.set))
        _jcmd(pid, "JFR.stop", "name=measured")
    text = subprocess.run(
        ["jfr", "print", "--stack-depth", "256", "--events", "jdk.ExecutionSample", str(recording)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    jvm_us = run.extra["cpu_s_by_role"].get("jvm", 0.0) / run.records * 1e6
    print(
        f"{args.query}: {run.rows_per_s:,.0f} rows/s, {run.batches} batches; recording {recording}"
    )
    print("\n".join(report(summarize(parse(text.splitlines())), jvm_us, args.top)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
