"""Builds and runs the streaming query: source -> assembler -> dead letters -> sink.

The order of guarantees, written once:

1. Spark plans a micro-batch (offset ranges) and writes it to the checkpoint's offset log.
2. The assembler turns the batch's records into complete transactions (state in the state
   store, versioned per batch).
3. ``BatchWriter`` hands the batch to the sink, which makes it visible in ONE sink
   transaction labelled by (query id, batch id): all of it or nothing.
4. Spark records the batch as done in the commit log.

A crash between 3 and 4 makes Spark replay the batch with the same offsets, the same state
and the same batch timestamp, hence the same rows; the sink finds its label committed and
skips it. Nothing else commits Kafka offsets.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

from app.assembly import assemble_debezium, assemble_transactions
from app.config import AppConfig, DeadLetterSettings
from app.progress import BatchStats, ProgressListener, ProgressReporter
from assembler.output import KIND_REJECT, KIND_ROW
from sinks.base import (
    TARGET_STATS_KEYS,
    TargetStats,
    merge_target_stats,
    target_stats_aggregates,
)
from sinks.starrocks.filtered_rows import VIOLATION
from sinks.starrocks.fit import fit_bytes

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
        self, batch_df: DataFrame, batch_id: int, stats: Sequence[TargetStats] | None = None
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
    payload = F.to_json(
        F.struct(
            F.col("topic").alias("topic"),
            F.col("partition").alias("kafka_partition"),
            F.col("first_offset").alias("first_offset"),
            F.col("row_seq").alias("row_seq"),
            F.lit(config.pipeline.name).alias("pipeline"),
            fit_bytes(F.col("txn_id"), 255).alias("txn_id"),
            F.col("last_offset").alias("last_offset"),
            fit_bytes(F.col("reason"), 1024).alias("reason"),
            F.col("row").alias("payload"),
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

    Runs on the driver. The batch DataFrame is persisted for the duration of the call so
    that the stateful assembler runs once per batch, however many actions the sink takes.
    """

    def __init__(self, sink: BatchSink, config: AppConfig, reporter: ProgressReporter) -> None:
        self._sink = sink
        self._config = config
        self._reporter = reporter

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """Write one micro-batch (Spark calls this on the driver, once or again on replay)."""
        started = time.monotonic()
        df = batch_df.persist()
        try:
            to_file = self._config.dead_letter.destination == "file"
            stats, targets = _count(
                df,
                batch_id,
                dead_letters_to_sink=not to_file,
                source_times=self._config.pipeline.metrics_port > 0,
            )
            if to_file:
                _write_dead_letter_file(df, batch_id, self._config.dead_letter, self._config)
                df_out = df.filter(F.col("kind") == F.lit(KIND_ROW))
            else:
                df_out = df
            sink_started = time.monotonic()
            result = self._sink.write_batch(df_out, batch_id, targets)
            stats.sink_ms = (time.monotonic() - sink_started) * 1000
            stats.label = getattr(result, "label", None)
            stats.skipped = bool(getattr(result, "skipped", False))
            stats.outcome = str(getattr(result, "outcome", "committed"))
            stats.attempt = int(getattr(result, "attempt", 0))
            _count_filtered(stats, result)
        finally:
            df.unpersist()
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


def _count(
    df: DataFrame, batch_id: int, *, dead_letters_to_sink: bool, source_times: bool = False
) -> tuple[BatchStats, list[TargetStats]]:
    """The batch's one aggregate job: progress-line counts and the sink's target stats.

    Grouped by source partition, kind and target table: a few rows per source partition to
    the driver. The sink gets the groups it will load (REJECT rows only when dead letters
    go to the sink), so it need not aggregate the batch again. ``source_times`` also brings
    every committed transaction's ``source_ts_ms`` (BEGIN -> visible in the metrics): one
    value per transaction, so only when metrics are on.
    """
    is_row = F.col("kind") == KIND_ROW
    # Rejects that the sink never sees keep their events' tables: group them without.
    keys = [
        F.when(is_row, F.col(k)).alias(k)
        if k in ("database", "table") and not dead_letters_to_sink
        else F.col(k)
        for k in TARGET_STATS_KEYS
    ]
    # One group per rejected transaction (first_offset), so that rejected transactions are
    # counted without a distinct aggregate (which would add a shuffle to every batch).
    rejected_txn = F.when(~is_row, F.col("first_offset")).alias("rejected_txn")
    # The violation is the reason's first word ("txn-timeout: ...").
    reason = F.when(~is_row, F.regexp_extract("reason", r"^([A-Za-z-]+)", 1)).alias("violation")
    txn_end = is_row & F.col("is_txn_end")
    aggregates = [*target_stats_aggregates(), F.sum(F.when(txn_end, 1).otherwise(0)).alias("txns")]
    if source_times:
        aggregates.append(F.collect_list(F.when(txn_end, F.col("source_ts_ms"))).alias("source_ts"))
    groups = df.groupBy(*keys, "kind", rejected_txn, reason).agg(*aggregates).collect()
    stats = BatchStats(batch_id=batch_id)
    targets = []
    rejected: set[tuple[str, int, int]] = set()
    for g in groups:
        target = TargetStats.from_row(g)
        if g["kind"] == KIND_ROW:
            stats.rows += target.rows
            stats.transactions += int(g["txns"] or 0)
            if source_times:
                stats.source_ts_ms.extend(int(ts) for ts in g["source_ts"] or () if ts is not None)
        else:
            stats.rejected_records += target.rows
            rejected.add((target.topic, target.partition, int(g["rejected_txn"])))
            violation = g["violation"] or "unknown"
            stats.rejects_by_reason[violation] = (
                stats.rejects_by_reason.get(violation, 0) + target.rows
            )
        if target.last_offset >= 0:
            key = (target.topic, target.partition)
            stats.emitted[key] = max(target.last_offset, stats.emitted.get(key, -1))
        if g["kind"] == KIND_ROW or dead_letters_to_sink:
            targets.append(target)
    stats.rejected_transactions = len(rejected)
    return stats, merge_target_stats(targets)


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
    """One JSON-lines file per batch, written atomically (rename), rewritten on replay."""
    rejects = df.filter(F.col("kind") == F.lit(KIND_REJECT)).toLocalIterator()
    folder = Path(settings.path) / config.pipeline.name
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"batch-{batch_id:012d}.jsonl"
    tmp = target.with_suffix(".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as out:
        for row in rejects:
            entry = row.asDict()
            entry["pipeline"] = config.pipeline.name
            entry["batch_id"] = batch_id
            out.write(json.dumps(entry, default=str) + "\n")
            count += 1
    if count:
        os.replace(tmp, target)
    else:
        tmp.unlink()


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
    if config.source.debezium is not None:
        # Data topics + the transaction topic, assembled per source (docs/debezium.md).
        assembled = assemble_debezium(source, config.source.debezium)
    else:
        assembled = assemble_transactions(source, config.assembler)
    rows = to_sink_rows(assembled, config)
    writer = (
        rows.writeStream.queryName(config.pipeline.name)
        .foreachBatch(BatchWriter(sink, config, reporter))
        .option("checkpointLocation", config.pipeline.checkpoint_location)
        .outputMode("append")
    )
    # One sink transaction per micro-batch: the trigger interval is the commit interval.
    # (No availableNow mode: with processing-time timeouts Spark always asks for another
    # batch, so such a query would never end.)
    writer = writer.trigger(processingTime=f"{config.pipeline.trigger_interval_ms} milliseconds")
    return writer.start()
