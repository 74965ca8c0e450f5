"""The Python workers a query's first batch needs are started before it (app/warmup.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from app.warmup import TASK_MODULE, warm, warm_python_workers


def _facts(frames: Iterator[Any]) -> Iterator[Any]:
    import os
    import sys

    import pandas as pd

    imported = TASK_MODULE in sys.modules  # before this task imports anything
    for _ in frames:
        pass
    yield pd.DataFrame({"pid": [os.getpid()], "imported": [imported]})


def test_one_worker_per_core_imports_what_the_tasks_import(spark: Any) -> None:
    pids = warm(spark)
    assert len(pids) == spark.sparkContext.defaultParallelism == 2, pids
    rows = spark.range(2, numPartitions=2).mapInPandas(_facts, "pid long, imported boolean")
    facts = rows.collect()
    # The next Python tasks start on workers that have the assembler imported already.
    assert all(row.imported for row in facts), facts


def test_the_warm_up_runs_beside_the_caller_and_names_its_job(spark: Any) -> None:
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    thread = warm_python_workers(spark)
    assert thread is not None
    assert thread.daemon
    thread.join(120)
    assert not thread.is_alive()
    deadline = time.monotonic() + 30
    new: set[int] = set()
    while time.monotonic() < deadline and not new:
        new = set(tracker.getJobIdsForGroup()) - before
        time.sleep(0.1)
    [job] = [tracker.getJobInfo(job) for job in new]
    assert job is not None
    assert job.status == "SUCCEEDED", job
    assert job.jobId in tracker.getJobIdsForGroup()
    # The job's description stays with it: later jobs of the caller's thread have none.
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None
