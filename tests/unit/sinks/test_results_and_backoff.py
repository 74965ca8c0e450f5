import pytest

from sinks.starrocks.committer import Outcome
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.sink import BatchResult

pytestmark = pytest.mark.unit


def test_batch_result_summary_properties():
    result = BatchResult(
        batch_id=3,
        outcome=Outcome.COMMITTED,
        labels=("cdc-q-3-0",),
        rows_per_table={"orders": 2, "order_items": 5},
        bytes_per_table={"orders": 10, "order_items": 20},
    )
    assert result.rows == 7
    assert result.bytes == 30
    assert result.label == "cdc-q-3-0"
    assert not result.skipped
    assert result.outcome == "committed"  # a StrEnum: logs and old callers see the word
    assert BatchResult(batch_id=3, outcome=Outcome.ALREADY_APPLIED).skipped
    assert BatchResult(batch_id=3, outcome=Outcome.EMPTY).label is None


def test_backoff_grows_and_is_capped():
    policy = RetryPolicy(base_s=0.1, cap_s=1.0)
    delays = [policy.delay(n) for n in range(10)]
    assert all(0.05 <= d <= 1.0 for d in delays)
    assert max(delays[6:]) <= 1.0
    assert delays[0] <= 0.1


def test_policy_deadline_uses_the_injected_clock():
    now = [0.0]
    policy = RetryPolicy(check_timeout_s=5.0, clock=lambda: now[0])
    deadline = policy.deadline()
    assert not policy.expired(deadline)
    now[0] = 5.0
    assert policy.expired(deadline)
