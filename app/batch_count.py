"""A micro-batch's counts: the progress line's and the sink's targets, from one pass in Python.

:class:`BatchCounter` is a :class:`sinks.base.Tally`: it runs on the executors, inside the
sink's load tasks where the sink can (one Spark job per batch), else as a job of its own
over the cached batch. :func:`batch_stats` reads its rows on the driver.

A row is counted under (source partition, target, kind, rejected transaction, violation):
a few keys per source partition, whatever the batch's size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar

from app.progress import BatchStats, OpenTxn
from assembler.output import KIND_ROW, KIND_STATUS, NONE_OPEN, OUTPUT_FIELDS
from common.native import native_module
from sinks.base import TargetStats, merge_target_stats

if TYPE_CHECKING:
    import pyarrow as pa

# The violation is the reason's first word ("txn-timeout: ...").
_VIOLATION = re.compile(r"[A-Za-z-]+")

_OUTPUT_NAMES = [name for name, _ in OUTPUT_FIELDS]

#: ``txncdc_native.count_rows``: :meth:`BatchCounter.count_outputs` of ROW rows in one call;
#: ``None`` where a row needs the loop below (common/native.py).
_native_count: Callable[[list[Any], str, bool], list[tuple[Any, ...]] | None] | None = getattr(
    native_module(), "count_rows", None
)


@dataclass(frozen=True)
class BatchCounter:
    """Counts the assembler's output rows (ROW and REJECT) by source partition and target.

    Args:
        dead_letters_to_sink: REJECT rows go to the sink's dead-letter table; otherwise
            they keep no target (they never reach the sink).
        source_times: Also list each committed transaction's ``source_ts_ms`` (BEGIN ->
            visible in the metrics): one value per transaction, so only when metrics are on.
    """

    dead_letters_to_sink: bool
    source_times: bool = False

    columns: ClassVar[tuple[str, ...]] = (
        "topic",
        "partition",
        "database",
        "table",
        "kind",
        "is_txn_end",
        "first_offset",
        "last_offset",
        "txn_id",
        "reason",
        "source_ts_ms",
    )

    def __call__(self, batch: pa.RecordBatch) -> list[dict[str, Any]]:
        """Partial counts of one Arrow batch (executor)."""
        values = [batch.column(name).to_pylist() for name in self.columns]
        return self.count(zip(*values, strict=True))

    def count_outputs(self, rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
        """:meth:`count` of output rows (``OUTPUT_FIELDS``, dead letters already aimed)."""
        if _native_count is not None and isinstance(rows, list):
            counted = _native_count(rows, KIND_ROW, self.source_times)
            if counted is not None:
                return [_tally_row((*row[:4], KIND_ROW, None, None), row[4:]) for row in counted]
        return self.count(map(_OUTPUT_COUNTED, rows))

    def count(self, rows: Iterable[tuple[Any, ...]]) -> list[dict[str, Any]]:
        """Partial counts of rows given as tuples of :attr:`columns` (executor)."""
        # Per key: [rows, last offset, its txn_id, smallest txn_id, txns, source times]. Lists,
        # not dicts, in the loop: it runs once per run of equal rows.
        groups: dict[tuple[Any, ...], list[Any]] = {}
        status: list[dict[str, Any]] = []
        source_times = self.source_times
        # The rows of one transaction into one table are equal tuples (is_txn_end aside):
        # groupby compares them in C, so this loop runs about twice per transaction and table.
        for same, run in groupby(rows):
            topic, partition, database, table, kind, end, first, last, txn_id, reason, ts = same
            n = len(tuple(run))
            if kind == KIND_STATUS:
                status.append(_status_tally(topic, partition, txn_id, first, ts))
                continue
            is_row = kind == KIND_ROW
            key: tuple[Any, ...]
            if is_row:
                key = (topic, partition, database, table, kind, None, None)
            else:
                found = _VIOLATION.match(reason or "")
                key = (
                    topic,
                    partition,
                    database if self.dead_letters_to_sink else None,
                    table if self.dead_letters_to_sink else None,
                    kind,
                    first,
                    found.group(0) if found else "",
                )
            group = groups.get(key)
            if group is None:
                group = groups[key] = [0, None, None, None, 0, []]
            group[0] += n
            if last is not None and (group[1] is None or last > group[1]):
                group[1] = last
                group[2] = txn_id
            if txn_id is not None and (group[3] is None or txn_id < group[3]):
                group[3] = txn_id
            if is_row and end:
                group[4] += n
                if source_times and ts is not None:
                    group[5].extend([ts] * n)
        return [*(_tally_row(key, group) for key, group in groups.items()), *status]


# Output-row positions of BatchCounter.columns, in that order.
_OUTPUT_COUNTED = itemgetter(*(_OUTPUT_NAMES.index(name) for name in BatchCounter.columns))


def _tally_row(key: Sequence[Any], group: Sequence[Any]) -> dict[str, Any]:
    """A tally row from a count's key and its group list."""
    topic, partition, database, table, kind, rejected_txn, violation = key
    rows, last_offset, last_txn, sample, txns, times = group
    return {
        "topic": topic,
        "partition": partition,
        "database": database,
        "table": table,
        "kind": kind,
        "rejected_txn": rejected_txn,
        "violation": violation,
        "_ts_rows": rows,
        "_ts_last_offset": last_offset,
        "_ts_last_txn_id": last_txn,
        "_ts_sample_txn_id": sample,
        "txns": txns,
        "source_ts": times,
    }


def _status_tally(
    topic: str, partition: int, txn_id: str | None, first: int, opened_at_ms: int | None
) -> dict[str, Any]:
    """A STATUS row's tally row: no target, so no ``_ts_rows`` (the sink passes it by)."""
    return {
        "kind": KIND_STATUS,
        "topic": topic,
        "partition": partition,
        "txn_id": txn_id,
        "open_offset": first,
        "opened_at_ms": opened_at_ms,
    }


def batch_stats(
    rows: Iterable[Mapping[str, Any]], batch_id: int, *, dead_letters_to_sink: bool
) -> tuple[BatchStats, list[TargetStats]]:
    """The progress line's counts and the sink's targets, from :class:`BatchCounter` rows.

    Rows of the same key (from different Arrow batches or tasks) add up. The targets hold
    REJECT rows only when dead letters go to the sink.
    """
    stats = BatchStats(batch_id=batch_id)
    targets = []
    rejected: set[tuple[str, int, int]] = set()
    for row in rows:
        if row["kind"] == KIND_STATUS:
            key = (str(row["topic"]), int(row["partition"]))
            first, opened = int(row["open_offset"]), row["opened_at_ms"]
            stats.status[key] = None if first == NONE_OPEN else OpenTxn(first, opened)
            continue
        target = TargetStats.from_row(row)
        if row["kind"] == KIND_ROW:
            stats.rows += target.rows
            stats.transactions += int(row["txns"])
            stats.source_ts_ms.extend(int(ts) for ts in row["source_ts"])
        else:
            stats.rejected_records += target.rows
            rejected.add((target.topic, target.partition, int(row["rejected_txn"])))
            violation = row["violation"] or "unknown"
            stats.rejects_by_reason[violation] = (
                stats.rejects_by_reason.get(violation, 0) + target.rows
            )
        if target.last_offset >= 0:
            key = (target.topic, target.partition)
            stats.emitted[key] = max(target.last_offset, stats.emitted.get(key, -1))
        if row["kind"] == KIND_ROW or dead_letters_to_sink:
            targets.append(target)
    stats.rejected_transactions = len(rejected)
    return stats, merge_target_stats(targets)
