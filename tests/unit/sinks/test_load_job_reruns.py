"""The load job's stage re-runs are caught on the driver (review finding 12): a stage re-run
after a fetch failure starts its tasks at attempt 0 again, past the executors' own guard."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sinks.starrocks.sink import rerun_stages

pytestmark = pytest.mark.unit


class Tracker:
    """Spark's StatusTracker answers, for two jobs of three stages."""

    def __init__(self, attempts: dict[int, int]) -> None:
        self.jobs = {7: [1, 2], 8: [3]}
        self.attempts = attempts

    def getJobInfo(self, job_id: int) -> Any:
        return SimpleNamespace(stageIds=self.jobs[job_id])

    def getStageInfo(self, stage_id: int) -> Any:
        return SimpleNamespace(currentAttemptId=self.attempts.get(stage_id, 0))


def test_only_stages_spark_ran_twice_are_reported() -> None:
    assert rerun_stages(Tracker({}), {7, 8}) == []
    assert rerun_stages(Tracker({2: 1}), {7, 8}) == [2]
    assert rerun_stages(Tracker({2: 1, 3: 2}), {8}) == [3]
