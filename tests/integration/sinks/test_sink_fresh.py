"""Which batches the sink writes without the checks for an earlier attempt (``BatchPlan.fresh``).

Only the batch right after one the same sink wrote in this process, with nothing failing in
between, skips them; a run's first batch, a replay after a crash, a gap in the batch ids and
another query id are checked. Emulator, real local Spark.
"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.starrocks.recording import RecordedApi
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.sink import StarRocksSink
from sinks.starrocks.txnapi import LoadJob, TxnApi

from .conftest import batch, options, order_txn, points, table_rows

pytestmark = pytest.mark.integration

QID = "ffffffff-0000-0000-0000-000000000000"
OTHER_QID = "ffffffff-0000-0000-0000-000000000001"
# The calls of a batch with no earlier attempt to look for: begin, the progress rows, commit,
# and the commit's confirmation. A checked batch asks the label's state first.
FRESH = ["begin", "load", "commit", "get_load_state"]
CHECKED = ["get_load_state", "begin", "get_load_state", "get_load_state", "load", "commit"]


class SimulatedCrash(BaseException):
    """Like kill -9: not an Exception, so no cleanup path of the sink runs."""


def recording_sink(
    sr: Any, query_ids: list[str], crash_at: tuple[int, str] | None = None
) -> tuple[StarRocksSink, list[str]]:
    """An opened sink whose query id is ``query_ids[-1]``, and its last batch's FE calls.

    ``crash_at``: (batch id, crash point) where the sink crashes once.
    """
    cfg = StarRocksSinkConfig.from_options(options(sr))
    sink = StarRocksSink(cfg, lambda: query_ids[-1])
    calls: list[str] = []
    crashes = [crash_at]

    def crash(batch_id: int, point: str) -> None:
        if (batch_id, point) in crashes:
            crashes.clear()  # once: the replay goes through
            raise SimulatedCrash(point)

    def instrument(batch_id: int, api: TxnApi, job: LoadJob) -> tuple[TxnApi, LoadJob]:
        calls.clear()
        return points(lambda point: crash(batch_id, point))(batch_id, RecordedApi(api, calls), job)

    sink.instrument = instrument
    sink.open()
    return sink, calls


def orders(n: int) -> list[dict[str, Any]]:
    return order_txn(n, offset=10 * n)


def test_the_batch_after_a_written_one_skips_the_checks(sr, spark):
    sink, calls = recording_sink(sr, [QID])
    assert sink.write_batch(batch(spark, orders(1)), 0).outcome == "committed"
    assert calls[: len(CHECKED)] == CHECKED
    for batch_id in (1, 2):
        result = sink.write_batch(batch(spark, orders(batch_id + 1)), batch_id)
        assert (result.outcome, result.attempt) == ("committed", 0)
        assert calls == FRESH
    assert [r[0] for r in table_rows(sr, "orders")] == [1, 2, 3]
    assert len(table_rows(sr, "order_items")) == 6


def test_a_replay_after_a_crash_is_checked_and_lands_once(sr, spark):
    sink, calls = recording_sink(sr, [QID], crash_at=(1, "after_load"))
    sink.write_batch(batch(spark, orders(1)), 0)
    with pytest.raises(SimulatedCrash):
        sink.write_batch(batch(spark, orders(2)), 1)
    # The same sink replays batch 1: its attempt 0 is open on the server and must be found.
    result = sink.write_batch(batch(spark, orders(2)), 1)
    assert (result.outcome, result.attempt) == ("committed", 1)
    assert calls[0] == "get_load_state"
    sink.write_batch(batch(spark, orders(3)), 2)
    assert calls == FRESH
    assert [r[0] for r in table_rows(sr, "orders")] == [1, 2, 3]


def test_a_gap_in_batch_ids_or_another_query_is_checked(sr, spark):
    query_ids = [QID]
    sink, calls = recording_sink(sr, query_ids)
    sink.write_batch(batch(spark, orders(1)), 0)
    sink.write_batch(batch(spark, orders(2)), 2)
    assert calls[: len(CHECKED)] == CHECKED
    query_ids.append(OTHER_QID)
    sink.write_batch(batch(spark, orders(3)), 3)
    assert calls[: len(CHECKED)] == CHECKED
    sink.write_batch(batch(spark, orders(4)), 4)
    assert calls == FRESH
    assert [r[0] for r in table_rows(sr, "orders")] == [1, 2, 3, 4]
