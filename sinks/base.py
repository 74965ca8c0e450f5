"""The sink contract: the one extension point through which batches leave the pipeline.

Roles (PySpark ``foreachBatch`` runs the batch function on the *driver*):

* :meth:`Sink.open` — driver, once, before the streaming query starts.
* :meth:`Sink.write_batch` — driver, once per micro-batch, called from ``foreachBatch``;
  it may itself run Spark jobs whose tasks execute on executors.
* :meth:`Sink.close` — driver, once, after the query stopped (also after a failure).

Delivery guarantee: a sink that implements this contract is **exactly-once per
``(query id, batch id)``**: Spark re-runs the last uncommitted micro-batch after a crash with
the same batch id and the same data, and ``write_batch`` must then neither duplicate nor lose
it. Whether a batch is atomic across target tables is sink-specific and documented there.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row

#: Grouping keys of :class:`TargetStats` (columns of the sink input).
TARGET_STATS_KEYS = ("topic", "partition", "database", "table")


@dataclass(frozen=True)
class TargetStats:
    """One (source partition, target table) of a batch: what a sink checks before loading.

    A sink aggregates these itself; a caller that aggregates the batch anyway (the app's
    progress line) can fold :func:`target_stats_aggregates` into its own ``groupBy`` over
    :data:`TARGET_STATS_KEYS` and pass the result, which saves one Spark job per batch.
    """

    topic: str
    partition: int
    database: str | None
    table: str | None
    rows: int
    last_offset: int
    last_txn_id: str
    sample_txn_id: str

    @classmethod
    def from_row(cls, row: Row) -> TargetStats:
        """From a row of ``groupBy(*TARGET_STATS_KEYS).agg(*target_stats_aggregates())``."""
        last = row["_ts_last_offset"]
        return cls(
            topic=str(row["topic"]),
            partition=int(row["partition"]),
            database=row["database"],
            table=row["table"],
            rows=int(row["_ts_rows"]),
            last_offset=int(last) if last is not None else -1,
            last_txn_id=str(row["_ts_last_txn_id"] or ""),
            sample_txn_id=str(row["_ts_sample_txn_id"] or ""),
        )


def target_stats_aggregates() -> list[Column]:
    """The aggregate columns :meth:`TargetStats.from_row` reads (names start with ``_ts_``)."""
    from pyspark.sql import functions as F  # noqa: N812 - the usual Spark alias

    return [
        F.count(F.lit(1)).alias("_ts_rows"),
        F.max("last_offset").alias("_ts_last_offset"),
        F.max_by("txn_id", "last_offset").alias("_ts_last_txn_id"),
        F.min("txn_id").alias("_ts_sample_txn_id"),
    ]


def merge_target_stats(parts: Iterable[TargetStats]) -> list[TargetStats]:
    """One entry per (topic, partition, database, table) from finer-grained entries."""
    merged: dict[tuple[str, int, str | None, str | None], TargetStats] = {}
    for p in parts:
        key = (p.topic, p.partition, p.database, p.table)
        seen = merged.get(key)
        if seen is None:
            merged[key] = p
            continue
        last = p if p.last_offset > seen.last_offset else seen
        merged[key] = TargetStats(
            topic=p.topic,
            partition=p.partition,
            database=p.database,
            table=p.table,
            rows=seen.rows + p.rows,
            last_offset=last.last_offset,
            last_txn_id=last.last_txn_id,
            sample_txn_id=min(seen.sample_txn_id, p.sample_txn_id),
        )
    return list(merged.values())


def collect_target_stats(df: DataFrame) -> list[TargetStats]:
    """One small aggregate job: the batch's :class:`TargetStats`."""
    rows: Iterable[Row] = df.groupBy(*TARGET_STATS_KEYS).agg(*target_stats_aggregates()).collect()
    return [TargetStats.from_row(r) for r in rows]


class Sink(abc.ABC):
    """Smallest contract a sink gives the app."""

    @abc.abstractmethod
    def open(self) -> None:
        """Validate the target and prepare it (driver, before the query starts).

        Raises:
            sinks.exceptions.SinkTerminalError: The target cannot work as configured (bad
                credentials, missing tables, unsupported server); do not start the query.
            sinks.exceptions.SinkTransientError: The target is unreachable right now; the
                caller may retry ``open`` later. Nothing was written either way except
                idempotent bookkeeping DDL (``CREATE TABLE IF NOT EXISTS``).
        """

    @abc.abstractmethod
    def write_batch(
        self, batch_df: DataFrame, batch_id: int, stats: Sequence[TargetStats] | None = None
    ) -> Any:
        """Write one micro-batch (driver, from ``foreachBatch``); idempotent per batch id.

        Calling it again with the same ``batch_id`` (after a crash or an exception) and the
        same data is safe: an already-applied batch is detected and skipped. ``stats``, when
        given, must be the :class:`TargetStats` of exactly ``batch_df``; the sink then does
        not aggregate the batch itself.

        Returns:
            Sink-specific per-batch statistics for progress display.

        Raises:
            sinks.exceptions.SinkTransientError: The batch was not applied *or* its outcome is
                recorded on the server under its label; failing the query and restarting it
                (Spark replays the batch) is safe.
            sinks.exceptions.SinkTerminalError: The batch cannot be applied until a person
                acts (data, schema, permissions, limits); the message says what to do.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release clients and connections (driver). Never raises for cleanup problems."""
