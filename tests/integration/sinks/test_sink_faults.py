"""Every error class the sink meets, injected through the emulator's fault knobs."""

import pytest

from common.errors import Terminal
from devstack.starrocks.faults import write_lock_timeout
from sinks.exceptions import SinkTerminalError

from .conftest import DB, batch, make_sink, order_txn, table_rows

pytestmark = pytest.mark.integration

QID = "dddddddd-0000-0000-0000-000000000000"


def rows():
    return order_txn(1) + order_txn(2, partition=1)


def test_5xx_on_load_retries_the_batch_under_a_new_label(sr, spark):
    sink = make_sink(sr, query_id=QID)
    sink.open()
    sr.control.fail_next("load", 1, http_status=500, status="INTERNAL_ERROR", message="be crashed")
    result = sink.write_batch(batch(spark, rows()), 0)
    assert result.outcome == "committed"
    assert result.attempt == 1
    assert sr.control.labels(DB) == {f"t-{QID}-0-0": "ABORTED", f"t-{QID}-0-1": "VISIBLE"}
    assert len(table_rows(sr, "orders")) == 2
    assert len(table_rows(sr, "order_items")) == 4


def test_terminal_load_error_rolls_back_and_raises(sr, spark):
    sink = make_sink(sr, query_id=QID)
    sink.open()
    sr.control.fail_next("load", 1, status="ANALYSIS_ERROR", message="column mismatch")
    with pytest.raises(SinkTerminalError, match="column mismatch"):
        sink.write_batch(batch(spark, rows()), 0)
    assert sr.control.labels(DB) == {f"t-{QID}-0-0": "ABORTED"}
    assert table_rows(sr, "orders") == []


def test_filtered_rows_are_terminal_and_nothing_is_visible(sr, spark):
    sink = make_sink(sr, query_id=QID)
    sink.open()
    bad = order_txn(3)
    bad[0]["row"] = '{"order_id": null, "item_count": 1}'  # NOT NULL key column
    with pytest.raises(SinkTerminalError) as info:
        sink.write_batch(batch(spark, rows() + bad), 0)
    assert isinstance(info.value, Terminal)
    assert "filter" in str(info.value).lower() or "null" in str(info.value).lower()
    assert table_rows(sr, "orders") == []
    assert set(sr.control.labels(DB).values()) == {"ABORTED"}


def test_too_many_running_txns_is_terminal_with_a_clear_message(sr, spark):
    sink = make_sink(sr, query_id=QID)
    sink.open()
    sr.control.too_many_txns(1)
    with pytest.raises(SinkTerminalError, match="max_running_txn_num_per_db"):
        sink.write_batch(batch(spark, rows()), 0)


def test_5xx_on_commit_is_retried_on_the_same_label(sr, spark):
    sink = make_sink(sr, query_id=QID)
    sink.open()
    sr.control.fail_next("commit", 2, http_status=503, status="SERVICE_UNAVAILABLE", message="busy")
    result = sink.write_batch(batch(spark, rows()), 0)
    assert result.outcome == "committed"
    assert result.attempt == 0
    assert sr.control.labels(DB) == {f"t-{QID}-0-0": "VISIBLE"}


def test_commit_of_an_aborted_transaction_retries_the_batch(sr, spark):
    """The server aborted the txn (e.g. its timeout) before commit: new label, data once."""
    from sinks.starrocks.client import StarRocksClient

    def abort_before_commit(point):
        if point == "before_commit" and not fired:
            fired.append(point)
            label = f"t-{QID}-0-0"
            StarRocksClient(sink.config).rollback(label, multi=True)

    fired: list[str] = []
    sink = make_sink(sr, query_id=QID, fault_hook=abort_before_commit)
    sink.open()
    result = sink.write_batch(batch(spark, rows()), 0)
    assert result.attempt == 1
    assert len(table_rows(sr, "orders")) == 2


def test_slow_load_within_timeouts(sr, spark):
    sink = make_sink(sr, query_id=QID)
    sink.open()
    sr.control.delay("load", 0.5, 2)
    assert sink.write_batch(batch(spark, rows()), 0).outcome == "committed"


def test_commit_answered_ok_that_failed_is_redone_under_the_next_label(sr, spark):
    """Audit finding 2: some 4.0.x FE builds answer OK to a multi-table commit that failed."""
    sink = make_sink(sr, query_id=QID)
    sink.open()
    sr.control.commit_ok_but_failed(1)
    result = sink.write_batch(batch(spark, rows()), 0)
    assert (result.outcome, result.attempt) == ("committed", 1)
    assert sr.control.labels(DB) == {f"t-{QID}-0-0": "ABORTED", f"t-{QID}-0-1": "VISIBLE"}
    assert len(table_rows(sr, "orders")) == 2


@pytest.mark.parametrize(("multi", "attempt"), [("true", 1), ("false", 0)])
def test_commit_refused_by_a_write_lock_timeout_is_settled_in_the_same_batch(
    sr, spark, multi, attempt
):
    """The FE's commit fails on the database lock. A multi-table task rolls back: the batch
    goes again under the next label. A single-table txn stays PREPARED and nothing else
    would commit it: the sink sends the commit again on the same label."""
    sink = make_sink(sr, query_id=QID, **{"sink.transaction.multi-table.enabled": multi})
    sink.open()
    sr.control.commit_failed(write_lock_timeout(DB))
    result = sink.write_batch(batch(spark, rows()), 0)
    assert (result.outcome, result.attempt) == ("committed", attempt)
    states = set(sr.control.labels(DB).values())
    assert states == ({"ABORTED", "VISIBLE"} if attempt else {"VISIBLE"})
    assert len(table_rows(sr, "orders")) == 2
    assert len(table_rows(sr, "order_items")) == 4
    assert sr.control.faults() == []
