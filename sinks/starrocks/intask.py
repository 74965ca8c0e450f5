"""Loading in the task that assembles: the batch's rows go to StarRocks where they are made.

The default load job (:class:`sinks.starrocks.sink.SparkLoadJob`) takes the assembler's output
rows back into the JVM, shuffles them by table and hands them to a second Python function that
loads them: each row crosses the Python/JVM boundary three times. In multi-table mode every
table shares one label, so the task that assembled a slot's transactions can load them itself
and return only its report rows (:data:`sinks.starrocks.loader.REPORT_FIELDS`).

Who does what:

* driver, per batch (:func:`task_batch`): the sink begins the label, then runs the batch's one
  Spark job with a Spark local property naming the batch and its label; Spark sends local
  properties with every task of the job, and PySpark hands them to the Python worker.
* executor, per task (:class:`TaskLoader`): reads that property and loads the rows into the
  label, one table after the other, one chunk in flight per table.

A task that finds no property runs outside a load job: it refuses to run rather than drop its
rows. A read-through (a replayed batch already committed) sets ``load: false``: the task keeps
its state and loads nothing.

Rows of one key come from one Kafka partition, whose slot is one task, so two tasks never load
the same key; they may load the same table at the same time, which StarRocks serializes per
table (``TXN_IN_PROCESSING``, retried in place by the client).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sinks.base import encode_tally
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.loader import (
    ANY_TABLE,
    REPORT_FIELDS,
    LoadPlan,
    PartitionLoader,
    TableReport,
    rerun_report,
)

if TYPE_CHECKING:
    from pyspark import SparkContext

#: The Spark local property that carries :class:`TaskBatch` from the driver to the tasks.
LOAD_PROPERTY = "txn-cdc.load"
#: Columns of the rows a loading task returns (the report rows, ``loader.report_schema``).
REPORT_COLUMNS = [name for name, _ in REPORT_FIELDS]


class NoLoadJobError(RuntimeError):
    """A loading task ran outside a load job or read-through: its rows would have no label."""


@dataclass(frozen=True)
class TaskBatch:
    """What the tasks of one batch's job need: the label, or that they must not load."""

    batch_id: int
    label: str | None  # None: read through, load nothing

    def to_property(self) -> str:
        """The local property's value."""
        return json.dumps({"batch_id": self.batch_id, "label": self.label})

    @classmethod
    def from_property(cls, value: str) -> TaskBatch:
        """Parse :meth:`to_property`."""
        data = json.loads(value)
        return cls(batch_id=int(data["batch_id"]), label=data["label"])


@contextmanager
def task_batch(sc: SparkContext, batch: TaskBatch) -> Iterator[None]:
    """Run the jobs of this block with ``batch`` in every task (driver, the batch's thread)."""
    sc.setLocalProperty(LOAD_PROPERTY, batch.to_property())
    try:
        yield
    finally:
        # None removes the property: a later job on this thread is no load job.
        sc.setLocalProperty(LOAD_PROPERTY, None)  # type: ignore[arg-type]  # Spark takes None


class TaskLoader:
    """Loads one task's rows into the batch's label (executor; picklable, no session).

    Built on the driver at query start with the sink's settings; called by the assembling
    function once per group and batch.
    """

    def __init__(self, config: StarRocksSinkConfig) -> None:
        self.config = config

    def __call__(
        self, rows: Iterable[tuple[Any, ...]], tally_rows: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Load ``(table, op, row, topic, partition, txn_id)`` tuples, grouped by table.

        Returns the report rows (one per table, one with ``tally_rows``), or none when the
        batch is read through.

        Raises:
            NoLoadJobError: The task runs outside the sink's load job (a wiring bug): failing
                the batch keeps its rows in Kafka, where a restart finds them.
        """
        from pyspark import TaskContext

        context = TaskContext.get()
        value = context.getLocalProperty(LOAD_PROPERTY) if context is not None else None
        if value is None:
            msg = (
                f"an assembling task that loads ran without the Spark local property "
                f"{LOAD_PROPERTY}: only the StarRocks sink's load job may run this query's "
                "batches (the batch fails; its records stay in Kafka)"
            )
            raise NoLoadJobError(msg)
        batch = TaskBatch.from_property(value)
        if batch.label is None:
            return []
        attempt = int(context.attemptNumber()) if context is not None else 0
        if attempt > 0:
            return [rerun_report("an assembling task", attempt, batch.batch_id).as_dict()]
        plan = LoadPlan(self.config, {ANY_TABLE: batch.label}, True, batch.batch_id)
        reports = PartitionLoader(plan).load(rows)
        reports.append(TableReport(table="", tally=encode_tally(tally_rows)))
        return [r.as_dict() for r in reports]
