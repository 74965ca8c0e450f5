"""Prometheus metrics of the pipeline, served by the driver (``pipeline.metrics-port``).

Fed by the progress reporter: once per written batch (what the batch committed) and once per
Spark progress event (what was consumed). Labels are few and bounded (topic, partition,
table, reason, action), never a label or a transaction id. docs/metrics.md lists every metric
and the alert rules we suggest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from app.progress import BatchStats

# Seconds: a commit takes tens of ms to seconds; BEGIN -> visible is a trigger or more.
_COMMIT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_VISIBLE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


class PipelineMetrics:
    """The pipeline's metrics, in a registry of its own (several pipelines per process in tests)."""

    def __init__(
        self,
        pipeline: str,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self._clock = clock
        self._pipeline = pipeline
        r = self.registry
        self.batches = Counter(
            "cdc_batches", "Micro-batches written, by sink outcome", ["outcome"], registry=r
        )
        self.rows = Counter("cdc_rows_committed", "Rows made visible in StarRocks", registry=r)
        self.transactions = Counter(
            "cdc_transactions_committed", "Source transactions made visible", registry=r
        )
        self.rejected_records = Counter(
            "cdc_rejected_records",
            "Records dead-lettered (or failed), by reason",
            ["reason"],
            registry=r,
        )
        self.rejected_transactions = Counter(
            "cdc_rejected_transactions", "Source transactions dead-lettered", registry=r
        )
        self.recovery = Counter(
            "cdc_recovery_actions",
            "Recovery steps: a replayed batch found committed (skipped_batch), attempts "
            "rolled back before the batch committed (rolled_back_attempt)",
            ["action"],
            registry=r,
        )
        self.commit_seconds = Histogram(
            "cdc_commit_seconds",
            "Sink time per batch (begin to commit)",
            buckets=_COMMIT_BUCKETS,
            registry=r,
        )
        self.visible_seconds = Histogram(
            "cdc_begin_to_visible_seconds",
            "Source transaction time (source_ts_ms) to visible in StarRocks",
            buckets=_VISIBLE_BUCKETS,
            registry=r,
        )
        self.committed_offset = Gauge(
            "cdc_last_committed_offset",
            "Last source offset whose transaction is visible (or dead-lettered)",
            ["topic", "partition"],
            registry=r,
        )
        self.open_transactions = Gauge(
            "cdc_open_transactions", "Partitions with a source transaction still open", registry=r
        )
        self.oldest_open_seconds = Gauge(
            "cdc_oldest_open_transaction_seconds",
            "Age of the partition's open source transaction, from the batch that read its "
            "first record (0: none)",
            ["topic", "partition"],
            registry=r,
        )
        self.last_commit_time = Gauge(
            "cdc_last_commit_timestamp_seconds",
            "Wall time of the last committed batch",
            registry=r,
        )
        self._open_since: dict[tuple[str, int], float | None] = {}
        # The highest batch id whose rows were counted (the query's ids only grow, but for a
        # replay).
        self._counted_through = -1

    def _age(self, since: float) -> float:
        return self._clock() - since

    def serve(self, port: int, host: str) -> int:
        """Serve ``/metrics`` on ``host:port`` (0 = any free port); returns the port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return int(server.server_port)

    def on_batch(self, stats: BatchStats, now_s: float | None = None) -> None:
        """A written batch (driver, right after the sink returned)."""
        now = time.time() if now_s is None else now_s
        self.batches.labels(stats.outcome).inc()
        if stats.skipped:
            self.recovery.labels("skipped_batch").inc()
        if stats.attempt:
            self.recovery.labels("rolled_back_attempt").inc(stats.attempt)
        if stats.skipped:
            return  # an earlier run made it visible and was counted then
        if stats.label is not None:
            self.commit_seconds.observe(stats.sink_ms / 1000)
            self.last_commit_time.set(now)
        for (topic, partition), offset in stats.emitted.items():
            self.committed_offset.labels(topic, str(partition)).set(offset)
        if stats.batch_id <= self._counted_through:
            # Counted when first loaded behind (committing): its commit failed, app/main.py
            # restarted the query and Spark replayed it, the same rows made visible once.
            return
        self._counted_through = stats.batch_id
        self.rows.inc(stats.rows)
        self.transactions.inc(stats.transactions)
        self.rejected_transactions.inc(stats.rejected_transactions)
        for reason, count in stats.rejects_by_reason.items():
            self.rejected_records.labels(reason).inc(count)
        for source_ms in stats.source_ts_ms:
            self.visible_seconds.observe(max(0.0, now - source_ms / 1000))

    def on_open(self, open_since: Mapping[tuple[str, int], float | None]) -> None:
        """When each partition's open transaction began (``None``: none open), epoch seconds."""
        self.open_transactions.set(sum(since is not None for since in open_since.values()))
        for key, since in open_since.items():
            if key in self._open_since and self._open_since[key] == since:
                continue
            self._open_since[key] = since
            child = self.oldest_open_seconds.labels(key[0], str(key[1]))
            if since is None:
                child.set_function(lambda: 0.0)
            else:
                # Aged at scrape time: an idle pipeline runs no batch (pipeline.idle-batches),
                # and the age of an abandoned transaction must still grow for the alert.
                child.set_function(partial(self._age, since))
