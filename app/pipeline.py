"""Builds and runs the streaming query: source -> assembler -> dead letters -> sink.

The order of guarantees, written once:

1. Spark plans a micro-batch (offset ranges) and writes it to the checkpoint's offset log.
2. The assembler turns the batch's records into complete transactions (state in the state
   store, versioned per batch).
3. ``BatchWriter`` hands the batch to the sink, which makes it visible in ONE sink
   transaction labelled by (query id, batch id): all of it or nothing.
4. Spark records the batch as done in the commit log.

A crash between 3 and 4 makes Spark replay the batch with the same offsets, the same state
and the same batch timestamp, hence the same rows; the sink finds its label committed, loads
nothing and still reads the batch through (Spark commits the state stores only of a batch that
was read). Nothing else commits Kafka offsets.

With commit behind (``sink.commit-behind``), 3 ends once the batch is loaded and its label
noted, and the commit runs during 4 and the next batch's planning; a batch whose commit was
lost after 4 is replayed by rewinding the checkpoint at the next start (``app/commit_behind.py``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

from app.assembly import assemble_debezium, assemble_per_partition, assemble_transactions
from app.batch_count import BatchCounter, batch_stats
from app.checkpoint_files import CheckpointFiles
from app.commit_behind import CheckpointNote, recover
from app.config import AppConfig, DeadLetterSettings
from app.progress import BatchStats, ProgressListener, ProgressReporter
from app.state_layout import plan_layout, session_state_partitions
from app.task_load import LoadInTask
from app.txn_limits import BatchLimits, TxnLimits, batch_limits, plan_limits
from assembler.output import KIND_REJECT, KIND_ROW, KIND_STATUS
from sinks.base import Tally, TargetStats, count_batch
from sinks.starrocks.filtered_rows import VIOLATION
from sinks.starrocks.fit import fit_bytes, fit_payload_col

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

# Spark's batch-execution thread carries the (checkpoint-persistent) query id as a local
# property; foreachBatch runs on that thread's Python callback.
QUERY_ID_PROPERTY = "sql.streaming.queryId"


class BatchSink(Protocol):
    """What the pipeline needs of a sink (see ``sinks.base.Sink``)."""

    def write_batch(
        self,
        batch_df: DataFrame,
        batch_id: int,
        stats: Sequence[TargetStats] | None = None,
        tally: Tally | None = None,
    ) -> Any:
        """Make the batch visible exactly once; idempotent per (query id, batch id)."""


def read_events(spark: SparkSession, config: AppConfig) -> DataFrame:
    """The Kafka source, with the connector's schema."""
    from app.source import read_kafka_stream

    return read_kafka_stream(spark, config.source.reader_options(), config.source.max_read_tasks)


def to_sink_rows(assembled: DataFrame, config: AppConfig) -> DataFrame:
    """Route REJECT rows to the dead-letter table when that is the destination.

    The dead-letter rows then travel in the same sink transaction as the good rows of the
    batch, so a rejection is recorded exactly once and atomically with the batch.
    """
    if config.dead_letter.destination != "table":
        return assembled
    reject = F.col("kind") == F.lit(KIND_REJECT)
    # A rejected DATA event keeps its target and op with the row image (app/task_load.py).
    data = F.when(
        F.col("database").isNotNull() & F.col("table").isNotNull(),
        F.to_json(F.struct("database", "table", "op", "row")),
    ).otherwise(F.col("row"))
    data, reason = fit_payload_col(data, F.col("reason"))
    payload = F.to_json(
        F.struct(
            F.col("topic").alias("topic"),
            F.col("partition").alias("kafka_partition"),
            F.col("first_offset").alias("first_offset"),
            F.col("row_seq").alias("row_seq"),
            F.lit(config.pipeline.name).alias("pipeline"),
            fit_bytes(F.col("txn_id"), 255).alias("txn_id"),
            F.col("last_offset").alias("last_offset"),
            fit_bytes(reason, 1024).alias("reason"),
            data.alias("payload"),
            F.col("source_ts_ms").alias("source_ts_ms"),
        )
    )
    return assembled.select(
        *[
            c
            for c in assembled.columns
            if c not in ("database", "table", "op", "row", "txn_seq", "row_seq")
        ],
        F.when(reject, F.lit(config.starrocks.database))
        .otherwise(F.col("database"))
        .alias("database"),
        F.when(reject, F.lit(config.starrocks.dead_letter_table))
        .otherwise(F.col("table"))
        .alias("table"),
        F.when(reject, F.lit("UPSERT")).otherwise(F.col("op")).alias("op"),
        F.when(reject, payload).otherwise(F.col("row")).alias("row"),
        F.coalesce(F.col("txn_seq"), F.lit(-1).cast("bigint")).alias("txn_seq"),
        F.col("row_seq"),
    )


class BatchWriter:
    """The ``foreachBatch`` function: dead letters, then the sink, then stats.

    Runs on the driver. Where the sink counts in its load (``Sink.counts_in_load``) and the
    dead letters go to it, one Spark job per batch computes the assembler's output, loads it
    and counts it (:class:`app.batch_count.BatchCounter`). Otherwise, with dead letters in
    files or ``pipeline.idle-batches`` (an empty batch must then open no sink transaction),
    the batch is persisted, counted by a job of its own, then written, so that the stateful
    assembler runs once per batch however many actions follow.
    """

    def __init__(
        self,
        sink: BatchSink,
        config: AppConfig,
        reporter: ProgressReporter,
        limits: BatchLimits | None = None,
    ) -> None:
        self._sink = sink
        self._config = config
        self._reporter = reporter
        self._limits = limits

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """Write one micro-batch (Spark calls this on the driver, once or again on replay)."""
        if self._limits is None:
            self._write(batch_df, batch_id)
            return
        # The batch's assembling tasks apply the limits it first ran with (app/txn_limits.py).
        sc = batch_df.sparkSession.sparkContext
        with batch_limits(sc, self._limits.for_batch(batch_id)):
            self._write(batch_df, batch_id)

    def _write(self, batch_df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        config = self._config
        counter = _counter(config)
        if one_job_per_batch(self._sink, config):
            result = self._sink.write_batch(batch_df, batch_id, tally=counter)
            stats, _ = batch_stats(result.tally_rows, batch_id, dead_letters_to_sink=True)
            stats.sink_ms = (time.monotonic() - started) * 1000  # the call is the batch
        else:
            stats, result = self._count_then_write(batch_df, batch_id, counter)
        stats.label = getattr(result, "label", None)
        stats.skipped = bool(getattr(result, "skipped", False))
        stats.outcome = str(getattr(result, "outcome", "committed"))
        stats.attempt = int(getattr(result, "attempt", 0))
        _count_filtered(stats, result)
        # An empty batch (pipeline.idle-batches) says nothing at INFO: one a second, all day.
        empty = stats.rows == 0 and stats.rejected_records == 0 and stats.label is None
        log.log(
            logging.DEBUG if empty else logging.INFO,
            "batch done batch_id=%s rows=%s txns=%s rejected_records=%s label=%s "
            "sink_ms=%.0f total_ms=%.0f skipped=%s",
            batch_id,
            stats.rows,
            stats.transactions,
            stats.rejected_records,
            stats.label,
            stats.sink_ms,
            (time.monotonic() - started) * 1000,
            stats.skipped,
        )
        self._reporter.record(stats)

    def _count_then_write(
        self, batch_df: DataFrame, batch_id: int, counter: BatchCounter
    ) -> tuple[BatchStats, Any]:
        """Two jobs: the persisted batch is counted (and its dead letters filed), then written."""
        df = batch_df.persist()
        try:
            stats, targets = batch_stats(
                count_batch(df, counter),
                batch_id,
                dead_letters_to_sink=counter.dead_letters_to_sink,
            )
            if not counter.dead_letters_to_sink:
                _write_dead_letter_file(df, batch_id, self._config.dead_letter, self._config)
                df = df.filter(F.col("kind") == F.lit(KIND_ROW))
            else:
                df = df.filter(F.col("kind") != F.lit(KIND_STATUS))  # counted, never loaded
            sink_started = time.monotonic()
            result = self._sink.write_batch(df, batch_id, targets)
            stats.sink_ms = (time.monotonic() - sink_started) * 1000
        finally:
            batch_df.unpersist()
        return stats, result


def _count_filtered(stats: BatchStats, result: object) -> None:
    """Transactions the sink dead-lettered for rows StarRocks filters (sink.filtered-rows)."""
    txns = int(getattr(result, "filtered_txns", 0))
    rows = int(getattr(result, "filtered_rows", 0))
    if not txns:
        return
    stats.rows -= rows
    stats.transactions -= txns
    stats.rejected_records += rows
    stats.rejected_transactions += txns
    stats.rejects_by_reason[VIOLATION] = stats.rejects_by_reason.get(VIOLATION, 0) + rows


def _write_dead_letter_file(
    df: DataFrame, batch_id: int, settings: DeadLetterSettings, config: AppConfig
) -> None:
    """One JSON-lines file per batch, written atomically (rename), rewritten on replay.

    In a folder per streaming query id: a new checkpoint numbers its batches from 0 again,
    and must not overwrite the dead letters of the one before.
    """
    rejects = df.filter(F.col("kind") == F.lit(KIND_REJECT)).toLocalIterator()
    folder = Path(settings.path) / config.pipeline.name / query_id_of(df.sparkSession)
    folder.mkdir(parents=True, exist_ok=True)
    entries = (
        {**row.asDict(), "pipeline": config.pipeline.name, "batch_id": batch_id} for row in rejects
    )
    write_lines_durably(
        folder / f"batch-{batch_id:012d}.jsonl",
        (json.dumps(entry, default=str) + "\n" for entry in entries),
    )


def write_lines_durably(target: Path, lines: Iterable[str]) -> int:
    """Write ``lines`` to ``target`` atomically and on disk before returning; how many.

    Spark records the batch once this returns, and never replays it: a file still in the page
    cache when the machine stops would lose the batch's dead letters. So the file is synced
    before its rename and the folder after it. No lines, no file.
    """
    tmp = target.with_suffix(".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as out:
        for line in lines:
            out.write(line)
            count += 1
        out.flush()
        os.fsync(out.fileno())
    if not count:
        tmp.unlink()
        return 0
    os.replace(tmp, target)
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return count


def task_load(sink: BatchSink, config: AppConfig) -> LoadInTask | None:
    """The assembling tasks' loader, where the sink has one and every batch takes one job.

    Not with dead letters in files nor with ``pipeline.idle-batches``: both need the
    assembler's rows on the driver's side first (:meth:`BatchWriter._count_then_write`).
    """
    task_loader = getattr(sink, "task_loader", None)
    if task_loader is None or not one_job_per_batch(sink, config):
        return None
    loader = task_loader()
    if loader is None:
        return None
    log.info("assembling tasks load their rows (starrocks.sink.load-in-task)")
    return LoadInTask(
        loader,
        _counter(config),
        config.pipeline.name,
        config.starrocks.database,
        config.starrocks.dead_letter_table,
    )


def one_job_per_batch(sink: BatchSink, config: AppConfig) -> bool:
    """Whether the sink's load job counts each batch (one Spark job, nothing cached).

    Not with dead letters in files nor with ``pipeline.idle-batches``: the batch is counted
    first (:meth:`BatchWriter._count_then_write`).
    """
    return bool(getattr(sink, "counts_in_load", False)) and not (
        config.dead_letter.destination == "file" or config.pipeline.idle_batches
    )


def _counter(config: AppConfig) -> BatchCounter:
    return BatchCounter(
        dead_letters_to_sink=config.dead_letter.destination != "file",
        source_times=config.pipeline.metrics_port > 0,
    )


def query_id_of(spark: SparkSession) -> str:
    """The persistent query id, read on the foreachBatch thread (see QUERY_ID_PROPERTY)."""
    value = spark.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    if not value:
        msg = "no streaming query id on this thread: write_batch must run inside foreachBatch"
        raise RuntimeError(msg)
    return str(value)


# Listeners this process added (driver): removed before the driver exits, or the JVM posts
# the query's last events to a Python side that is gone (a Java stack in the log).
_LISTENERS: list[ProgressListener] = []


def detach_listeners(spark: SparkSession) -> None:
    """Remove the progress listeners ``start_query`` added (call once the query ended)."""
    while _LISTENERS:
        spark.streams.removeListener(_LISTENERS.pop())


def start_query(
    spark: SparkSession,
    config: AppConfig,
    sink: BatchSink,
    reporter: ProgressReporter,
    events: DataFrame | None = None,
) -> StreamingQuery:
    """Wire source, assembler and sink and start the streaming query."""
    listener = ProgressListener(reporter, config.pipeline.name)
    spark.streams.addListener(listener)
    _LISTENERS.append(listener)
    source = events if events is not None else read_events(spark, config)
    files = CheckpointFiles(spark, config.pipeline.checkpoint_location)
    stop = getattr(sink, "stop_commit_behind", None)
    if stop is not None:
        # A commit still in flight, then an earlier run's: recovering may rewind the
        # checkpoint (app/commit_behind.py).
        stop()
        recover(CheckpointNote(files), files, sink)  # type: ignore[arg-type]
    core = config.source.debezium.core if config.source.debezium is not None else config.assembler
    limits = plan_limits(files, TxnLimits.of(core), config.pipeline.checkpoint_location)
    if config.source.debezium is not None:
        # Data topics + the transaction topic, assembled per source (docs/debezium.md).
        load = task_load(sink, config)
        assembled = assemble_debezium(source, config.source.debezium, load)
    else:
        layout = plan_layout(
            spark,
            config.pipeline.checkpoint_location,
            session_state_partitions(spark),
            config.pipeline.idle_batches,
        )
        if layout.slots is not None:
            load = task_load(sink, config)
            assembled = assemble_transactions(
                source, config.assembler, layout.slots, layout.timeouts, load
            )
        else:
            # A group per Kafka partition, several per task: loading there would send each
            # group's rows in requests of their own. The load job gathers them by table.
            load = None
            assembled = assemble_per_partition(source, config.assembler)
    arm = getattr(sink, "commit_behind", None)
    if load is not None and arm is not None and arm(CheckpointNote(files)):
        log.info("each batch commits while Spark starts the next (starrocks.sink.commit-behind)")
    # Tasks that load what they assemble map their dead letters themselves.
    rows = assembled if load is not None else to_sink_rows(assembled, config)
    writer = (
        rows.writeStream.queryName(config.pipeline.name)
        .foreachBatch(BatchWriter(sink, config, reporter, limits))
        .option("checkpointLocation", config.pipeline.checkpoint_location)
        .outputMode("append")
    )
    # One sink transaction per micro-batch: the trigger interval is the commit interval.
    # (No availableNow mode: with processing-time timeouts Spark always asks for another
    # batch, so such a query would never end.)
    writer = writer.trigger(processingTime=f"{config.pipeline.trigger_interval_ms} milliseconds")
    return writer.start()
