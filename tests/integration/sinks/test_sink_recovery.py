"""Crashes and lost answers: the batch lands exactly once."""

import pytest

from .conftest import DB, batch, make_sink, order_txn, points, table_rows

pytestmark = pytest.mark.integration

QID = "cccccccc-0000-0000-0000-000000000000"


class SimulatedCrash(BaseException):
    """Like kill -9: not an Exception, so no cleanup path of the sink runs."""


def crash_at(point):
    def hook(name):
        if name == point:
            raise SimulatedCrash(name)

    return hook


def rows():
    return order_txn(1, offset=0) + order_txn(2, partition=1, items=3, offset=0)


def assert_applied_once(sr):
    assert table_rows(sr, "orders") == [(1, 2, 32, 1), (2, 3, 63, 1)]
    assert len(table_rows(sr, "order_items")) == 5
    assert len(sr.sql(f"SELECT * FROM {DB}._cdc_progress")) == 2


# Every crash point x server answer runs against the fake StarRocks in
# tests/unit/sinks/test_committer.py; here one point proves the Spark adapter and the emulator.
@pytest.mark.parametrize("point", ["after_load"])
def test_crash_before_commit_rolls_back_and_uses_next_attempt(sr, spark, point):
    crashed = make_sink(sr, query_id=QID, fault_hook=crash_at(point))
    crashed.open()
    with pytest.raises(SimulatedCrash):
        crashed.write_batch(batch(spark, rows()), 3)
    assert table_rows(sr, "orders") == []
    assert set(sr.control.labels(DB).values()) == {"PREPARE"}

    restarted = make_sink(sr, query_id=QID)
    result = restarted.write_batch(batch(spark, rows()), 3)
    assert result.outcome == "committed"
    assert result.attempt == 1
    assert sr.control.labels(DB) == {
        f"t-{QID}-3-0": "ABORTED",
        f"t-{QID}-3-1": "VISIBLE",
    }
    assert_applied_once(sr)


def test_crash_after_commit_is_detected_on_replay(sr, spark):
    crashed = make_sink(sr, query_id=QID, fault_hook=crash_at("after_commit"))
    crashed.open()
    with pytest.raises(SimulatedCrash):
        crashed.write_batch(batch(spark, rows()), 4)
    result = make_sink(sr, query_id=QID).write_batch(batch(spark, rows()), 4)
    assert result.outcome == "already_applied"
    assert_applied_once(sr)
    assert len(sr.control.transactions()) == 1


# A lost answer; a journal restart between the commit and the client's retry, which then
# hears "Can not commit CANCELLED": either way the label (VISIBLE) decides, never a reload.
@pytest.mark.parametrize("fault", ["drop_commit_response", "journal_restart_after_commit"])
def test_commit_with_a_lost_answer_is_settled_by_label_state_not_reloaded(sr, spark, fault):
    sink = make_sink(sr, query_id=QID)
    sink.open()
    getattr(sr.control, fault)(1)
    result = sink.write_batch(batch(spark, rows()), 0)
    assert result.outcome == "committed"
    assert result.attempt == 0
    assert_applied_once(sr)
    assert sr.control.labels(DB) == {f"t-{QID}-0-0": "VISIBLE"}


def test_replay_after_an_fe_journal_restart_is_found_applied_by_the_label_state(sr, spark):
    """Begin, the probe, would now say CANCELLED (a crashed attempt): the label's state,
    asked first for a batch that is not fresh, says VISIBLE."""
    crashed = make_sink(sr, query_id=QID, fault_hook=crash_at("after_commit"))
    crashed.open()
    with pytest.raises(SimulatedCrash):
        crashed.write_batch(batch(spark, rows()), 5)
    sr.control.restart(journal=True)
    result = make_sink(sr, query_id=QID).write_batch(batch(spark, rows()), 5)
    assert result.outcome == "already_applied"
    assert_applied_once(sr)
    assert len(sr.control.transactions()) == 1


def test_unknown_commit_outcome_stops_the_query_and_the_replay_skips(sr, spark):
    """Commit answer lost and the state cannot be read: stop (transient), never guess."""
    from common.errors import Transient

    def arm(point):
        if point == "before_commit":
            sr.control.drop_commit_response(1)
            sr.control.fail_next(
                "get_load_state", 100, http_status=500, status="FAILED", message="fe down"
            )

    sink = make_sink(sr, query_id=QID, fault_hook=arm, **{"sink.max-retries": "0"})
    sink.open()
    with pytest.raises(Exception) as info:  # noqa: PT011 - the class is checked below
        sink.write_batch(batch(spark, rows()), 0)
    assert isinstance(info.value, Transient)
    assert "fe down" in str(info.value)
    sr.control.reset()
    replay = make_sink(sr, query_id=QID).write_batch(batch(spark, rows()), 0)
    assert replay.outcome == "already_applied"
    assert_applied_once(sr)


def test_publish_timeout_counts_as_committed(sr, spark):
    sink = make_sink(sr, query_id=QID)
    sink.open()
    sr.control.publish_timeout(1)
    result = sink.write_batch(batch(spark, rows()), 0)
    assert result.outcome == "committed"
    assert result.attempt == 0
    assert_applied_once(sr)


def test_server_restart_mid_batch_retries_under_a_new_label(sr, spark):
    def restart_after_begin(point):
        if point == "after_begin":
            sr.control.restart()  # running multi-table txns are cancelled

    sink = make_sink(sr, query_id=QID, fault_hook=restart_after_begin)
    sink.open()
    # the hook fires on every attempt, so allow only the first to be hit by the restart
    fired: list[str] = []

    def once(point):
        if point == "after_begin" and not fired:
            fired.append(point)
            restart_after_begin(point)

    sink.instrument = points(once)
    result = sink.write_batch(batch(spark, rows()), 0)
    assert result.outcome == "committed"
    assert result.attempt == 1
    assert_applied_once(sr)


def test_expired_early_attempt_does_not_hide_a_committed_later_one(sr, spark):
    """Attempt 0 forgotten by the server, attempt 1 committed: the replay must skip."""
    from sinks.starrocks.client import StarRocksClient

    sink = make_sink(sr, query_id=QID)
    sink.open()
    client = StarRocksClient(sink.config)
    label1 = f"t-{QID}-9-1"
    client.begin(label1, multi=True)
    # The sink always loads its progress rows, so its commits register the label (a
    # zero-load multi-table commit never would, spec §4.3a).
    client.load(
        label1,
        "_cdc_progress",
        b'[{"pipeline":"test","topic":"cdc","kafka_partition":0,"last_offset":1,"__op":0}]',
        multi=True,
    )
    client.commit(label1, multi=True)
    result = sink.write_batch(batch(spark, rows()), 9)
    assert result.outcome == "already_applied"
    assert table_rows(sr, "orders") == []


def test_crash_after_some_loads_driven_by_hand(sr, spark):
    """A previous driver began attempt 0 and loaded one table only, then died."""
    from sinks.starrocks.client import StarRocksClient

    sink = make_sink(sr, query_id=QID)
    sink.open()
    client = StarRocksClient(sink.config)
    label0 = f"t-{QID}-6-0"
    client.begin(label0, multi=True)
    client.load(
        label0,
        "orders",
        b'[{"order_id":1,"item_count":2,"total_amount":32,"version":1,"__op":0}]',
        multi=True,
    )
    assert table_rows(sr, "orders") == []  # nothing visible before commit

    result = sink.write_batch(batch(spark, rows()), 6)
    assert result.attempt == 1
    assert sr.control.labels(DB) == {label0: "ABORTED", f"t-{QID}-6-1": "VISIBLE"}
    assert_applied_once(sr)
