"""The label rule, written once.

A label names one StarRocks transaction. It is derived from values that survive a crash
(the persistent query id from the checkpoint, the batch id Spark replays, an attempt counter
the recovery step walks), never from a clock or a random UUID: that is what makes
``write_batch`` idempotent (DESIGN.md §5 step 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from sinks.starrocks.config import LABEL_SAFE
from sinks.starrocks.errors import LabelError

#: StarRocks rejects labels longer than this (``[A-Za-z0-9_-]`` only).
MAX_LABEL_LENGTH = 128


def make_label(
    prefix: str, query_id: str, batch_id: int, attempt: int, table: str | None = None
) -> str:
    """Return ``{prefix}-{query_id}-{batch_id}-{attempt}[-{table}]``.

    Args:
        prefix: ``sink.label-prefix``.
        query_id: Persistent streaming query id (stays the same across restarts from one
            checkpoint, changes for a new checkpoint: old labels can never collide).
        batch_id: Spark micro-batch id (>= 0).
        attempt: 0 for the first transaction of the batch, +1 for each one that had to be
            rolled back (a rolled-back multi-table label stays blocked on the server).
        table: Per-table mode only: the target table (one label per table and batch).

    Raises:
        sinks.starrocks.errors.LabelError: The label would break StarRocks' label rule
            (too long or characters outside ``[A-Za-z0-9_-]``); the message names the part.
    """
    if batch_id < 0 or attempt < 0:
        msg = f"batch_id and attempt must be >= 0, got batch_id={batch_id} attempt={attempt}"
        raise LabelError(msg)
    parts = [prefix, query_id, str(batch_id), str(attempt)]
    if table is not None:
        parts.append(table)
    for name, value in zip(("prefix", "query id", "", "", "table"), parts, strict=False):
        if not value or not LABEL_SAFE.match(value):
            msg = (
                f"label part {name or 'number'}={value!r} has characters outside "
                "[A-Za-z0-9_-]; StarRocks labels allow only those"
            )
            raise LabelError(msg)
    label = "-".join(parts)
    if len(label) > MAX_LABEL_LENGTH:
        msg = (
            f"label {label!r} is {len(label)} characters, StarRocks allows "
            f"{MAX_LABEL_LENGTH}: shorten sink.label-prefix or the table name"
        )
        raise LabelError(msg)
    return label


@dataclass(frozen=True)
class LabelParts:
    """The parts :func:`make_label` joined (``table`` is None for a multi-table label)."""

    prefix: str
    query_id: str
    batch_id: int
    attempt: int
    table: str | None = None


def parse_label(label: str, prefix: str) -> LabelParts | None:
    """Split a label made by :func:`make_label` with ``prefix``; None if it is not one.

    Unambiguous because a table name is an identifier (never all digits, no ``-``) while
    batch id and attempt are numbers: ``...-7-0`` is multi-table, ``...-7-0-orders`` is the
    per-table label of ``orders``. Used by the chaos checks, so they follow the product's
    rule instead of a copy of it.
    """
    if not label.startswith(prefix + "-"):
        return None
    parts = label[len(prefix) + 1 :].split("-")
    table = None
    if parts and not parts[-1].isdigit():
        table = parts.pop()
    if len(parts) < 3 or not (parts[-1].isdigit() and parts[-2].isdigit()):
        return None
    query_id = "-".join(parts[:-2])
    if not query_id:
        return None
    return LabelParts(prefix, query_id, int(parts[-2]), int(parts[-1]), table)
