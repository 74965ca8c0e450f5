"""In-process Spark queries of the benchmark: the pipeline and its ceilings, one SparkSession.

Every query here runs in the same warm local[2] session on the same data, so the ratios
pipeline / ceiling compare like with like:

* ``source_only``: Kafka source (Spark's connector) -> noop sink;
* ``bare_stateful``: source -> ``applyInPandasWithState`` with a trivial function -> noop;
* ``source_assembler``: source -> the real assembler (``app.assembly``) -> noop;
* ``passthrough``: source -> decode -> plain Stream Load per batch (no assembly, no
  exactly-once protocol, no shuffle) -> emulator;
* ``pipeline``: ``app.pipeline.start_query`` with the real StarRocks sink (exactly what
  ``app/main.py`` runs, minus the process around it);
* ``assembler_files_*``: a parquet file stream of the same records (no Kafka) into the real
  assembler or the trivial function (the assembler alone, issue 2).

Rates count committed DATA rows: records/s times the data set's rows-per-record.

Kafka is read through Spark's own connector (``spark-sql-kafka-0-10``, the jars
``devstack.jars`` points ``spark.jars`` at), as the application reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd

from app.memory import KAFKA_FETCH_BYTES, held_poll_records
from app.source import CONSUMER_DEFAULTS, FORMAT, POLL_RECORDS_KEY, poll_records, read_kafka_stream
from benchmarks.procstat import cpu_by_role, cpu_delta, jvm_cpu_by_thread, jvm_threads
from benchmarks.workload import DATABASE, TABLE, Produced, Shape

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.state import GroupState

    from devstack.stack import LocalStack

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The source measured: Spark's Kafka connector (``source.format`` of ``conf/local.yaml``).
SOURCE = FORMAT
#: Where measured queries keep their checkpoints (``benchmarks.run`` points it at its work dir).
CHECKPOINT_ROOT: str | None = None

T = TypeVar("T")

#: The benchmark session's heap: Spark's default ``spark.driver.memory`` (:func:`make_session`).
BENCH_HEAP = 2**30


#: How long a stopped query's Kafka consumers stay cached in the benchmark session, and how
#: often Spark's evictor looks (:func:`spark_conf`).
CONSUMER_CACHE_TIMEOUT_S = 3
CONSUMER_EVICTOR_S = 1


def wait_for_idle_consumers() -> None:
    """Sleep until the queries that ran before have no Kafka consumer left in the cache.

    Spark's pool walks every cached consumer on each borrow: a 64-partition query started
    right after another one's 64 consumers pays for them until the evictor drops them.
    """
    time.sleep(CONSUMER_CACHE_TIMEOUT_S + 2 * CONSUMER_EVICTOR_S)


def spark_conf() -> dict[str, str]:
    """The application's base settings (``app.session.BASE_CONF``) plus test-session ones."""
    from app.jvm_archive import with_archive
    from app.session import BASE_CONF, DAEMON_CONF, DRIVER_JAVA_OPTIONS, LOCAL_CHECKPOINT_CONF
    from devstack.jars import spark_jars_conf

    # Local checkpoints and local[2] workers of this venv, as app.session chooses for them.
    conf = {**BASE_CONF, **LOCAL_CHECKPOINT_CONF, **DAEMON_CONF}
    conf.update(
        {
            # The driver JVM's class archive, as app.session gives a local master.
            "spark.driver.extraJavaOptions": with_archive(DRIVER_JAVA_OPTIONS),
            "spark.sql.shuffle.partitions": "2",  # = pipeline.state-partitions in local.yaml
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.streaming.stopTimeout": "30s",
            "spark.python.worker.reuse": "true",
            # The queries measured here share one Kafka consumer cache, and Spark's pool walks
            # every cached consumer on each borrow (~3 µs each): a stopped query's 64 idle
            # consumers cost each later 64-partition query ~12 ms a batch (docs/benchmarks.md).
            # The app runs one query. Here a stopped query's consumers leave within seconds; a
            # running query's stay, as it borrows them every batch.
            "spark.kafka.consumer.cache.timeout": f"{CONSUMER_CACHE_TIMEOUT_S}s",
            "spark.kafka.consumer.cache.evictorThreadRunInterval": f"{CONSUMER_EVICTOR_S}s",
            # Spark's Kafka connector, resolved by `make setup` (jvm/spark-kafka/pom.xml).
            "spark.jars": spark_jars_conf(),
        }
    )
    return conf


def make_session(conf: dict[str, str] | None = None) -> SparkSession:
    """The benchmark's local[2] session: :func:`spark_conf`, then ``conf`` over it."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("cdc-bench")
    for key, value in {**spark_conf(), **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass
class QueryRun:
    """One measured streaming query."""

    name: str
    records: int
    rows: int
    wall_s: float
    batch_s: float
    batches: int
    cpu_s: float
    row_bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        """Committed rows per second of batch time (query start/planning excluded)."""
        return self.rows / self.batch_s if self.batch_s else 0.0

    @property
    def wall_rows_per_s(self) -> float:
        return self.rows / self.wall_s if self.wall_s else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.row_bytes / 1e6 / self.batch_s if self.batch_s else 0.0

    @property
    def rows_per_cpu_s(self) -> float:
        return self.rows / self.cpu_s if self.cpu_s else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "records": self.records,
            "rows": self.rows,
            "wall_s": round(self.wall_s, 3),
            "batch_s": round(self.batch_s, 3),
            "batches": self.batches,
            "cpu_s": round(self.cpu_s, 2),
            "rows_per_s": round(self.rows_per_s, 1),
            "wall_rows_per_s": round(self.wall_rows_per_s, 1),
            "mb_per_s": round(self.mb_per_s, 3),
            "rows_per_cpu_s": round(self.rows_per_cpu_s, 1),
            **self.extra,
        }


def jvm_collections() -> dict[str, tuple[int, int]]:
    """The driver JVM's collectors: name -> (collections, ms) since it started; {} without one.

    On a local master the driver's JVM runs the tasks, so this is the whole query's.
    """
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        return {}
    beans = sc._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    return {
        str(bean.getName()): (int(bean.getCollectionCount()), int(bean.getCollectionTime()))
        for bean in beans
    }


def collections_between(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> dict[str, dict[str, int]]:
    """What each collector did between two :func:`jvm_collections`: ``{name: {count, ms}}``."""
    return {
        name: {"count": count - before.get(name, (0, 0))[0], "ms": ms - before.get(name, (0, 0))[1]}
        for name, (count, ms) in after.items()
    }


def full_collections(gc: dict[str, dict[str, int]]) -> tuple[int, int]:
    """(collections, ms) of the old generation's collectors in :func:`collections_between`.

    The parallel collector's ``PS MarkSweep`` (every one a full, stop-the-world collection),
    G1's ``G1 Old Generation``; not young or concurrent ones.
    """
    old = [v for name, v in gc.items() if "MarkSweep" in name or "Old Generation" in name]
    return sum(v["count"] for v in old), sum(v["ms"] for v in old)


def measure(
    name: str,
    start: Callable[[str], StreamingQuery],
    *,
    records: int,
    rows: int,
    row_bytes: int,
    timeout_s: float = 900,
    keep_last: bool = False,
    settle: Callable[[], float | None] | None = None,
) -> QueryRun:
    """Run a query (``start(checkpoint)``) until it has read ``records`` records, then stop it.

    Queries run with a processing-time trigger of 0 (batches back to back), not availableNow:
    with ``GroupStateTimeout.ProcessingTimeTimeout`` (the assembler) Spark always plans another
    (empty) batch, so an availableNow query never ends. Progress is collected by batch id while
    the query runs (``recentProgress`` keeps only the last 100): from ``lastProgress``, and
    from ``recentProgress`` only when a batch was missed. PySpark reads ``recentProgress``
    with two Py4J round trips per batch kept; polled every 50 ms, that is thousands of round
    trips a second, CPU taken from the query measured.

    ``settle`` waits for work the query's last batch left running (the sink's commit behind)
    and returns when it ended (epoch seconds): time past the last batch's end counts as the
    query's, so that a commit behind is measured, not left out.
    """
    seen: dict[int, dict[str, Any]] = {}
    # Not a TemporaryDirectory: tasks of a stopped query may still touch it for a moment.
    checkpoint = tempfile.mkdtemp(prefix=f"ckpt-{name}-", dir=CHECKPOINT_ROOT)
    me = os.getpid()
    threads0 = jvm_threads(me)
    cpu0 = cpu_by_role(me, driver=me)
    gc0 = jvm_collections()
    t0 = time.time()
    query = start(checkpoint)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            _collect_progress(query, seen)
            if sum(p["numInputRows"] for p in seen.values()) >= records:
                break
            if not query.isActive:
                error = query.exception()
                raise RuntimeError(f"{name}: query ended early: {error}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: not done after {timeout_s:.0f} s")
            time.sleep(0.05)
        settle = settle or getattr(start, "settle", None)
        settled_at = settle() if settle is not None else None
        # Before the stop, while the query's stream execution thread is alive to be read.
        threads = jvm_threads(me)
        by_role = cpu_delta(cpu0, cpu_by_role(me, driver=me))
        by_thread = jvm_cpu_by_thread(threads0, threads, by_role.get("jvm", 0.0))
        gc = collections_between(gc0, jvm_collections())
    finally:
        query.stop()
        drop_listeners()
    with_data = [p for p in seen.values() if p["numInputRows"] > 0]
    n_records = sum(p["numInputRows"] for p in with_data)
    if n_records != records:
        raise RuntimeError(f"{name}: read {n_records} records, expected {records}")
    batch_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in with_data)
    last_end = max(
        _epoch(p["timestamp"]) + p["durationMs"].get("triggerExecution", 0) / 1000
        for p in with_data
    )
    tail_ms = max(0.0, (settled_at - last_end) * 1000) if settled_at else 0.0
    batch_ms += tail_ms
    last_end += tail_ms / 1000
    in_order = sorted(with_data, key=lambda p: int(p["batchId"]))
    extra: dict[str, Any] = {
        "durations_ms": [dict(p["durationMs"]) for p in in_order],
        "batch_records": [int(p["numInputRows"]) for p in in_order],
        # Where the CPU went (benchmarks.procstat.classify roles; this process is the driver).
        "cpu_s_by_role": {role: round(cpu_s, 3) for role, cpu_s in sorted(by_role.items())},
        # The Spark JVM's by thread (procstat.JVM_THREAD_KINDS): tasks, the query's driver
        # thread, the JIT compilers (a fresh JVM compiles for minutes), the collector.
        "jvm_cpu_s_by_thread": {kind: round(s, 3) for kind, s in sorted(by_thread.items())},
        "settle_ms": round(tail_ms, 1),
        # The driver JVM's collectors over the query (with its first batches): a full
        # collection stops both cores for ~0.2-0.3 s (docs/benchmarks.md, "Target 6: the
        # consumers' held records").
        "gc": gc,
    }
    # Batches after the first (warm: consumers, Python workers and plans exist): the rate a
    # running pipeline keeps, without the first batch's one-off start.
    warm = without_short_last(in_order[1:], lambda p: int(p["numInputRows"]))
    warm_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in warm)
    if warm and warm[-1] is in_order[-1]:
        warm_ms += tail_ms
    if warm and warm_ms:
        warm_rows = rows * sum(p["numInputRows"] for p in warm) / n_records
        extra["warm_batches"] = len(warm)
        extra["warm_rows_per_s"] = round(warm_rows / (warm_ms / 1000), 1)
    if keep_last:
        last = max(with_data, key=lambda p: int(p["batchId"]))
        ops = last.get("stateOperators") or []
        extra["state"] = dict(ops[0]) if ops else {}
    return QueryRun(
        extra=extra,
        name=name,
        records=n_records,
        rows=rows,
        wall_s=last_end - t0,
        batch_s=batch_ms / 1000,
        batches=len(with_data),
        cpu_s=sum(by_role.values()),
        row_bytes=row_bytes,
    )


def without_short_last(batches: list[T], records: Callable[[T], int]) -> list[T]:
    """``batches`` without a last one of less than half a full one.

    That batch is what the rate limit left over at the end of the pre-filled data (Spark
    rounds each partition's share): a batch's fixed cost for a few rows that a running
    pipeline does not pay; with many partitions it is there more often than not.
    """
    full = max((records(b) for b in batches), default=0)
    if len(batches) > 1 and records(batches[-1]) * 2 < full:
        return batches[:-1]
    return batches


# Listeners the pipeline registered (app.pipeline.start_query adds a ProgressListener to the
# session; it outlives its query and would see every later query's progress in this shared
# session), removed when the query is done.
_LISTENERS: list[tuple[Any, Any]] = []


@contextmanager
def _capture_listeners(spark: SparkSession) -> Iterator[None]:
    from pyspark.sql.streaming.query import StreamingQueryManager

    original = StreamingQueryManager.addListener

    def add(self: Any, listener: Any) -> None:
        _LISTENERS.append((spark, listener))
        original(self, listener)

    StreamingQueryManager.addListener = add  # type: ignore[method-assign]
    try:
        yield
    finally:
        StreamingQueryManager.addListener = original  # type: ignore[method-assign]


def drop_listeners() -> None:
    """Remove the listeners that pipeline queries of this harness registered."""
    while _LISTENERS:
        spark, listener = _LISTENERS.pop()
        spark.streams.removeListener(listener)


def _as_dict(progress: Any) -> dict[str, Any]:
    """PySpark 4 returns progress objects (dict-like); keep plain JSON dicts."""
    if isinstance(progress, dict):
        return progress
    out: dict[str, Any] = json.loads(progress.json)
    return out


def _collect_progress(query: StreamingQuery, seen: dict[int, dict[str, Any]]) -> None:
    """Add the query's new progress to ``seen`` (by batch id)."""
    last = query.lastProgress
    if last is None:
        return
    batch_id = int(last["batchId"])
    if batch_id in seen:
        return
    if batch_id - 1 in seen:
        seen[batch_id] = _as_dict(last)
        return
    for p in query.recentProgress:  # the first look, or a batch missed since the last one
        seen.setdefault(int(p["batchId"]), _as_dict(p))


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def source_options(bootstrap: str, topic: str, max_offsets: int) -> dict[str, str]:
    # The app's own consumer defaults (app/source.py), its poll size as app/main.py sizes it.
    from devstack.kafka import topic_partitions

    partitions = topic_partitions(bootstrap, topic)
    share = poll_records(max_offsets, partitions)
    polls = held_poll_records(share, BENCH_HEAP, 1, partitions, KAFKA_FETCH_BYTES)
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": str(max_offsets),
        "failOnDataLoss": "true",
        **CONSUMER_DEFAULTS,
        POLL_RECORDS_KEY: str(polls),
    }


def kafka_stream(spark: SparkSession, bootstrap: str, topic: str, max_offsets: int) -> DataFrame:
    """The topic as a streaming DataFrame through Spark's Kafka connector.

    The same reader ``app.pipeline`` builds for ``source.format: kafka`` (the connector's
    ``kafka`` format with the connector's own option names, reads merged as the app merges
    them), so the ceilings read as the pipeline reads.
    """
    return read_kafka_stream(spark, source_options(bootstrap, topic, max_offsets))


# -- trivial stateful function -----------------------------------------------------------------

TRIVIAL_OUT = "topic string, partition int, n long"
TRIVIAL_STATE = "n long"


def trivial_group(
    key: tuple[Any, ...], chunks: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    """The bare ``applyInPandasWithState`` cost: count the rows, keep a counter as state."""
    n = _count(chunks, state)
    yield pd.DataFrame({"topic": [key[0]], "partition": [int(key[1])], "n": [n]})


def _count(chunks: Iterator[pd.DataFrame], state: GroupState) -> int:
    """The group's rows in this batch, added to the counter its state keeps."""
    n = sum(len(chunk) for chunk in chunks)
    state.update(((int(state.get[0]) if state.exists else 0) + n,))
    return n


def trivial_stateful(events: DataFrame) -> DataFrame:
    from pyspark.sql.streaming.state import GroupStateTimeout

    from app.assembly import SOURCE_COLUMNS

    return (
        events.select(*SOURCE_COLUMNS)
        .groupBy("topic", "partition")
        .applyInPandasWithState(
            trivial_group,
            outputStructType=TRIVIAL_OUT,
            stateStructType=TRIVIAL_STATE,
            outputMode="append",
            timeoutConf=GroupStateTimeout.NoTimeout,
        )
    )


SLOT_TRIVIAL_OUT = "slot int, n long"


def trivial_slot(
    key: tuple[Any, ...], chunks: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    """:func:`trivial_group` for a group that is a state slot (its key the slot alone)."""
    yield pd.DataFrame({"slot": [int(key[0])], "n": [_count(chunks, state)]})


def trivial_by_slot(events: DataFrame) -> DataFrame:
    """Bare ``applyInPandasWithState`` grouped as the pipeline groups: by state slot.

    The plan the pipeline's assembler runs in (the slot column, the shuffle to the
    session's state partitions, one group per slot), with a function that only counts.
    """
    from pyspark.sql.streaming.state import GroupStateTimeout

    from app.assembly import by_slot
    from app.state_layout import session_state_partitions

    return by_slot(events, session_state_partitions(events.sparkSession)).applyInPandasWithState(
        trivial_slot,
        outputStructType=SLOT_TRIVIAL_OUT,
        stateStructType=TRIVIAL_STATE,
        outputMode="append",
        timeoutConf=GroupStateTimeout.NoTimeout,
    )


def real_assembler(events: DataFrame) -> DataFrame:
    from app.assembly import assemble_transactions
    from assembler.settings import AssemblerSettings

    # As the pipeline assembles on a new checkpoint (pipeline.idle-batches: false).
    return assemble_transactions(events, AssemblerSettings(), timeouts=False)


def to_noop(df: DataFrame, name: str) -> Callable[[str], StreamingQuery]:
    def start(checkpoint: str) -> StreamingQuery:
        return (
            df.writeStream.format("noop")
            .queryName(name)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )

    return start


# -- pass-through: decode + plain stream load, no assembly, no exactly-once ----------------------

PLAIN_REPORT = "rows long, bytes long, requests int"


class DecodeAndLoad:
    """``mapInArrow`` function: decode each record, keep DATA rows, stream-load them plainly.

    One ``PUT /api/{db}/{table}/_stream_load`` (single-request transaction) per chunk of at
    most ``max_bytes``: what a naive at-least-once sink does. Row encoding is the product
    sink's (``sinks.starrocks.loader.encode_row``), so only the protocol and assembly differ.
    """

    def __init__(self, fe_url: str, user: str, password: str, max_bytes: int) -> None:
        self.fe_url, self.user, self.password, self.max_bytes = fe_url, user, password, max_bytes

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import requests

        from assembler.codecs import CodecSettings, make_decoder
        from sinks.starrocks.loader import encode_row

        decoder = make_decoder(CodecSettings(encoding="json"))
        session = requests.Session()
        parts: list[bytes] = []
        size = 2
        rows = nbytes = requests_n = 0

        def flush() -> None:
            nonlocal parts, size, nbytes, requests_n
            if not parts:
                return
            body = b"[" + b",".join(parts) + b"]"
            url = f"{self.fe_url}/api/{DATABASE}/{TABLE}/_stream_load"
            headers = {
                "label": f"plain-{uuid.uuid4().hex}",
                "format": "json",
                "strip_outer_array": "true",
                "Expect": "100-continue",
            }
            auth = (self.user, self.password)
            r = session.put(url, data=body, headers=headers, auth=auth, allow_redirects=False)
            if r.status_code == 307:
                r = session.put(
                    r.headers["Location"], data=body, headers=headers, auth=auth, timeout=300
                )
            out = r.json()
            if out.get("Status") not in ("Success", "OK"):
                raise RuntimeError(f"plain stream load failed: {out}")
            nbytes += len(body)
            requests_n += 1
            parts, size = [], 2

        for batch in batches:
            for value in batch.column("value").to_pylist():
                if value is None:
                    continue
                event = decoder.decode(value)
                if event.type != "DATA":
                    continue
                part = encode_row(event.op, event.row, "bench")
                if size + len(part) + 1 > self.max_bytes:
                    flush()
                parts.append(part)
                size += len(part) + 1
                rows += 1
        flush()
        yield pa.RecordBatch.from_pydict(
            {"rows": [rows], "bytes": [nbytes], "requests": [requests_n]},
            schema=pa.schema(
                [("rows", pa.int64()), ("bytes", pa.int64()), ("requests", pa.int32())]
            ),
        )


def passthrough(
    spark: SparkSession,
    stack: LocalStack,
    topic: str,
    max_offsets: int,
    name: str,
) -> Callable[[str], StreamingQuery]:
    assert stack.emulator is not None
    emu = stack.emulator
    loader = DecodeAndLoad(emu.fe_url, emu.user, emu.password, 64 * 1024 * 1024)

    def write(batch_df: DataFrame, _batch_id: int) -> None:
        batch_df.select("value").mapInArrow(loader, PLAIN_REPORT).collect()

    def start(checkpoint: str) -> StreamingQuery:
        return (
            kafka_stream(spark, stack.bootstrap, topic, max_offsets)
            .writeStream.queryName(name)
            .foreachBatch(write)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )

    return start


# -- the real pipeline, in process -------------------------------------------------------------


def pipeline_config(
    stack: LocalStack, topic: str, checkpoint: str, name: str, extra: list[str]
) -> Any:
    from app.config import load_config
    from app.main import size_polls
    from devstack.kafka import topic_partitions
    from devstack.stack import LOCAL_CONFIG

    overrides = [
        *stack.pipeline_overrides(topic, Path(checkpoint), name),
        f"starrocks.database-name={DATABASE}",
        f"starrocks.table-name={TABLE}",
        "pipeline.progress=quiet",
        *extra,
    ]
    # Sized for the topic as app/main.py sizes it at start.
    config = load_config(str(LOCAL_CONFIG), overrides, {})
    return size_polls(
        config, topic_partitions(stack.bootstrap, topic), BENCH_HEAP, 1, "spark.driver.memory"
    )


def pipeline(
    spark: SparkSession,
    stack: LocalStack,
    topic: str,
    max_offsets: int,
    name: str,
    extra: list[str] | None = None,
) -> Callable[[str], StreamingQuery]:
    """``app.pipeline.start_query`` as ``app/main.py`` wires it (trigger interval 0)."""
    from app.pipeline import query_id_of, start_query
    from app.progress import ProgressReporter
    from sinks.starrocks.sink import StarRocksSink

    sinks: list[StarRocksSink] = []

    def start(checkpoint: str) -> StreamingQuery:
        config = pipeline_config(
            stack,
            topic,
            checkpoint,
            name,
            [
                "starrocks.sink.buffer-flush.interval-ms=0",
                f"source.max-offsets-per-trigger={max_offsets}",
                *(extra or []),
            ],
        )
        sink = StarRocksSink(config.starrocks, query_id_provider=lambda: query_id_of(spark))
        sink.open()
        sinks.append(sink)
        with _capture_listeners(spark):
            return start_query(spark, config, sink, ProgressReporter(enabled=False))

    def settle() -> float | None:
        # The last batch's commit behind is part of the run (measure(settle=...)).
        return sinks.pop().stop_commit_behind() if sinks else None

    start.settle = settle  # type: ignore[attr-defined]
    return start


def start_pipeline_streaming(
    spark: SparkSession,
    stack: LocalStack,
    topic: str,
    checkpoint: str,
    name: str,
    trigger_ms: int,
    max_offsets: int,
) -> StreamingQuery:
    """The pipeline with a processing-time trigger (for the latency runs)."""
    from app.pipeline import query_id_of, start_query
    from app.progress import ProgressReporter
    from sinks.starrocks.sink import StarRocksSink

    config = pipeline_config(
        stack,
        topic,
        checkpoint,
        name,
        [
            f"starrocks.sink.buffer-flush.interval-ms={trigger_ms}",
            f"source.max-offsets-per-trigger={max_offsets}",
        ],
    )
    sink = StarRocksSink(config.starrocks, query_id_provider=lambda: query_id_of(spark))
    sink.open()
    with _capture_listeners(spark):
        return start_query(spark, config, sink, ProgressReporter(enabled=False))


# -- the assembler alone over a parquet file stream (no Kafka) ---------------------------------


def write_parquet_feed(
    folder: Path, topic: str, values_per_partition: dict[int, list[bytes]], per_file: int
) -> int:
    """Files of at most ``per_file`` records, offsets in order per partition; returns files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    cursors = dict.fromkeys(values_per_partition, 0)
    total = sum(len(v) for v in values_per_partition.values())
    files = 0
    ts = int(time.time() * 1_000_000)
    while sum(cursors.values()) < total:
        cols: dict[str, list[Any]] = {
            k: [] for k in ("key", "value", "topic", "partition", "offset", "timestamp", "tt")
        }
        share = max(1, per_file // len(values_per_partition))
        for p, values in values_per_partition.items():
            start = cursors[p]
            for off in range(start, min(len(values), start + share)):
                cols["key"].append(None)
                cols["value"].append(values[off])
                cols["topic"].append(topic)
                cols["partition"].append(p)
                cols["offset"].append(off)
                cols["timestamp"].append(ts)
                cols["tt"].append(0)
            cursors[p] = min(len(values), start + share)
        table = pa.Table.from_arrays(
            [
                pa.array(cols["key"], pa.binary()),
                pa.array(cols["value"], pa.binary()),
                pa.array(cols["topic"], pa.string()),
                pa.array(cols["partition"], pa.int32()),
                pa.array(cols["offset"], pa.int64()),
                pa.array(cols["timestamp"], pa.timestamp("us", tz="UTC")),
                pa.array(cols["tt"], pa.int32()),
            ],
            schema=pa.schema(
                [
                    pa.field("key", pa.binary()),
                    pa.field("value", pa.binary()),
                    pa.field("topic", pa.string()),
                    pa.field("partition", pa.int32()),
                    pa.field("offset", pa.int64()),
                    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
                    pa.field("timestampType", pa.int32()),
                ]
            ),
        )
        pq.write_table(table, folder / f"part-{files:05d}.parquet")
        files += 1
    return files


# The Kafka connector's row schema (without headers): the parquet feed stands in for it.
KAFKA_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)


def parquet_stream(spark: SparkSession, folder: Path) -> DataFrame:
    reader = spark.readStream.schema(KAFKA_SCHEMA_DDL).option("maxFilesPerTrigger", 1)
    return reader.parquet(str(folder))


# -- one query on a pre-filled topic, for the per-batch and JVM profiles ----------------------

#: The queries :class:`Prefilled` starts by name.
QUERIES = ("pipeline", "assembler", "bare", "passthrough", "source")


@dataclass
class Prefilled:
    """A local stack, a topic filled once, a warm session: one query at a time on it."""

    stack: LocalStack
    spark: SparkSession
    topic: str
    produced: Produced
    max_offsets: int

    def query(
        self, name: str, settings: list[str] | None = None
    ) -> Callable[[str], StreamingQuery]:
        """A starter of query ``name`` (:data:`QUERIES`); ``settings``: the pipeline's ``--set``."""
        tag = f"{name[:4]}_{uuid.uuid4().hex[:6]}"
        if name == "pipeline":
            return pipeline(self.spark, self.stack, self.topic, self.max_offsets, tag, settings)
        if name == "passthrough":
            return passthrough(self.spark, self.stack, self.topic, self.max_offsets, tag)
        src = kafka_stream(self.spark, self.stack.bootstrap, self.topic, self.max_offsets)
        if name == "assembler":
            return to_noop(real_assembler(src), tag)
        if name == "bare":
            return to_noop(trivial_stateful(src), tag)
        if name == "source":
            return to_noop(src, tag)
        raise ValueError(f"unknown query {name!r}: one of {', '.join(QUERIES)}")

    def measure(self, name: str, start: Callable[[str], StreamingQuery]) -> QueryRun:
        """:func:`measure` over every record of the topic."""
        p = self.produced
        return measure(name, start, records=p.records, rows=p.rows, row_bytes=p.row_bytes)


@contextmanager
def prefilled(
    shape: Shape, rows: int, max_offsets: int, conf: dict[str, str] | None = None
) -> Iterator[Prefilled]:
    """Start a stack, fill a topic with ``rows`` rows of ``shape``, open a session on it.

    ``conf``: Spark settings over :func:`spark_conf` (e.g. the UI on).
    """
    global CHECKPOINT_ROOT  # where measure() keeps its checkpoints
    from benchmarks.workload import create_tables, prefill
    from devstack.kafka import create_topic
    from devstack.stack import LocalStack

    work = Path(tempfile.mkdtemp(prefix="bench-prefilled-"))
    CHECKPOINT_ROOT = str(work)
    try:
        with LocalStack(work / "stack") as stack:
            create_tables(stack)
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            create_topic(stack.bootstrap, topic, shape.partitions)
            produced = prefill(stack.bootstrap, topic, shape, rows)
            spark = make_session(conf)
            try:
                yield Prefilled(stack, spark, topic, produced, max_offsets)
            finally:
                spark.stop()
    except BaseException:
        print(
            f"benchmark failed; its broker, emulator and checkpoints are in {work}", file=sys.stderr
        )
        raise
    else:
        # The broker's log and the checkpoints, tens of MB a run, nothing reads them after it.
        shutil.rmtree(work, ignore_errors=True)
    finally:
        CHECKPOINT_ROOT = None
