"""The Spark side of ``sink.filtered-rows: dead-letter``.

The batch's source transactions, a range of them to probe, and the batch with the failing ones
turned into dead letters.

The bisection and the probe protocol are in :mod:`sinks.starrocks.isolate` (no Spark).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sinks.starrocks.batch import BatchPlan
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.fit import fit_bytes, fit_payload_col, fit_utf8

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: A source transaction in a batch: the assembler numbers each partition's transactions.
TXN_KEY = ("topic", "partition", "txn_seq")
#: The dead letter's violation name (its reason's first word, as the assembler's are).
VIOLATION = "filtered-rows"


@dataclass(frozen=True)
class SourceTxn:
    """One source transaction of the batch (:func:`source_txns` lists them in key order)."""

    topic: str
    partition: int
    txn_seq: int
    txn_id: str | None
    tables: tuple[str, ...]
    rows: int


def source_txns(df: DataFrame, config: StarRocksSinkConfig) -> list[SourceTxn]:
    """The data rows' source transactions, in key order (one small job)."""
    from pyspark.sql import functions as F  # noqa: N812

    groups = (
        df.where(~F.col("table").isin(list(config.system_tables())))
        .groupBy(*TXN_KEY)
        .agg(
            F.first("txn_id").alias("txn_id"),
            F.sort_array(F.collect_set("table")).alias("tables"),
            F.count(F.lit(1)).alias("rows"),
        )
        .orderBy(*TXN_KEY)
        .collect()
    )
    return [
        SourceTxn(
            g["topic"], g["partition"], g["txn_seq"], g["txn_id"], tuple(g["tables"]), g["rows"]
        )
        for g in groups
    ]


def only(df: DataFrame, txns: Sequence[SourceTxn]) -> DataFrame:
    """Rows of ``txns``, a range of :func:`source_txns` (contiguous in key order)."""
    from pyspark.sql import functions as F  # noqa: N812

    key = F.struct(*[F.col(c) for c in TXN_KEY])
    return df.where(key.between(_key(txns[0]), _key(txns[-1])))


def with_dead_letters(
    df: DataFrame, bad: Sequence[tuple[SourceTxn, str]], config: StarRocksSinkConfig
) -> DataFrame:
    """``df`` with every row of the ``bad`` transactions turned into a dead letter.

    Keyed like the assembler's dead letters (topic, partition, the transaction's first offset,
    row_seq); the payload keeps database, table, op and row, so the change can be replayed once
    fixed.
    """
    from pyspark.sql import functions as F  # noqa: N812

    reasons = df.sparkSession.createDataFrame(
        [
            (t.topic, t.partition, t.txn_seq, fit_utf8(f"{VIOLATION}: {why}", 1024))
            for t, why in bad
        ],
        "topic string, partition int, txn_seq bigint, _reason string",
    )
    joined = df.join(F.broadcast(reasons), list(TXN_KEY), "left")
    dead = F.col("_reason").isNotNull()
    first_offset = F.col("first_offset") if "first_offset" in df.columns else F.col("last_offset")
    source_ts = F.col("source_ts_ms") if "source_ts_ms" in df.columns else F.lit(None)
    # The same payload as the assembler's dead letters of DATA events (app/task_load.py).
    data, reason = fit_payload_col(
        F.to_json(F.struct("database", "table", "op", "row")), F.col("_reason")
    )
    payload = F.to_json(
        F.struct(
            F.col("topic").alias("topic"),
            F.col("partition").alias("kafka_partition"),
            first_offset.alias("first_offset"),
            F.col("row_seq").alias("row_seq"),
            F.lit(config.pipeline_name).alias("pipeline"),
            fit_bytes(F.col("txn_id"), 255).alias("txn_id"),
            F.col("last_offset").alias("last_offset"),
            fit_bytes(reason, 1024).alias("reason"),
            data.alias("payload"),
            source_ts.cast("bigint").alias("source_ts_ms"),
        )
    )
    swapped = {
        "database": F.lit(config.database),
        "table": F.lit(config.dead_letter_table),
        "op": F.lit("UPSERT"),
        "row": payload,
    }
    return joined.select(
        *[
            F.when(dead, swapped[c]).otherwise(F.col(c)).alias(c) if c in swapped else F.col(c)
            for c in df.columns
        ]
    )


def retry_plan(
    plan: BatchPlan,
    txns: Sequence[SourceTxn],
    bad: Sequence[tuple[SourceTxn, str]],
    dead_letter_table: str,
) -> BatchPlan:
    """``plan`` (known targets) for the batch with the ``bad`` transactions as dead letters.

    The dead-letter table gains rows. A table whose every row is in a ``bad`` transaction has
    none left and gets no label: per-table mode would begin one, and StarRocks refuses to
    prepare a label no load reached (``hasn't send any data yet``, spec §4.2), so the batch
    would fail for good on the very rows the policy isolates. A replay's plan names that
    table again (its rows are the source rows), so it joins ``optional_tables``: recovery
    reads its labels and, where an attempt never began one, leaves it out of that attempt.
    """
    dead = {txn for txn, _why in bad}
    kept = {t for txn in txns if txn not in dead for t in txn.tables}
    emptied = {t for txn in dead for t in txn.tables} - kept
    return replace(
        plan,
        tables=tuple(sorted({*plan.tables, dead_letter_table} - emptied)),
        optional_tables=tuple(sorted({*plan.optional_tables, *emptied})),
    )


def _key(txn: SourceTxn) -> Column:
    from pyspark.sql import functions as F  # noqa: N812

    return F.struct(
        F.lit(txn.topic).alias("topic"),
        F.lit(txn.partition).cast("int").alias("partition"),
        F.lit(txn.txn_seq).cast("bigint").alias("txn_seq"),
    )
