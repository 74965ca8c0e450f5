"""What the committer is given (a :class:`BatchPlan`) and what it answers (a :class:`CommitResult`).

Plain data, no Spark and no HTTP; also the typed load reports' way back to an exception.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sinks.starrocks import errors as sr_errors
from sinks.starrocks.errors import StarRocksError, StarRocksTerminalError
from sinks.starrocks.labels import make_label
from sinks.starrocks.loader import ANY_TABLE, progress_body
from sinks.starrocks.txnapi import LoadFailure, LoadReport


class Outcome(enum.StrEnum):
    """What ``run()`` did with the batch."""

    COMMITTED = "committed"  # loaded and committed now
    ALREADY_APPLIED = "already_applied"  # an earlier run committed it (a replay)
    RECOVERED = "recovered"  # per-table: an earlier run prepared it, this run committed
    EMPTY = "empty"  # nothing to write, no transaction opened
    LOADED = "committing"  # loaded, the commit runs behind (``BatchPlan.defer_commit``)


@dataclass(frozen=True)
class BatchPlan:
    """One micro-batch as the committer sees it (no rows: those are the load job's).

    Attributes:
        prefix: ``sink.label-prefix``.
        query_id: Persistent streaming query id.
        batch_id: Spark batch id.
        tables: Data tables with rows in this batch, sorted.
        progress_table: The sink's progress table (loaded in the same transaction).
        progress_rows: One row per source partition, without ``label`` (added per attempt).
        counted: Set when the load job also counts the batch (multi-table mode): the tables
            are then unknown before the load, the job loads every table under the one
            label, and this, called once it ran, checks the batch's targets (raising
            ``SinkTerminalError``) and returns its progress rows (none: an empty batch).
        fresh: No earlier attempt of this batch can exist: the same sink settled the batch
            before it, in this process, and began nothing since. Spark starts batch ``b + 1``
            only once ``b`` is in its commit log, so a run's only possible replay is its
            first batch. The checks for an earlier attempt (a committed label, a later
            attempt committed) are skipped; ``begin`` still probes every label.
        defer_commit: Stop once the attempt is loaded (multi-table mode): ``run()`` answers
            LOADED with the label, and the caller commits it (``MultiTableCommitter.commit``)
            while Spark goes on (:mod:`sinks.starrocks.behind`).
        applied: Multi-table mode: reads the progress table and returns the labels its rows
            of this batch id hold (an older checkpoint's rows may hold other queries'). Recovery
            asks it once a free label found no later attempt committed: StarRocks drops
            finished multi-table tasks once it keeps more than ``stream_load_task_keep_max_num``
            (1,000, all databases), after which a rolled-back label is free again and a
            committed attempt can lie further ahead than the look-ahead reaches.
        optional_tables: Tables an attempt may have loaded although this plan has no rows
            for them, or the other way round (per-table mode): the dead-letter table, which
            the retry after filtered rows adds, and the tables that retry leaves without rows
            (:func:`sinks.starrocks.filtered_rows.retry_plan`). Recovery reads their labels
            too, so that it commits every prepared table of the attempt it finishes, not
            only this plan's.
    """

    prefix: str
    query_id: str
    batch_id: int
    tables: tuple[str, ...]
    progress_table: str
    progress_rows: tuple[Mapping[str, Any], ...] = ()
    counted: Callable[[], Sequence[Mapping[str, Any]]] | None = None
    fresh: bool = False
    defer_commit: bool = False
    applied: Callable[[], Sequence[str]] | None = None
    optional_tables: tuple[str, ...] = ()

    def label(self, attempt: int, table: str | None = None) -> str:
        """The label rule (:func:`sinks.starrocks.labels.make_label`)."""
        return make_label(self.prefix, self.query_id, self.batch_id, attempt, table)

    def load_labels(self, label: str) -> dict[str, str]:
        """``table -> label`` for the load job (:data:`ANY_TABLE` when tables are unknown)."""
        return dict.fromkeys(self.tables or (ANY_TABLE,), label)

    def progress(self, label: str) -> bytes:
        """Progress rows of this attempt as a load body."""
        return progress_body([{**row, "label": label} for row in self.progress_rows])


@dataclass(frozen=True)
class CommitResult:
    """The committer's typed answer."""

    outcome: Outcome
    labels: tuple[str, ...] = ()
    attempt: int = 0
    reports: tuple[LoadReport, ...] = field(default_factory=tuple)
    commit_ms: float = 0.0


def load_error(failure: LoadFailure, label: str, table: str) -> StarRocksError:
    """Rebuild a load task's error on the driver, same class, with label/table/error URL."""
    cls = getattr(sr_errors, failure.error_class, None)
    if not (isinstance(cls, type) and issubclass(cls, StarRocksError)):
        cls = sr_errors.StarRocksTransientError if failure.transient else StarRocksTerminalError
    context: dict[str, Any] = {"label": label, "table": table}
    if failure.error_url:
        context["error_url"] = failure.error_url
    return cls(f"load of table {table} under label {label} failed: {failure.message}", **context)


def raise_load_failures(reports: Sequence[LoadReport], labels: Mapping[str, str]) -> None:
    """Raise the first terminal load failure, else the first transient one, if any."""
    failed = [(r.table, r.failure) for r in reports if r.failure is not None]
    if not failed:
        return
    table, failure = min(failed, key=lambda item: item[1].transient)
    label = labels.get(table) or next(iter(labels.values()), "?")
    raise load_error(failure, label, table)
