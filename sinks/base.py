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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

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
    def from_row(cls, row: Mapping[str, Any]) -> TargetStats:
        """From a row of ``groupBy(*TARGET_STATS_KEYS).agg(*target_stats_aggregates())``.

        Or from a :class:`Tally`'s row, which carries the same keys and ``_ts_`` columns.
        """
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
    rows = df.groupBy(*TARGET_STATS_KEYS).agg(*target_stats_aggregates()).collect()
    return [TargetStats.from_row(r.asDict()) for r in rows]


class Tally(Protocol):
    """Counts a batch in Python on the executors (picklable), one Arrow batch at a time.

    A sink that loads the batch in one Spark job (``Sink.counts_in_load``) runs it inside its
    own load tasks, so the batch's counts cost no job of their own: the tasks' stateful
    upstream is computed once, with nothing cached. Each call returns partial counts; rows
    with the same key from different calls or tasks are summed by whoever reads them.
    Every row carries :data:`TARGET_STATS_KEYS` and the ``_ts_`` columns of
    :func:`target_stats_aggregates` (``_ts_last_offset`` ``None`` when no row had one),
    plus whatever else its caller counts; a row without ``_ts_rows`` is its caller's alone
    (the assembler's STATUS rows), passed back and no target. Input rows without a ``table``
    are counted, never loaded.
    """

    @property
    def columns(self) -> tuple[str, ...]:
        """Columns of the batch it reads (the sink keeps them in its load job's input)."""

    def __call__(self, batch: pa.RecordBatch) -> list[dict[str, Any]]:
        """Partial counts of ``batch`` (JSON-serialisable values)."""


def encode_tally(rows: list[dict[str, Any]]) -> str:
    """Tally rows as the JSON text a task sends to the driver."""
    return orjson.dumps(rows).decode("utf-8")


def decode_tally(texts: Iterable[str | None]) -> list[dict[str, Any]]:
    """The rows of :func:`encode_tally` texts, concatenated (``None`` is skipped)."""
    return [row for text in texts if text for row in orjson.loads(text)]


def count_batch(df: DataFrame, tally: Tally) -> list[dict[str, Any]]:
    """``tally`` over ``df`` as a Spark job of its own (when no load job can carry it)."""

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        rows = [row for batch in batches for row in tally(batch)]
        yield pa.RecordBatch.from_pylist([{"tally": encode_tally(rows)}])

    from pyspark.sql.types import StringType, StructField, StructType

    # One JSON array of tally rows per task. A StructType: mapInArrow parses a DDL string
    # again on every call (~9 ms of the driver's time).
    schema = StructType([StructField("tally", StringType())])
    counted = df.select(*tally.columns).mapInArrow(count, schema).collect()
    return decode_tally(r["tally"] for r in counted)


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

    @property
    def counts_in_load(self) -> bool:
        """True when ``write_batch`` can count the batch with a :class:`Tally` in its load."""
        return False

    @abc.abstractmethod
    def write_batch(
        self,
        batch_df: DataFrame,
        batch_id: int,
        stats: Sequence[TargetStats] | None = None,
        tally: Tally | None = None,
    ) -> Any:
        """Write one micro-batch (driver, from ``foreachBatch``); idempotent per batch id.

        Calling it again with the same ``batch_id`` (after a crash or an exception) and the
        same data is safe: an already-applied batch is detected and skipped. ``stats``, when
        given, must be the :class:`TargetStats` of exactly ``batch_df``; the sink then does
        not aggregate the batch itself. ``tally`` (only where :attr:`counts_in_load`) is
        run in the sink's load tasks instead, and its rows come back as the result's
        ``tally_rows``: the batch is then loaded and counted by one Spark job.

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
