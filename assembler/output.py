"""The assembler's output row (DESIGN.md §4): complete-transaction rows and rejects."""

from __future__ import annotations

from typing import Any, NamedTuple

KIND_ROW = "ROW"
KIND_REJECT = "REJECT"
#: What a partition holds open at the end of a call (metrics only: never loaded).
KIND_STATUS = "STATUS"
#: A STATUS row's ``first_offset`` when no transaction is open in its partition.
NONE_OPEN = -1

OUTPUT_FIELDS: tuple[tuple[str, str], ...] = (
    ("kind", "string"),
    ("topic", "string"),
    ("partition", "int"),
    ("txn_id", "string"),
    ("txn_seq", "bigint"),
    ("row_seq", "int"),
    ("database", "string"),
    ("table", "string"),
    ("op", "string"),
    ("row", "string"),
    ("is_txn_end", "boolean"),
    ("first_offset", "bigint"),
    ("last_offset", "bigint"),
    ("source_ts_ms", "bigint"),
    ("reason", "string"),
)
"""(name, Spark DDL type) of every output column, in order; all columns are nullable."""


def output_ddl() -> str:
    """Spark DDL string of the output schema, e.g. for ``applyInPandasWithState``."""
    return ", ".join(f"`{name}` {ddl}" for name, ddl in OUTPUT_FIELDS)


class OutputRow(NamedTuple):
    """One output row; fields in :data:`OUTPUT_FIELDS` order.

    ROW: one row of a complete source transaction. ``txn_seq`` numbers the partition's emitted
    transactions (1, 2, ...), ``row_seq`` numbers rows within it (0..n-1), ``is_txn_end`` marks
    the last row, ``first_offset``/``last_offset`` are the BEGIN/END offsets.

    REJECT: one source record of a rejected transaction (or a lone bad record); ``txn_seq`` is
    ``None``, ``first_offset`` is the first offset of the rejected transaction and
    ``last_offset`` the offset of this record; ``reason`` starts with the violation name.

    STATUS (:func:`status_row`): whether a transaction is open in the partition once the call
    is done, for the metrics; no target, never loaded. ``first_offset`` is the open
    transaction's first offset (:data:`NONE_OPEN`: none), ``source_ts_ms`` the processing time
    of the batch that opened it (as ``txn-timeout`` counts), ``txn_id`` its id.
    """

    kind: str
    topic: str
    partition: int
    txn_id: str | None
    txn_seq: int | None
    row_seq: int
    database: str | None
    table: str | None
    op: str | None
    row: str | None
    is_txn_end: bool
    first_offset: int
    last_offset: int
    source_ts_ms: int | None
    reason: str | None

    def as_tuple(self) -> tuple[Any, ...]:
        """The row as a plain tuple in :data:`OUTPUT_FIELDS` order (it already is one)."""
        return tuple(self)


def status_row(
    topic: str, partition: int, txn_id: str | None, first_offset: int, opened_at_ms: int | None
) -> OutputRow:
    """A STATUS row: the transaction open in a partition (``first_offset`` :data:`NONE_OPEN`: none).

    Output of the Kafka-side transaction state, not of any Kafka offset: with a transactional
    producer a partition's last offset is a commit marker no consumer sees, so "consumed past
    the last emitted record" cannot tell an open transaction from a finished one.
    """
    none = first_offset == NONE_OPEN
    return OutputRow(
        KIND_STATUS,
        topic,
        partition,
        None if none else txn_id,
        None,
        0,
        None,
        None,
        None,
        None,
        False,
        first_offset,
        NONE_OPEN,
        None if none else opened_at_ms,
        None,
    )
