import pytest

from sinks.starrocks.client import Backoff
from sinks.starrocks.sink import FAULT_POINTS, BatchResult

pytestmark = pytest.mark.unit


def test_batch_result_summary_properties():
    result = BatchResult(
        batch_id=3,
        outcome="committed",
        labels=("cdc-q-3-0",),
        rows_per_table={"orders": 2, "order_items": 5},
        bytes_per_table={"orders": 10, "order_items": 20},
    )
    assert result.rows == 7
    assert result.bytes == 30
    assert result.label == "cdc-q-3-0"
    assert not result.skipped
    assert BatchResult(batch_id=3, outcome="already_applied").skipped
    assert BatchResult(batch_id=3, outcome="empty").label is None


def test_backoff_grows_and_is_capped():
    backoff = Backoff(base_s=0.1, cap_s=1.0)
    delays = [backoff.delay(n) for n in range(10)]
    assert all(0.05 <= d <= 1.0 for d in delays)
    assert max(delays[6:]) <= 1.0
    assert delays[0] <= 0.1


def test_fault_points_are_named():
    assert "after_commit" in FAULT_POINTS
    assert "after_prepare" in FAULT_POINTS
