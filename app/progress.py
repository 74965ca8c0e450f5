"""What a person watching the pipeline sees: one line per micro-batch, and totals.

The batch writer (foreachBatch) knows what a batch emitted; Spark's progress event, which
comes right after, knows what it consumed. The line is printed when both are known, from a
``StreamingQueryListener``. Per partition at most one source transaction is open, so
"open transactions" is the number of partitions whose consumed offsets run past the last
record of the last transaction they emitted (or dead-lettered).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.listener import (
    JStreamingQueryListener,
    QueryProgressEvent,
    StreamingQueryListener,
    StreamingQueryProgress,
)

if TYPE_CHECKING:
    from app.metrics import PipelineMetrics

log = logging.getLogger(__name__)


@dataclass
class BatchStats:
    """What one micro-batch did, for the progress line and logs."""

    batch_id: int
    rows: int = 0
    transactions: int = 0
    rejected_records: int = 0
    rejected_transactions: int = 0
    label: str | None = None
    sink_ms: float = 0.0
    skipped: bool = False
    # Highest source offset emitted (a TXN_END or a dead-lettered record) per (topic, partition).
    emitted: dict[tuple[str, int], int] = field(default_factory=dict)
    # The sink's outcome ("committed", "already_applied", "empty", ...) and attempt number.
    outcome: str = "empty"
    attempt: int = 0
    # Rejected records by violation (the reason's first word).
    rejects_by_reason: dict[str, int] = field(default_factory=dict)
    # source_ts_ms of each committed source transaction (for BEGIN -> visible latency).
    source_ts_ms: list[int] = field(default_factory=list)


class ProgressReporter:
    """Keeps totals and per-partition emitted offsets; prints one line per batch."""

    def __init__(self, enabled: bool, metrics: PipelineMetrics | None = None) -> None:
        self._enabled = enabled
        self._metrics = metrics
        self._lock = threading.Lock()
        self._pending: dict[int, BatchStats] = {}
        self._emitted: dict[tuple[str, int], int] = {}
        # Per open partition: (its last emitted offset, the start of the batch it was seen
        # open in first with that offset).
        self._open: dict[tuple[str, int], tuple[int, float]] = {}
        self._counted_through = -1
        self.batches = 0
        self.rows = 0
        self.transactions = 0
        self.rejected_records = 0
        self.started = time.monotonic()
        self.last: BatchStats | None = None
        self.open_transactions = 0

    def record(self, stats: BatchStats) -> None:
        """Account one written batch (driver, foreachBatch; a replay may record it again)."""
        with self._lock:
            self.batches += 1
            # A replay (after a commit behind failed, app/main.py) writes rows counted once.
            if stats.batch_id > self._counted_through:
                self._counted_through = stats.batch_id
                self.rows += stats.rows
                self.transactions += stats.transactions
                self.rejected_records += stats.rejected_records
            self.last = stats
            for key, offset in stats.emitted.items():
                self._emitted[key] = max(offset, self._emitted.get(key, -1))
            self._pending[stats.batch_id] = stats
        if self._metrics is not None:
            self._metrics.on_batch(stats)

    def _opened(self, key: tuple[str, int], end: int, started: float) -> float | None:
        """When the transaction open in ``key`` now began, or ``None`` when none is open.

        Open: consumed past its last emitted record. A partition first seen open, or open
        again after emitting since it was last seen (its transaction ended, another began),
        has a transaction begun in this batch: its start, as ``txn-timeout`` counts from
        the batch that applied the BEGIN.
        """
        emitted = self._emitted.get(key, -1)
        if end - 1 <= emitted:
            self._open.pop(key, None)
            return None
        seen = self._open.get(key)
        if seen is None or seen[0] != emitted:
            seen = self._open[key] = (emitted, started)
        return seen[1]

    def emitted_before(self, offsets: dict[tuple[str, int], int]) -> None:
        """Offsets an earlier run emitted (the sink's progress rows), read at start (driver).

        Without them, after a restart every partition that had data would count as open
        until it emits again: an idle one, or one whose batch was a replay, never would.
        """
        with self._lock:
            for key, offset in offsets.items():
                self._emitted[key] = max(offset, self._emitted.get(key, -1))

    def on_progress(
        self,
        batch_id: int,
        input_rows: int,
        end_offsets: dict[str, Any],
        started_s: float | None = None,
    ) -> None:
        """Spark's progress for ``batch_id`` (begun at ``started_s``): print the batch's line."""
        started = time.time() if started_s is None else started_s
        with self._lock:
            stats = self._pending.pop(batch_id, None)
            open_since = {
                (topic, int(partition)): self._opened((topic, int(partition)), int(end), started)
                for topic, partitions in end_offsets.items()
                for partition, end in partitions.items()
            }
            self.open_transactions = sum(since is not None for since in open_since.values())
            open_txns = self.open_transactions
        if self._metrics is not None:
            self._metrics.on_open(open_since)
        if not self._enabled or stats is None:
            return
        if input_rows == 0 and stats.rows == 0 and stats.rejected_records == 0:
            return  # an empty batch (pipeline.idle-batches): nothing to show
        elapsed = max(time.monotonic() - self.started, 1e-9)
        print(
            f"batch {stats.batch_id:>6}  in {input_rows:>7}  rows {stats.rows:>7}"
            f"  txns {stats.transactions:>5}  open {open_txns:>3}"
            f"  rejects {stats.rejected_records:>4}  commit {stats.sink_ms:6.0f} ms"
            f"  label {stats.label or '-'}"
            f"{'  (already committed)' if stats.skipped else ''}"
            f"  | total txns {self.transactions}  rows/s {self.rows / elapsed:,.0f}",
            flush=True,
        )


def _epoch_s(timestamp: str | None) -> float | None:
    """A progress event's ``timestamp`` (its trigger's start, ISO 8601 UTC) in epoch seconds."""
    try:
        return datetime.fromisoformat(timestamp or "").timestamp()
    except ValueError:
        return None


class _JsonProgressBridge(JStreamingQueryListener):
    """PySpark's bridge from the JVM listener bus, with progress events read as JSON.

    PySpark reads a progress event field by field, one Py4J round trip each (every map entry
    of every state operator and source too): ~150 round trips and ~75 ms of driver CPU per
    micro-batch, on the cores the batch runs on. The event's JSON is one round trip.
    """

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802 - Spark's method names
        progress = StreamingQueryProgress.fromJson(json.loads(jevent.progress().json()))
        self.pylistener.onQueryProgress(QueryProgressEvent(progress))


class ProgressListener(StreamingQueryListener):
    """Forwards Spark's per-batch progress to the reporter (driver, Spark's listener bus)."""

    def __init__(self, reporter: ProgressReporter, query_name: str) -> None:
        self._reporter = reporter
        # Listeners are per session: only this pipeline's query is ours.
        self._query_name = query_name

    @property
    def _jlistener(self) -> Any:
        """The JVM side of the listener (``spark.streams.addListener`` registers it)."""
        jlistener = getattr(self, "_jlistenerobj", None)
        if jlistener is None:
            from pyspark import SparkContext

            jvm: Any = SparkContext._jvm
            jlistener = jvm.PythonStreamingQueryListenerWrapper(_JsonProgressBridge(self))
            self._jlistenerobj = jlistener
        return jlistener

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's method names
        """Nothing to show yet."""

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        """One micro-batch finished."""
        progress = event.progress
        if progress.name != self._query_name:
            return
        ends: dict[str, Any] = {}
        for source in progress.sources:
            try:
                offsets = json.loads(source.endOffset or "{}")
            except (TypeError, ValueError):
                offsets = None
            # Kafka-style {"topic": {"partition": offset}}; other sources are not counted.
            if isinstance(offsets, dict):
                ends.update({t: p for t, p in offsets.items() if isinstance(p, dict)})
            else:
                log.debug("progress: endOffset not per partition: %s", source.endOffset)
        # Where a batch's time went (Spark's own phases: latestOffset, addBatch = ours,
        # walCommit, commitOffsets, ...): the first thing to read when latency is high.
        durations = dict(progress.durationMs or {})
        log.log(
            logging.INFO if progress.numInputRows else logging.DEBUG,
            "batch timing batch_id=%s %s",
            progress.batchId,
            " ".join(f"{k}_ms={v}" for k, v in sorted(durations.items())),
        )
        self._reporter.on_progress(
            progress.batchId, int(progress.numInputRows), ends, _epoch_s(progress.timestamp)
        )

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        """Nothing new to read."""

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        """The app logs the end itself."""
