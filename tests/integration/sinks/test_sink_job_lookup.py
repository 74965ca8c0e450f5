"""The sink finds its load job's stages by the job's own tag, not by listing the job group.

A streaming query runs every micro-batch's jobs in one job group (its run id), and Spark keeps
the last ``spark.ui.retainedJobs`` (1,000) of them. Listing the group crosses py4j once per job
it holds: 80-200 ms a call here once a query had run 1,000 jobs, twice a batch. Emulator, real
local Spark.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from sinks.starrocks import sink as sink_module

from .conftest import batch, make_sink, order_txn

pytestmark = pytest.mark.integration

QID = "ffffffff-0000-0000-0000-000000000000"
#: Py4j's command that releases a Java object (``py4j.protocol.MEMORY_COMMAND_NAME``).
RELEASE = "m\n"


def py4j_calls(spark: Any, monkeypatch: pytest.MonkeyPatch, run: Any) -> int:
    """The number of commands the driver sent to the JVM while ``run()`` ran.

    Py4j's "release this object" commands do not count: they come whenever Python collects a
    proxy, from earlier work as much as from ``run()``.
    """
    calls = 0
    client = type(spark.sparkContext._gateway._gateway_client)
    send = client.send_command

    def counting(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        if not command.startswith(RELEASE):
            calls += 1
        return send(self, command, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(client, "send_command", counting)
        run()
    return calls


def test_a_batch_costs_the_same_py4j_calls_however_many_jobs_the_group_holds(
    sr, spark, monkeypatch
):
    sc = spark.sparkContext
    sink = make_sink(sr, query_id=QID)
    sink.open()
    group = "job-lookup"
    sc.setJobGroup(group, "a query's run id stands for this")
    one = sc.parallelize([1], 1)
    calls = []
    try:
        for batch_id, more_jobs in enumerate((1, 60)):
            for _ in range(more_jobs):
                one.count()
            df = batch(spark, order_txn(batch_id + 1, offset=10 * batch_id))
            calls.append(py4j_calls(spark, monkeypatch, partial(sink.write_batch, df, batch_id)))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sink.close()
    # 60 more jobs in the group: listing it would have added 60 calls, twice.
    assert abs(calls[1] - calls[0]) < 20, calls


def test_the_rerun_check_sees_exactly_the_load_job(sr, spark, monkeypatch):
    seen: list[set[int]] = []
    check = sink_module.rerun_stages

    def spy(tracker: Any, job_ids: set[int]) -> list[int]:
        seen.append(set(job_ids))
        return check(tracker, job_ids)

    monkeypatch.setattr(sink_module, "rerun_stages", spy)
    sc = spark.sparkContext
    sink = make_sink(sr, query_id=QID)
    sink.open()
    # As in a streaming query's micro-batch: no adaptive execution, which would submit the
    # shuffle's map stage as a job of its own.
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        before = set(sc.statusTracker().getJobIdsForGroup(None))
        result = sink.write_batch(batch(spark, order_txn(7, offset=70)), 5)
        ran = set(sc.statusTracker().getJobIdsForGroup(None)) - before
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
        sink.close()
    assert result.outcome == "committed"
    # One load job per batch attempt, found by its tag, and none of the jobs around it.
    assert len(seen) == 1
    assert len(seen[0]) == 1
    assert seen[0] <= ran
    # The tag does not outlive the load job.
    assert not [t for t in sc.getJobTags() if t.startswith(sink_module.LOAD_JOB_TAG)]
