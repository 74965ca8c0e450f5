"""The driver JVM's class-data archive (JDK CDS): Spark's classes mapped at start, not loaded.

A driver JVM loads, parses and verifies ~11,000 classes from Spark's jars before its first
batch is done, most of them while the session starts and the first query plans. A dynamic
CDS archive (``-XX:ArchiveClassesAtExit``, JDK 13+) records the classes one run loaded, ready
to use; a JVM started with ``-XX:SharedArchiveFile`` maps them instead. ``make setup`` runs
``python -m app.jvm_archive``, which makes one by a short training run: a session with the
app's settings and a streaming query of the app's shape (a stateful Python function, a
``foreachBatch``). The session started in 3.3-3.7 s instead of 5.4-7.2 and its first Python
job took 2.4-2.5 s instead of 3.6-4.4 (docs/benchmarks.md, "Changes that paid").

A JVM whose JDK or class path differs from the training run's would ignore the archive (with
a warning): the archive is named by a key of the JDK and of Spark's jars, and the option is
given only when the archive of this JDK and this PySpark exists. Where Spark is not this
Python's pip-installed PySpark (a cluster's Spark), there is no archive and nothing changes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ARCHIVE_DIR = PROJECT_ROOT / "build" / "jvm-cds"
#: How long the training run may take, and its JVM to write the archive once Python is gone.
TRAIN_TIMEOUT_S = 300.0
DUMP_TIMEOUT_S = 120.0


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher starts (``JAVA_HOME`` first, as ``spark-class`` does)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).is_file():
        return None
    return Path(found).resolve()


def spark_jars_dir() -> Path | None:
    """The jars of this Python's pip-installed PySpark (located without importing it)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    return jars if jars.is_dir() else None


def archive_key(java: Path | None = None, jars: Path | None = None) -> str | None:
    """A name for the JDK and Spark jars an archive is valid for; ``None`` without either.

    By file sizes and times, not contents: reading ~400 MB of jars would cost more than the
    archive saves. A JDK or PySpark installed anew gets a new key, hence a new archive.
    """
    java = java or java_binary()
    jars = jars or spark_jars_dir()
    if java is None or jars is None:
        return None
    digest = hashlib.sha256()
    for path in (java, *sorted(jars.glob("*.jar"))):
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def archive_path(key: str | None = None) -> Path | None:
    """Where the archive of this JDK and PySpark is (or would be)."""
    key = key or archive_key()
    return ARCHIVE_DIR / f"spark-{key}.jsa" if key else None


def archive_option() -> str:
    """``-XX:SharedArchiveFile=...`` when this JDK's and PySpark's archive exists, else ``""``."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path is not None and path.is_file() else ""


def with_archive(options: str) -> str:
    """Driver JVM options plus the archive's, when there is one."""
    return f"{options} {archive_option()}".strip()


def create(*, force: bool = False) -> Path | None:
    """Make the archive of this JDK and PySpark unless it exists; returns its path.

    The training run is a child process: the JVM writes the archive as it exits, which is
    after its Python driver has gone. Other keys' archives (an earlier JDK or PySpark) are
    removed; a failed training leaves no file and says why.
    """
    path = archive_path()
    if path is None:
        print("app.jvm_archive: no java or no pip-installed PySpark; no archive", file=sys.stderr)
        return None
    if path.is_file() and not force:
        return path
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".partial-{os.getpid()}")
    started = time.monotonic()
    print(f"app.jvm_archive: training the driver JVM's class archive ({path.name}) ...")
    done = subprocess.run(  # noqa: S603 - this Python, this module, our own path
        [sys.executable, "-m", "app.jvm_archive", "train", str(partial)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=TRAIN_TIMEOUT_S,
        check=False,
    )
    pid = _jvm_pid(done.stdout)
    if done.returncode != 0 or pid is None:
        partial.unlink(missing_ok=True)
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        msg = f"app.jvm_archive: the training run failed (exit {done.returncode}):\n{tail}"
        raise RuntimeError(msg)
    _wait_gone(pid, DUMP_TIMEOUT_S)
    if not partial.is_file() or partial.stat().st_size == 0:
        msg = f"app.jvm_archive: the training JVM (pid {pid}) wrote no archive to {partial}"
        raise RuntimeError(msg)
    partial.replace(path)
    for old in ARCHIVE_DIR.glob("spark-*.jsa"):
        if old != path:
            old.unlink(missing_ok=True)
    size_mb = path.stat().st_size / 1e6
    print(f"app.jvm_archive: {path} ({size_mb:.0f} MB, {time.monotonic() - started:.0f} s)")
    return path


def train(target: Path) -> None:
    """The training run: the app's session and a query of its shape, two batches.

    Prints the JVM's pid for :func:`create`, which waits for that JVM to write the archive.
    """
    from pyspark.sql import SparkSession

    from app.session import (
        BASE_CONF,
        DAEMON_CONF,
        DRIVER_JAVA_OPTIONS,
        LOCAL_CHECKPOINT_CONF,
        project_on_pythonpath,
    )

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    project_on_pythonpath()
    # No Kafka connector (spark.jars): the training query reads no Kafka, and the archive is
    # of the JVM's class path, which spark.jars does not change.
    conf = {
        **BASE_CONF,
        **LOCAL_CHECKPOINT_CONF,
        **DAEMON_CONF,
        "spark.driver.extraJavaOptions": f"{DRIVER_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={target}",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.python.worker.reuse": "true",
    }
    builder = SparkSession.builder.master("local[2]").appName("jvm-archive-training")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    print(f"jvm pid {int(jvm.java.lang.ProcessHandle.current().pid())}", flush=True)
    # The session stops before its checkpoint goes: the state store's maintenance thread may
    # still write there after the query stops, and removing the folder under it failed the
    # training (and with it make setup) once (12-08: "Directory not empty: '0'").
    with tempfile.TemporaryDirectory(prefix="jvm-archive-", ignore_cleanup_errors=True) as work:
        _train_query(spark, work)
        spark.stop()


def _train_query(spark: object, work: str) -> None:
    from collections.abc import Iterator

    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

    assert isinstance(spark, SparkSession)

    def count(
        key: tuple[int], chunks: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        seen = sum(len(c) for c in chunks) + (state.get[0] if state.exists else 0)
        state.update((seen,))
        yield pd.DataFrame({"slot": [key[0]], "seen": [seen]})

    def write(df: DataFrame, _batch_id: int) -> None:
        df.groupBy("slot").count().collect()

    events = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 2000)
        .option("numPartitions", 2)
        .load()
        .selectExpr(
            "cast(value % 4 as int) as slot", "cast(cast(value as string) as binary) as value"
        )
    )
    query = (
        events.groupBy("slot")
        .applyInPandasWithState(
            count, "slot int, seen long", "seen long", "Append", GroupStateTimeout.NoTimeout
        )
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(Path(work) / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    deadline = time.monotonic() + TRAIN_TIMEOUT_S / 2
    while len(query.recentProgress) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()


def _jvm_pid(stdout: str) -> int | None:
    for line in stdout.splitlines():
        if line.startswith("jvm pid "):
            return int(line.split()[-1])
    return None


def _wait_gone(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    """``create`` (default; ``--force`` makes it anew), ``option``, or ``train PATH``."""
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "create"
    if command == "option":
        print(archive_option())
        return 0
    if command == "train" and len(args) == 2:
        train(Path(args[1]))
        return 0
    if command == "create":
        create(force="--force" in args)
        return 0
    print(
        "usage: python -m app.jvm_archive [create [--force] | option | train PATH]", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
