"""The task side of loading where the rows are assembled: the label comes by local property."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark import TaskContext

from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.intask import LOAD_PROPERTY, NoLoadJobError, TaskBatch, TaskLoader
from sinks.starrocks.loader import PartitionLoader, TableReport
from sinks.starrocks.sink import StarRocksSink

pytestmark = pytest.mark.unit

OPTIONS = {
    "load-url": "fe:8030",
    "jdbc-url": "jdbc:mysql://fe:9030",
    "database-name": "shop",
    "table-name": "orders,order_items",
    "username": "u",
    "password": "pw-secret",
}
ROWS = [
    ("order_items", "UPSERT", '{"id":1}', "cdc", 0, "t1"),
    ("orders", "UPSERT", '{"id":1}', "cdc", 0, "t1"),
]
TALLY = [{"topic": "cdc", "partition": 0, "_ts_rows": 2}]


@pytest.fixture
def task() -> Iterator[TaskContext]:
    """A PySpark task context as a Python worker has it (attempt 0, no properties)."""
    context = TaskContext._getOrCreate()
    context._attemptNumber = 0
    context._localProperties = {}
    yield context
    TaskContext._setTaskContext(None)  # resets it, as Spark does between tasks


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, list[Any]]]:
    """What PartitionLoader.load was given (no HTTP)."""
    seen: list[tuple[Any, list[Any]]] = []

    def load(self: PartitionLoader, rows: Any) -> list[TableReport]:
        rows = list(rows)
        seen.append((self.plan, rows))
        return [TableReport(table=t, rows=1) for t, *_ in rows]

    monkeypatch.setattr(PartitionLoader, "load", load)
    return seen


def loader() -> TaskLoader:
    return TaskLoader(StarRocksSinkConfig.from_options(OPTIONS))


def test_the_label_comes_from_the_jobs_local_property(task, loads) -> None:
    task._localProperties = {LOAD_PROPERTY: TaskBatch(7, "cdc-q-7-1").to_property()}
    reports = loader()(ROWS, TALLY)
    ((plan, rows),) = loads
    assert (plan.labels, plan.multi, plan.batch_id) == ({"*": "cdc-q-7-1"}, True, 7)
    assert rows == ROWS
    assert [r["table"] for r in reports] == ["order_items", "orders", ""]
    assert reports[-1]["tally"] is not None
    assert '"_ts_rows":2' in reports[-1]["tally"]


def test_a_task_outside_a_load_job_refuses_rather_than_drop_its_rows(task, loads) -> None:
    with pytest.raises(NoLoadJobError, match=LOAD_PROPERTY):
        loader()(ROWS, TALLY)
    assert loads == []


def test_a_read_through_loads_nothing_and_reports_nothing(task, loads) -> None:
    task._localProperties = {LOAD_PROPERTY: TaskBatch(7, None).to_property()}
    assert loader()(ROWS, TALLY) == []
    assert loads == []


def test_a_re_run_task_loads_nothing_and_fails_the_attempt(task, loads) -> None:
    task._localProperties = {LOAD_PROPERTY: TaskBatch(7, "cdc-q-7-0").to_property()}
    task._attemptNumber = 1
    (report,) = loader()(ROWS, TALLY)
    assert loads == []
    assert report["error_kind"] == "transient"
    assert "task attempt 1" in report["error"]
    assert "batch 7" in report["error"]


def test_the_loader_pickles_with_its_settings() -> None:
    from pyspark import cloudpickle

    clone = pickle.loads(cloudpickle.dumps(loader()))
    assert clone.config.password.reveal() == "pw-secret"


@pytest.mark.parametrize(
    ("extra", "loads_in_task"),
    [
        ({}, True),
        ({"sink.load-in-task": "false"}, False),
        ({"sink.transaction.multi-table.enabled": "false"}, False),
        ({"sink.filtered-rows": "dead-letter"}, False),
    ],
)
def test_the_sink_gives_a_task_loader_only_where_one_label_serves_the_batch(
    extra: dict[str, str], loads_in_task: bool
) -> None:
    sink = StarRocksSink.from_options({**OPTIONS, **extra}, lambda: "q")
    assert (sink.task_loader() is not None) is loads_in_task


def test_a_sink_whose_tasks_load_needs_the_tally() -> None:
    sink = StarRocksSink.from_options(OPTIONS, lambda: "q")
    assert sink.task_loader() is not None
    with pytest.raises(ValueError, match="tally"):
        sink.write_batch(None, 0)  # refused before the frame is read


def test_a_re_run_load_job_task_loads_nothing_and_fails_the_attempt(task, loads) -> None:
    import pyarrow as pa

    from sinks.starrocks.loader import LoadPlan

    task._attemptNumber = 2
    plan = LoadPlan(StarRocksSinkConfig.from_options(OPTIONS), {"*": "cdc-q-3-0"}, True, 3)
    (batch,) = PartitionLoader(plan)(iter([pa.RecordBatch.from_pylist([{"table": "orders"}])]))
    (report,) = batch.to_pylist()
    assert loads == []
    assert report["error_kind"] == "transient"
    assert "a load task (task attempt 2) of batch 3" in report["error"]


class _CountEveryRow:
    """A tally that lists every row it is given (sinks.base.Tally)."""

    columns = ("table", "kind")

    def __call__(self, batch: Any) -> list[dict[str, Any]]:
        return [{"kind": kind} for kind in batch.column("kind").to_pylist()]


def test_the_load_job_counts_the_assemblers_status_rows_and_loads_only_rows_with_a_table(
    task, loads
) -> None:
    import pyarrow as pa

    from sinks.base import decode_tally
    from sinks.starrocks.loader import LoadPlan

    plan = LoadPlan(
        StarRocksSinkConfig.from_options(OPTIONS), {"*": "cdc-q-3-0"}, True, 3, _CountEveryRow()
    )
    rows = [
        {"table": None, "op": None, "row": None, "topic": "cdc", "partition": 0, "txn_id": "t2",
         "kind": "STATUS"},
        {"table": "orders", "op": "UPSERT", "row": '{"id":1}', "topic": "cdc", "partition": 0,
         "txn_id": "t1", "kind": "ROW"},
    ]  # fmt: skip
    (batch,) = PartitionLoader(plan)(iter([pa.RecordBatch.from_pylist(rows)]))
    ((_, loaded),) = loads
    assert loaded == [("orders", "UPSERT", '{"id":1}', "cdc", 0, "t1")]
    tally = [r["tally"] for r in batch.to_pylist() if r["tally"] is not None]
    assert decode_tally(tally) == [{"kind": "STATUS"}, {"kind": "ROW"}]
