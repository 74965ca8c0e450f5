"""Per-table mode (StarRocks 2.4-3.x): one label per table, prepare all, then commit all."""

import pytest

from .conftest import DB, batch, make_sink, order_txn, table_rows

pytestmark = pytest.mark.integration

QID = "eeeeeeee-0000-0000-0000-000000000000"
PER_TABLE = {"sink.transaction.multi-table.enabled": "false"}


class SimulatedCrash(BaseException):
    pass


def crash_at(point):
    def hook(name):
        if name == point:
            raise SimulatedCrash(name)

    return hook


def rows():
    return order_txn(1) + order_txn(2, partition=1, items=3)


def labels_of(batch_id, attempt):
    return {
        t: f"t-{QID}-{batch_id}-{attempt}-{t}" for t in ("order_items", "orders", "_cdc_progress")
    }


def assert_applied_once(sr):
    assert table_rows(sr, "orders") == [(1, 2, 32, 1), (2, 3, 63, 1)]
    assert len(table_rows(sr, "order_items")) == 5
    assert len(sr.sql(f"SELECT * FROM {DB}._cdc_progress")) == 2


def test_per_table_happy_path(sr, spark):
    sink = make_sink(sr, query_id=QID, **PER_TABLE)
    sink.open()
    result = sink.write_batch(batch(spark, rows()), 0)
    assert result.outcome == "committed"
    assert set(result.labels) == set(labels_of(0, 0).values())
    assert_applied_once(sr)
    assert set(sr.control.labels(DB).values()) == {"VISIBLE"}
    # replay
    again = make_sink(sr, query_id=QID, **PER_TABLE).write_batch(batch(spark, rows()), 0)
    assert again.outcome == "already_applied"
    assert_applied_once(sr)


@pytest.mark.parametrize("point", ["after_prepare"])  # the others: tests/unit/sinks
def test_prepared_batch_is_committed_on_recovery_without_reloading(sr, spark, point):
    crashed = make_sink(sr, query_id=QID, fault_hook=crash_at(point), **PER_TABLE)
    crashed.open()
    with pytest.raises(SimulatedCrash):
        crashed.write_batch(batch(spark, rows()), 2)
    states = sr.control.labels(DB)
    assert "PREPARED" in states.values()

    result = make_sink(sr, query_id=QID, **PER_TABLE).write_batch(batch(spark, rows()), 2)
    assert result.outcome == "recovered"
    assert result.attempt == 0
    assert_applied_once(sr)
    # no second attempt was begun: the prepared data was committed, not loaded again
    assert set(sr.control.labels(DB)) == set(labels_of(2, 0).values())
    assert set(sr.control.labels(DB).values()) == {"VISIBLE"}


def test_batch_not_prepared_everywhere_is_rolled_back_and_redone(sr, spark):
    crashed = make_sink(sr, query_id=QID, fault_hook=crash_at("after_load"), **PER_TABLE)
    crashed.open()
    with pytest.raises(SimulatedCrash):
        crashed.write_batch(batch(spark, rows()), 1)
    result = make_sink(sr, query_id=QID, **PER_TABLE).write_batch(batch(spark, rows()), 1)
    assert result.outcome == "committed"
    assert result.attempt == 1
    states = sr.control.labels(DB)
    assert {states[label] for label in labels_of(1, 0).values()} == {"ABORTED"}
    assert {states[label] for label in labels_of(1, 1).values()} == {"VISIBLE"}
    assert_applied_once(sr)


def test_per_table_load_failure_retries_every_table(sr, spark):
    sink = make_sink(sr, query_id=QID, **PER_TABLE)
    sink.open()
    sr.control.fail_next("load", 1, http_status=500, status="INTERNAL_ERROR", message="boom")
    result = sink.write_batch(batch(spark, rows()), 0)
    assert result.attempt == 1
    assert_applied_once(sr)


def test_partly_committed_batch_with_an_aborted_table_is_terminal(sr, spark):
    """Some tables committed, one never prepared (expired): stop, say which tables miss it."""
    from sinks.exceptions import SinkTerminalError
    from sinks.starrocks.client import StarRocksClient

    sink = make_sink(sr, query_id=QID, **PER_TABLE)
    sink.open()
    client = StarRocksClient(sink.config)
    labels = labels_of(7, 0)
    body = {
        "orders": b'[{"order_id":1,"item_count":2,"total_amount":32,"version":1}]',
        "_cdc_progress": b'[{"pipeline":"test","topic":"cdc","kafka_partition":0,"last_offset":4}]',
    }
    for table, data in body.items():
        client.begin(labels[table], multi=False, table=table)
        client.load(labels[table], table, data, multi=False)
        client.prepare(labels[table], table=table)
        client.commit(labels[table], multi=False, table=table)
    client.begin(labels["order_items"], multi=False, table="order_items")
    client.rollback(labels["order_items"], multi=False, table="order_items")

    with pytest.raises(
        SinkTerminalError, match=r"committed for .*not prepared for \['order_items'\]"
    ):
        sink.write_batch(batch(spark, rows()), 7)


def test_crashed_attempt_whose_be_contexts_are_gone_is_cancelled_at_the_fe(sr, spark):
    """Audit finding 8: rollback answers TXN_NOT_EXISTS; the FE cancel API aborts the label."""
    crashed = make_sink(sr, query_id=QID, fault_hook=crash_at("after_load"), **PER_TABLE)
    crashed.open()
    with pytest.raises(SimulatedCrash):
        crashed.write_batch(batch(spark, rows()), 3)
    sr.control.restart()  # BE contexts of the PREPARE labels are gone
    result = make_sink(sr, query_id=QID, **PER_TABLE).write_batch(batch(spark, rows()), 3)
    assert (result.outcome, result.attempt) == ("committed", 1)
    states = sr.control.labels(DB)
    assert {states[label] for label in labels_of(3, 0).values()} == {"ABORTED"}
    assert_applied_once(sr)
