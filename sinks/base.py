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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


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
    def write_batch(self, batch_df: DataFrame, batch_id: int) -> Any:
        """Write one micro-batch (driver, from ``foreachBatch``); idempotent per batch id.

        Calling it again with the same ``batch_id`` (after a crash or an exception) and the
        same data is safe: an already-applied batch is detected and skipped.

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
