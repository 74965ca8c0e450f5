"""What a person watching the pipeline sees: one line per micro-batch, and totals.

The batch writer (foreachBatch) knows what a batch emitted, and which source transactions
its partitions hold open (the assembler's STATUS rows, :func:`assembler.output.status_row`);
Spark's progress event, which comes right after, knows what it consumed. The line is printed
when both are known, from a ``StreamingQueryListener``.

Open transactions come from the assembler's state, not from Kafka offsets: with a
transactional producer upstream a partition's last offset is a commit marker that no consumer
is handed, so a partition consumed to its end would look open for good.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from pyspark.sql.streaming.listener import (
    JStreamingQueryListener,
    QueryProgressEvent,
    StreamingQueryListener,
    StreamingQueryProgress,
)

if TYPE_CHECKING:
    from app.metrics import PipelineMetrics

log = logging.getLogger(__name__)


class OpenTxn(NamedTuple):
    """The source transaction a partition holds open: its first offset, and since when."""

    first_offset: int
    # Processing time (epoch ms) of the micro-batch that opened it, as txn-timeout counts.
    opened_at_ms: int | None


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
    # What the batch's assembling calls left open per partition they saw (None: nothing).
    status: dict[tuple[str, int], OpenTxn | None] = field(default_factory=dict)


class ProgressReporter:
    """Keeps totals and each partition's open transaction; prints one line per batch."""

    def __init__(self, enabled: bool, metrics: PipelineMetrics | None = None) -> None:
        self._enabled = enabled
        self._metrics = metrics
        self._lock = threading.Lock()
        self._pending: dict[int, BatchStats] = {}
        # The last status the assembler gave each partition. A partition it has not spoken of
        # since this process started counts as closed: a slot says its open transactions
        # whenever it runs, so one open across a restart shows from its slot's next records.
        self._open: dict[tuple[str, int], OpenTxn | None] = {}
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
            self._pending[stats.batch_id] = stats
            self._open.update(stats.status)
            now = time.time()
            open_since = {key: _since(txn, now) for key, txn in self._open.items()}
            self.open_transactions = sum(since is not None for since in open_since.values())
        if self._metrics is not None:
            self._metrics.on_batch(stats)
            self._metrics.on_open(open_since)

    def on_progress(self, batch_id: int, input_rows: int) -> None:
        """Spark's progress for ``batch_id``: print the batch's line."""
        with self._lock:
            stats = self._pending.pop(batch_id, None)
            open_txns = self.open_transactions
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


def _since(txn: OpenTxn | None, now: float) -> float | None:
    """When ``txn`` was opened, in epoch seconds (``now`` if the state kept no time)."""
    if txn is None:
        return None
    return now if txn.opened_at_ms is None else txn.opened_at_ms / 1000


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
        # Where a batch's time went (Spark's own phases: latestOffset, addBatch = ours,
        # walCommit, commitOffsets, ...): the first thing to read when latency is high.
        durations = dict(progress.durationMs or {})
        log.log(
            logging.INFO if progress.numInputRows else logging.DEBUG,
            "batch timing batch_id=%s %s",
            progress.batchId,
            " ".join(f"{k}_ms={v}" for k, v in sorted(durations.items())),
        )
        self._reporter.on_progress(progress.batchId, int(progress.numInputRows))

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        """Nothing new to read."""

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        """The app logs the end itself."""
