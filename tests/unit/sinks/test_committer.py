"""The exactly-once protocol against a fake StarRocks: every step, crash point and answer."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sinks.exceptions import SinkTerminalError, SinkTransientError
from sinks.starrocks.committer import (
    BatchPlan,
    MultiTableCommitter,
    Outcome,
    PerTableCommitter,
    raise_load_failures,
)
from sinks.starrocks.errors import (
    AuthError,
    FilteredRowsError,
    InvalidRequestError,
    ServerBusyError,
    StarRocksError,
    TransactionNotFoundError,
    classify,
)
from sinks.starrocks.filtered_rows import SourceTxn, retry_plan
from sinks.starrocks.loader import ANY_TABLE
from sinks.starrocks.protocol import LoadState, TxnOp
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.steps import Steps, Verdict
from sinks.starrocks.txnapi import LoadFailure, LoadReport

from .fake_starrocks import FAULTS, Crash, FakeStarRocks, ScriptedApi, load_job

pytestmark = pytest.mark.unit

QID = "cccccccc-0000-0000-0000-000000000000"
ROWS = {"orders": [{"id": 1}, {"id": 2}], "order_items": [{"id": 10}, {"id": 11}, {"id": 12}]}
PROGRESS = ({"pipeline": "p", "topic": "t", "kafka_partition": 0, "last_offset": 9},)


class FakeClock:
    """Time that moves only when the committer sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def policy(**overrides: Any) -> RetryPolicy:
    clock = FakeClock()
    base: dict[str, Any] = {
        "max_retries": 3,
        "base_s": 0.1,
        "cap_s": 1.0,
        "check_timeout_s": 5.0,
        "batch_max_attempts": 3,
        "sleep": clock.sleep,
        "clock": clock,
    }
    base.update(overrides)
    return RetryPolicy(**base)


def plan(batch_id: int = 3) -> BatchPlan:
    return BatchPlan("t", QID, batch_id, tuple(sorted(ROWS)), "_cdc_progress", PROGRESS)


def counted_plan(progress: tuple[dict[str, Any], ...] = PROGRESS, **kw: Any) -> BatchPlan:
    """A batch whose load job counts it: tables and progress rows known only after the load."""
    return BatchPlan("t", QID, 3, (), "_cdc_progress", counted=lambda: progress, **kw)


def counted_job(api: ScriptedApi, rows: dict[str, list[Any]] = ROWS) -> Any:
    """The counting load job: every table it finds, under the one label of ANY_TABLE."""
    real = load_job(api, rows)

    def run(labels: dict[str, str], multi: bool) -> Any:
        assert list(labels) == [ANY_TABLE]
        return real(dict.fromkeys(rows, labels[ANY_TABLE]), multi)

    return run


def label(attempt: int, batch_id: int = 3, table: str | None = None) -> str:
    return plan(batch_id).label(attempt, table)


def committer(mode: str, api: ScriptedApi, **kw: Any) -> MultiTableCommitter | PerTableCommitter:
    if mode == "counted":
        return MultiTableCommitter(api, counted_job(api), policy(**kw))
    cls = MultiTableCommitter if mode == "multi" else PerTableCommitter
    return cls(api, load_job(api, ROWS), policy(**kw))


def assert_applied_once(server: FakeStarRocks) -> None:
    for table, rows in ROWS.items():
        assert server.visible[table] == rows, table
    progress = server.visible["_cdc_progress"]
    assert len(progress) == 1
    assert progress[0]["label"].startswith(f"t-{QID}-3-")
    assert server.open_labels() == []


# -- multi-table mode -------------------------------------------------------------------------


@pytest.mark.parametrize("registration", ["commit", "first_load"])
def test_multi_happy_path(registration):
    server = FakeStarRocks(registration=registration)
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert result.outcome is Outcome.COMMITTED
    assert result.labels == (label(0),)
    assert server.get_load_state(label(0)) == LoadState.VISIBLE
    assert_applied_once(server)


def test_multi_replay_is_already_applied_with_one_state_call():
    server = FakeStarRocks()
    committer("multi", ScriptedApi(server)).run(plan())
    api = ScriptedApi(server)
    result = committer("multi", api).run(plan())
    assert result.outcome is Outcome.ALREADY_APPLIED
    assert api.calls == [("get_load_state", label(0), None)]
    assert_applied_once(server)


def names(api: ScriptedApi) -> list[str]:
    return [name for name, _label, _table in api.calls]


def test_multi_fresh_batch_skips_the_checks_for_an_earlier_attempt():
    """The batch after one the sink wrote: 4 FE calls (begin, progress, commit, confirm)."""
    full, fresh = ScriptedApi(FakeStarRocks()), ScriptedApi(FakeStarRocks())
    committer("multi", full).run(plan())
    server = fresh.server
    result = committer("multi", fresh).run(replace(plan(), fresh=True))
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 0)
    assert names(full)[:4] == ["get_load_state", "begin", "get_load_state", "get_load_state"]
    assert names(fresh) == ["begin", "load", "load", "load", "commit", "get_load_state"]
    assert names(full)[4:] == names(fresh)[1:]
    assert_applied_once(server)


@pytest.mark.parametrize("earlier", ["committed", "rolled_back"])
def test_multi_fresh_batch_still_probes_its_label_with_begin(earlier):
    """Should a used label meet a fresh batch (a tampered checkpoint), begin still sees it."""
    server = FakeStarRocks()
    if earlier == "committed":
        committer("multi", ScriptedApi(server)).run(plan())
    else:
        server.begin(label(0), None)
        server.rollback(label(0), None)
    result = committer("multi", ScriptedApi(server)).run(replace(plan(), fresh=True))
    if earlier == "committed":
        assert (result.outcome, result.attempt) == (Outcome.ALREADY_APPLIED, 0)
    else:
        assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert_applied_once(server)


@pytest.mark.parametrize("registration", ["commit", "first_load"])
@pytest.mark.parametrize("crash_call", range(7))
def test_multi_crash_before_commit_answers_unknown_and_recovers(registration, crash_call):
    """Audit finding 1: a begun multi-table label answers UNKNOWN yet stays blocked."""
    server = FakeStarRocks(registration=registration)
    api = ScriptedApi(server, {crash_call: "crash_after"})
    with pytest.raises(Crash):
        committer("multi", api).run(plan())
    if api.calls[-1][0] != "commit":
        assert server.get_load_state(label(0)) in (LoadState.UNKNOWN, LoadState.PREPARE)
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert result.outcome in (Outcome.COMMITTED, Outcome.ALREADY_APPLIED)
    assert_applied_once(server)


def test_multi_label_blocked_after_rollback_takes_the_next_attempt():
    server = FakeStarRocks(registration="commit")
    server.begin(label(0), None)
    server.rollback(label(0), None)
    assert server.get_load_state(label(0)) == LoadState.UNKNOWN  # yet blocked
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert_applied_once(server)


def test_multi_fe_restart_cancels_the_open_task_and_the_batch_is_redone():
    """Audit finding 3: BEGIN is not durable; the label stays blocked (CANCELLED)."""
    server = FakeStarRocks(registration="commit")
    api = ScriptedApi(server, {3: "restart"})  # before the first table's load
    result = committer("multi", api).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert_applied_once(server)


@pytest.mark.parametrize("registration", ["commit", "first_load"])
def test_multi_ok_commit_that_failed_is_detected_and_redone(registration):
    """Audit finding 2: some 4.0.x builds answer OK to a commit that rolled back."""
    server = FakeStarRocks(registration=registration, ok_but_failed_commits=1)
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert server.committed_labels == [label(1)]
    assert_applied_once(server)


def test_multi_zero_load_commit_is_never_registered_but_begin_sees_it():
    """Audit finding 4: the label of a zero-load commit stays UNKNOWN to get_load_state."""
    server = FakeStarRocks(registration="first_load")
    server.begin(label(0), None)
    server.commit(label(0), None)
    assert server.get_load_state(label(0)) == LoadState.UNKNOWN
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert result.outcome is Outcome.ALREADY_APPLIED


def test_multi_publish_wait_counts_as_committed():
    server = FakeStarRocks(publish_wait=True)
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert result.outcome is Outcome.COMMITTED
    assert server.get_load_state(label(0)) == LoadState.COMMITTED


@pytest.mark.parametrize("registration", ["commit", "first_load"])
def test_multi_commit_answered_cancelled_is_decided_by_the_label_not_reloaded(registration):
    """The commit landed, the FE restarted from its journal, and the client's retry of the
    commit (its first answer lost) heard "Can not commit CANCELLED": the reloaded task is
    CANCELLED while the transaction is VISIBLE. The batch is applied, not loaded again."""
    server = FakeStarRocks(registration=registration)
    real = server.commit

    def commit(lbl, table):
        real(lbl, table)
        server.restart(from_journal=True)
        real(lbl, table)  # the retry's answer

    server.commit = commit  # type: ignore[method-assign]
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert (result.outcome, result.labels) == (Outcome.COMMITTED, (label(0),))
    assert_applied_once(server)


def test_multi_commit_answered_cancelled_for_an_aborted_label_is_loaded_again():
    """A task the FE really cancelled (timeout) before the commit: the next attempt loads."""
    server = FakeStarRocks()
    real = server.commit
    cancelled: list[str] = []

    def commit(lbl, table):
        if not cancelled:
            cancelled.append(lbl)
            server.rollback(lbl, None)  # the FE's timeout checker, just before
        real(lbl, table)

    server.commit = commit  # type: ignore[method-assign]
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert_applied_once(server)


def test_multi_replay_finds_a_committed_attempt_past_dropped_tasks_in_the_progress_table():
    """StarRocks drops finished multi-table tasks past stream_load_task_keep_max_num (1,000,
    all databases): rolled-back labels 0-2 are free again, and attempt 3, committed before a
    crash, lies past the look-ahead. The progress rows, committed with it, name it."""
    server = FakeStarRocks(registration="commit")  # 4.0: a rolled-back label is never registered
    for attempt in range(3):
        server.begin(label(attempt), None)
        server.rollback(label(attempt), None)
    first = committer("multi", ScriptedApi(server)).run(plan())
    assert first.labels == (label(3),)
    for attempt in range(3):
        del server.tasks[label(attempt)]  # StreamLoadMgr.cleanOldStreamLoadTasks(true)

    def applied() -> list[str]:
        return [str(server.visible["_cdc_progress"][-1]["label"])]

    replay = committer("multi", ScriptedApi(server)).run(replace(plan(), applied=applied))
    assert (replay.outcome, replay.labels) == (Outcome.ALREADY_APPLIED, (label(3),))
    assert_applied_once(server)


def test_multi_progress_rows_of_another_batch_do_not_count_as_applied():
    """Rows of this batch id from another query (an older checkpoint of the same pipeline),
    a per-table label and another batch's label are not this batch's."""
    server = FakeStarRocks()
    others = [
        plan(batch_id=2).label(0),
        replace(plan(), query_id="dddddddd-0000-0000-0000-000000000000").label(0),
        label(0, table="orders"),
    ]
    result = committer("multi", ScriptedApi(server)).run(replace(plan(), applied=lambda: others))
    assert (result.outcome, result.labels) == (Outcome.COMMITTED, (label(0),))
    assert_applied_once(server)


def test_multi_aborting_task_is_waited_out_not_skipped():
    server = FakeStarRocks()
    server.begin(label(0), None)
    server.tasks[label(0)].state = "ABORTING"
    server.tasks[label(0)].aborting_left = 10**9  # the background rollback never lands
    api = ScriptedApi(server)
    original = server.begin
    seen = []

    def begin(lbl, table):
        seen.append(lbl)
        if len(seen) == 2:  # the FE's background rollback finishes
            server.tasks[label(0)].state = "CANCELLED"
        original(lbl, table)

    server.begin = begin  # type: ignore[method-assign]
    result = committer("multi", api).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)


def test_multi_background_rollback_is_waited_out_after_a_crash():
    """A rollback that could not finish at once leaves the task ABORTING for a while."""
    server = FakeStarRocks(slow_abort=2)
    api = ScriptedApi(server, {5: "crash_after"})  # after the first load
    with pytest.raises(Crash):
        committer("multi", api).run(plan())
    server.rollback(label(0), None)  # e.g. the FE's timeout checker
    assert server.tasks[label(0)].state == "ABORTING"
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert_applied_once(server)


def test_multi_aborting_forever_stops_with_a_transient_error():
    server = FakeStarRocks()
    server.begin(label(0), None)
    server.tasks[label(0)].state = "ABORTING"
    server.tasks[label(0)].aborting_left = 10**9  # the background rollback never lands
    with pytest.raises(SinkTransientError, match="still committing or aborting"):
        committer("multi", ScriptedApi(server)).run(plan())


def test_multi_label_of_another_writer_is_terminal():
    server = FakeStarRocks()
    server.begin(label(0), "orders")  # a single-table transaction under our label
    with pytest.raises(SinkTerminalError, match="another writer"):
        committer("multi", ScriptedApi(server)).run(plan())


def test_multi_lost_commit_answer_is_settled_by_the_label_state():
    server = FakeStarRocks()
    api = ScriptedApi(server)
    c = committer("multi", api)
    # calls: state(0), begin, state(1), state(2), load, load, load(progress), commit
    api.script = {7: "lost_after"}
    result = c.run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 0)
    assert_applied_once(server)


def test_multi_unreachable_fe_after_commit_stops_and_replay_skips():
    server = FakeStarRocks()
    script = {7: "lost_after", **{i: "error_before" for i in range(8, 200)}}
    with pytest.raises(SinkTransientError):
        committer("multi", ScriptedApi(server, script)).run(plan())
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert result.outcome is Outcome.ALREADY_APPLIED
    assert_applied_once(server)


def test_multi_later_committed_attempt_hides_behind_an_expired_one():
    server = FakeStarRocks()
    server.begin(label(1), None)
    server.load(label(1), "orders", [{"id": 1}], multi=True)
    server.commit(label(1), None)
    result = committer("multi", ScriptedApi(server)).run(plan())
    assert (result.outcome, result.labels) == (Outcome.ALREADY_APPLIED, (label(1),))
    assert server.open_labels() == []


def test_multi_terminal_load_error_keeps_its_class_and_url():
    server = FakeStarRocks()
    api = ScriptedApi(server)

    def failing(labels, multi):
        failure = LoadFailure("FilteredRowsError", "too many filtered rows", False, "http://e")
        return [LoadReport("orders", failure=failure), LoadReport("order_items", rows=3)]

    c = MultiTableCommitter(api, failing, policy())
    with pytest.raises(FilteredRowsError) as info:
        c.run(plan())
    assert info.value.context["error_url"] == "http://e"
    assert info.value.context["label"] == label(0)
    assert server.open_labels() == []


def test_multi_transient_load_errors_give_up_after_max_attempts():
    server = FakeStarRocks()
    api = ScriptedApi(server)

    def failing(labels, multi):
        return [LoadReport("orders", failure=LoadFailure("ServerBusyError", "5xx", True))]

    with pytest.raises(SinkTerminalError, match="failed 3 times"):
        MultiTableCommitter(api, failing, policy()).run(plan())
    assert server.open_labels() == []


def test_multi_spark_job_failure_is_retried_under_a_new_attempt():
    server = FakeStarRocks()
    api = ScriptedApi(server)
    real = load_job(api, ROWS)
    runs = []

    def flaky(labels, multi):
        runs.append(labels)
        if len(runs) == 1:
            raise RuntimeError("executor lost")
        return real(labels, multi)

    result = MultiTableCommitter(api, flaky, policy()).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert_applied_once(server)


def test_empty_batch_opens_nothing():
    server = FakeStarRocks()
    api = ScriptedApi(server)
    empty = BatchPlan("t", QID, 3, (), "_cdc_progress", ())
    assert committer("multi", api).run(empty).outcome is Outcome.EMPTY
    assert api.calls == []


def test_counted_batch_loads_every_table_under_one_label_then_its_progress():
    server = FakeStarRocks()
    result = committer("counted", ScriptedApi(server)).run(counted_plan())
    assert (result.outcome, result.labels) == (Outcome.COMMITTED, (label(0),))
    assert {r.table for r in result.reports} == set(ROWS)
    assert_applied_once(server)


def test_counted_batch_without_rows_rolls_its_label_back():
    server = FakeStarRocks()
    api = ScriptedApi(server)
    result = MultiTableCommitter(api, counted_job(api, {}), policy()).run(counted_plan(()))
    assert result.outcome is Outcome.EMPTY
    assert [c[0] for c in api.calls if c[0] in ("begin", "rollback", "commit")] == [
        "begin",
        "rollback",
    ]
    assert server.committed_labels == []
    assert server.open_labels() == []


def test_counted_batch_with_a_bad_target_is_rolled_back_and_says_so_first():
    server = FakeStarRocks()
    api = ScriptedApi(server)

    def failing(labels, multi):
        failure = LoadFailure("InvalidRequestError", "unknown table nope", False)
        return [LoadReport("nope", failure=failure)]

    def check() -> tuple[dict[str, Any], ...]:
        raise SinkTerminalError("rows target table demo.nope (first seen at topic=t ...)")

    plan = BatchPlan("t", QID, 3, (), "_cdc_progress", counted=check)
    with pytest.raises(SinkTerminalError, match=r"rows target table demo\.nope"):
        MultiTableCommitter(api, failing, policy()).run(plan)
    assert server.committed_labels == []
    assert server.open_labels() == []


def test_load_failures_prefer_the_terminal_one():
    reports = [
        LoadReport("a", failure=LoadFailure("ServerBusyError", "busy", True)),
        LoadReport("b", failure=LoadFailure("FilteredRowsError", "filtered", False)),
    ]
    with pytest.raises(FilteredRowsError, match="table b under label lb"):
        raise_load_failures(reports, {"a": "la", "b": "lb"})


# -- per-table mode ---------------------------------------------------------------------------


def test_per_table_happy_path_and_replay():
    server = FakeStarRocks()
    result = committer("per-table", ScriptedApi(server)).run(plan())
    assert result.outcome is Outcome.COMMITTED
    assert set(result.labels) == {label(0, table=t) for t in (*ROWS, "_cdc_progress")}
    assert_applied_once(server)
    again = committer("per-table", ScriptedApi(server)).run(plan())
    assert again.outcome is Outcome.ALREADY_APPLIED


def test_per_table_fresh_batch_skips_recovery():
    """Recovery reads each table's label state and two attempts ahead: none when fresh."""
    full, fresh = ScriptedApi(FakeStarRocks()), ScriptedApi(FakeStarRocks())
    committer("per-table", full).run(plan())
    result = committer("per-table", fresh).run(replace(plan(), fresh=True))
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 0)
    assert names(full)[:5] == ["get_load_state"] * 5
    assert names(fresh) == names(full)[5:]
    assert "get_load_state" not in names(fresh)
    assert_applied_once(fresh.server)


def test_per_table_fresh_batch_on_a_used_label_is_refused_not_duplicated():
    server = FakeStarRocks()
    committer("per-table", ScriptedApi(server)).run(plan())
    with pytest.raises(SinkTerminalError, match="already in use by another writer"):
        committer("per-table", ScriptedApi(server)).run(replace(plan(), fresh=True))
    assert_applied_once(server)


@pytest.mark.parametrize("crash_call", range(8, 16))
def test_per_table_crash_after_prepare_recommits_without_reloading(crash_call):
    server = FakeStarRocks()
    api = ScriptedApi(server, {crash_call: "crash_after"})
    with pytest.raises(Crash):
        committer("per-table", api).run(plan())
    result = committer("per-table", ScriptedApi(server)).run(plan())
    assert result.outcome in (Outcome.COMMITTED, Outcome.RECOVERED, Outcome.ALREADY_APPLIED)
    assert_applied_once(server)


DEAD = "_cdc_dead_letter"


@pytest.mark.parametrize("crash", ["crash_before", "crash_after"])
def test_per_table_replay_finishes_the_dead_letter_label_of_a_filtered_rows_retry(crash):
    """The retry after filtered rows loads the dead-letter table too; a crash among its
    commits leaves that label prepared. The replay's rows do not name the table (they are
    the source rows again), so recovery reads it as optional: committed, not dropped."""
    rows = {**ROWS, DEAD: [{"id": 99}]}
    retry = replace(plan(), tables=tuple(sorted((*ROWS, DEAD))), optional_tables=(DEAD,))
    calls = ScriptedApi(FakeStarRocks())
    PerTableCommitter(calls, load_job(calls, rows), policy()).run(retry)
    commits = [i for i, (name, _, _) in enumerate(calls.calls) if name == "commit"]
    server = FakeStarRocks()
    api = ScriptedApi(server, {commits[0]: crash})  # the dead-letter label's commit
    with pytest.raises(Crash):
        PerTableCommitter(api, load_job(api, rows), policy()).run(retry)
    replay = replace(plan(), optional_tables=(DEAD,))
    result = committer("per-table", ScriptedApi(server)).run(replay)
    assert result.outcome in (Outcome.RECOVERED, Outcome.ALREADY_APPLIED)
    assert server.visible[DEAD] == [{"id": 99}]
    assert_applied_once(server)


# One source transaction holds every row of orders and order_items, and a filtered one.
ALL_BAD = SourceTxn("t", 0, 1, "x", ("order_items", "orders"), 5)


def filtered_first_attempt(api: ScriptedApi) -> None:
    """The batch's first attempt: its commit-time check fails (strict mode), rolled back."""
    failure = LoadFailure("FilteredRowsError", "too many filtered rows", transient=False)

    def job(_labels: Any, _multi: bool) -> list[LoadReport]:
        return [LoadReport("orders", failure=failure)]

    with pytest.raises(FilteredRowsError):
        PerTableCommitter(api, job, policy()).run(replace(plan(), optional_tables=(DEAD,)))


def test_per_table_refuses_to_prepare_a_label_no_load_reached():
    """Why the retry must not name a table its dead letters emptied (spec §4.2)."""
    server = FakeStarRocks()
    api = ScriptedApi(server)
    stale = replace(plan(), tables=(DEAD, *sorted(ROWS)), optional_tables=(DEAD,))
    rows = {DEAD: [{"id": 99}]}
    with pytest.raises(InvalidRequestError, match="hasn't send any data yet"):
        PerTableCommitter(api, load_job(api, rows), policy()).run(stale)
    assert server.open_labels() == []
    assert DEAD not in server.visible


def test_filtered_rows_retry_plan_names_only_tables_with_rows_left():
    shared = SourceTxn("t", 0, 2, "y", ("orders",), 1)
    retry = retry_plan(replace(plan(), optional_tables=(DEAD,)), [ALL_BAD], [(ALL_BAD, "x")], DEAD)
    assert (retry.tables, retry.optional_tables) == ((DEAD,), (DEAD, "order_items", "orders"))
    kept = retry_plan(plan(), [ALL_BAD, shared], [(ALL_BAD, "x")], DEAD)
    assert (kept.tables, kept.optional_tables) == ((DEAD, "orders"), ("order_items",))


@pytest.mark.parametrize("crash", [None, "crash_before", "crash_after"])
def test_per_table_dead_letter_retry_with_a_table_left_without_rows(crash):
    """Per-table mode, sink.filtered-rows=dead-letter: the retry turns every row of orders
    and order_items into dead letters. Those tables get no label in the retry (StarRocks
    refuses to prepare one without data), and a replay, whose plan names them again,
    finishes or skips that attempt instead of stopping or loading the bad rows."""
    retry = retry_plan(replace(plan(), optional_tables=(DEAD,)), [ALL_BAD], [(ALL_BAD, "x")], DEAD)
    dead = {DEAD: [{"id": 97}, {"id": 98}, {"id": 99}]}

    def retrying(script: dict[int, str]) -> tuple[FakeStarRocks, ScriptedApi]:
        server = FakeStarRocks()
        filtered_first_attempt(ScriptedApi(server))
        api = ScriptedApi(server, script)
        return server, api

    server, api = retrying({})
    result = PerTableCommitter(api, load_job(api, dead), policy()).run(retry)
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert result.labels == (label(1, table=DEAD), label(1, table="_cdc_progress"))
    if crash is not None:
        first_commit = names(api).index("commit")
        assert api.calls[first_commit] == ("commit", label(1, table=DEAD), DEAD)
        server, api = retrying({first_commit: crash})
        with pytest.raises(Crash):
            PerTableCommitter(api, load_job(api, dead), policy()).run(retry)
    assert all(server.get_load_state(label(1, table=t)) == LoadState.UNKNOWN for t in ROWS)
    replay = replace(plan(), optional_tables=(DEAD,))
    again = committer("per-table", ScriptedApi(server)).run(replay)
    assert again.outcome is (Outcome.ALREADY_APPLIED if crash is None else Outcome.RECOVERED)
    assert again.attempt == 1
    assert server.visible == {DEAD: dead[DEAD], "_cdc_progress": server.visible["_cdc_progress"]}
    assert len(server.visible["_cdc_progress"]) == 1
    assert server.open_labels() == []


def test_per_table_rollback_of_a_label_whose_be_context_is_gone_uses_fe_cancel():
    """Audit finding 8: rollback answers TXN_NOT_EXISTS; the FE cancel API aborts it."""
    server = FakeStarRocks()
    api = ScriptedApi(server, {9: "crash_after"})  # after begin of every table + a load
    with pytest.raises(Crash):
        committer("per-table", api).run(plan())
    server.restart()  # BE contexts gone: the PREPARE labels can only be cancelled at the FE
    api2 = ScriptedApi(server)
    result = committer("per-table", api2).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert all(server.get_load_state(label(0, table=t)) == LoadState.ABORTED for t in ROWS)
    assert_applied_once(server)


class PrepareRacingRollback:
    """A single-table label whose prepare finishes while its rollback is sent: the BE answers
    TXN_NOT_EXISTS (its context gone), the label is PREPARED by the time its state is read."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.state = LoadState.PREPARE

    def rollback(self, label: str, table: str | None) -> None:
        self.calls.append("rollback")
        if len(self.calls) == 1:
            self.state = LoadState.PREPARED
            raise TransactionNotFoundError(f"transaction with label {label} not exists")
        self.state = LoadState.ABORTED  # the FE rolls a PREPARED label back itself

    def cancel(self, label: str, table: str) -> None:
        # StarRocks' cancel API aborts PREPARE labels only.
        self.calls.append("cancel")
        raise ServerBusyError(f"running transaction not found, label={label}")

    def get_load_state(self, label: str) -> LoadState:
        return self.state


def test_a_label_prepared_while_its_rollback_was_sent_is_rolled_back_not_cancelled():
    api = PrepareRacingRollback()
    verdict = Steps(api, lambda _labels, _multi: (), RetryPolicy()).rollback("l", "orders")  # type: ignore[arg-type]
    assert (verdict, api.calls, api.state) == (
        Verdict.ABORTED,
        ["rollback", "rollback"],
        LoadState.ABORTED,
    )


def test_per_table_unclear_begin_is_rolled_back_before_the_next_attempt():
    """Found by the hypothesis test: a begin whose answer was lost, then an unreachable FE,
    left that label open (and then blocked the retry as "another writer")."""
    server = FakeStarRocks()
    # calls: 3 states + 2 lookahead, begin(order_items) lost, then 4 failing state calls
    script = {5: "lost_after", 6: "error_before", 7: "error_before", 8: "error_before",
              9: "error_before"}  # fmt: skip
    result = committer("per-table", ScriptedApi(server, script)).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert server.get_load_state(label(0, table="order_items")) == LoadState.ABORTED
    assert_applied_once(server)


@pytest.mark.parametrize(("mode", "attempt"), [("multi", 1), ("per-table", 0)])
def test_commit_refused_by_a_lock_timeout_is_settled_in_the_same_run(mode, attempt, caplog):
    """``get database write lock timeout``: a multi-table task is rolled back by the FE, so
    the batch goes again under the next label; a single-table txn stays PREPARED and nothing
    else would commit it, so the same run sends its commit again."""
    clean = ScriptedApi(FakeStarRocks())
    committer(mode, clean).run(plan())
    commits = [i for i, (name, _, _) in enumerate(clean.calls) if name == "commit"]
    server = FakeStarRocks()
    api = ScriptedApi(server, {commits[-1]: "lock_timeout"})
    result = committer(mode, api).run(plan())
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, attempt)
    if mode == "per-table":
        assert names(api).count("commit") == len(commits) + 1
    else:  # the log says why the batch was loaded again
        aborted = [r.getMessage() for r in caplog.records if "commit aborted" in r.getMessage()]
        assert len(aborted) == 1
        assert "write lock timeout" in aborted[0]
    assert_applied_once(server)


@pytest.mark.parametrize("mode", ["multi", "per-table"])
def test_a_failed_attempt_waits_the_backoff_before_the_next(mode):
    """A server that just failed a load (a 5xx) gets the retry backoff before the batch is
    begun again under the next label, not a burst of attempts."""
    clock = FakeClock()
    begins: list[tuple[str, float]] = []

    class Timed(ScriptedApi):
        def begin(self, label: str, table: str | None) -> None:
            begins.append((label, clock.now))
            super().begin(label, table)

    server = FakeStarRocks()
    api = Timed(server)
    cls = MultiTableCommitter if mode == "multi" else PerTableCommitter
    loads = [0]
    real = load_job(api, ROWS)

    def failing_once(labels: Any, multi: bool) -> Any:
        loads[0] += 1
        if loads[0] == 1:
            return [LoadReport("orders", failure=LoadFailure("ServerBusyError", "5xx", True))]
        return real(labels, multi)

    run = cls(api, failing_once, policy(sleep=clock.sleep, clock=clock)).run
    result = run(replace(plan(), fresh=True))
    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    first = max(t for lbl, t in begins if "-3-0" in lbl)
    second = min(t for lbl, t in begins if "-3-1" in lbl)
    assert second - first >= 0.05  # policy(): base 0.1 s, jitter in the upper half
    assert_applied_once(server)


def test_per_table_partly_committed_without_prepare_is_terminal():
    server = FakeStarRocks()
    tables = (*sorted(ROWS), "_cdc_progress")
    for t in tables:
        server.begin(label(0, table=t), t)
    server.load(label(0, table="order_items"), "order_items", [1], multi=False)
    server.commit(label(0, table="order_items"), "order_items")
    with pytest.raises(SinkTerminalError, match="cannot repair"):
        committer("per-table", ScriptedApi(server)).run(plan())


# -- every crash point x every server answer ------------------------------------------------

SCRIPTS = st.dictionaries(st.integers(0, 40), st.sampled_from(FAULTS), max_size=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mode=st.sampled_from(["multi", "counted", "per-table"]),
    registration=st.sampled_from(["commit", "first_load"]),
    ok_but_failed=st.integers(0, 2),
    publish_wait=st.booleans(),
    slow_abort=st.integers(0, 3),
    script=SCRIPTS,
)
def test_any_faults_any_crashes_apply_the_batch_exactly_once(
    mode, registration, ok_but_failed, publish_wait, slow_abort, script
):
    server = FakeStarRocks(
        registration=registration,
        ok_but_failed_commits=ok_but_failed,
        publish_wait=publish_wait,
        slow_abort=slow_abort,
    )
    api = ScriptedApi(server, script)
    for _restart in range(30):
        try:
            result = committer(mode, api).run(counted_plan() if mode == "counted" else plan())
            break
        except Crash:
            continue  # kill -9: the supervisor restarts the query, Spark replays the batch
        except SinkTransientError:
            continue  # the query stopped on an unclear outcome; the restart decides
        except SinkTerminalError as e:
            if "times" not in str(e):  # only "gave up after N attempts" may stop it
                raise
            continue
    else:
        pytest.fail("the batch never completed")
    assert result.outcome in (Outcome.COMMITTED, Outcome.ALREADY_APPLIED, Outcome.RECOVERED)
    assert_applied_once(server)
    if mode != "per-table":
        assert len([lbl for lbl in server.committed_labels if lbl.startswith("t-")]) == 1


def test_the_committer_imports_neither_spark_nor_http():
    import subprocess
    import sys

    code = (
        "import sys, sinks.starrocks.committer, sinks.starrocks.per_table; "
        "bad = [m for m in ('pyspark', 'requests', 'urllib3', 'pymysql') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize(
    ("message", "final"),
    [
        ("Can not commit CANCELLED transaction 7, label is l", True),
        ("class x: stream load task l has already been cancelled: timeout", True),
        ("Transaction 7 is aborting (reason: cancelled by user), label is l", False),
    ],
)
def test_only_a_cancelled_task_is_final_an_aborting_one_is_not(message, final):
    import json

    from sinks.starrocks.committer import _cancelled
    from sinks.starrocks.errors import StarRocksError, classify
    from sinks.starrocks.protocol import TxnOp

    err = classify(TxnOp.COMMIT, 200, json.dumps({"Status": "FAILED", "Message": message}))
    assert isinstance(err, StarRocksError)
    assert _cancelled(err) is final


# -- commit behind (sinks/starrocks/behind.py) --------------------------------------------------


def test_multi_deferred_commit_stops_loaded_and_commit_finishes_it():
    server = FakeStarRocks()
    api = ScriptedApi(server)
    running = committer("multi", api)
    assert isinstance(running, MultiTableCommitter)
    result = running.run(replace(plan(), defer_commit=True))
    assert (result.outcome, result.labels) == (Outcome.LOADED, (label(0),))
    assert "commit" not in names(api)
    assert server.open_labels() == [label(0)]  # loaded, progress included, not visible
    assert running.commit(label(0)) is Verdict.COMMITTED
    assert_applied_once(server)


@pytest.mark.parametrize("before", ["open", "committed", "restart", "rolled_back"])
def test_multi_settle_of_an_earlier_runs_label(before):
    """At start: a loaded label is committed if still open, and ABORTED once it is gone."""
    server = FakeStarRocks(registration="commit")
    committer("multi", ScriptedApi(server)).run(replace(plan(), defer_commit=True))
    if before == "committed":
        server.commit(label(0), None)
    elif before == "restart":
        server.restart()  # an FE restart cancels a begun multi-table task
    elif before == "rolled_back":
        server.rollback(label(0), None)
    settling = committer("multi", ScriptedApi(server))
    assert isinstance(settling, MultiTableCommitter)
    verdict = settling.settle(label(0))
    if before in ("open", "committed"):
        assert verdict is Verdict.COMMITTED
        assert_applied_once(server)
    else:
        assert verdict is Verdict.ABORTED
        assert server.visible.get("orders", []) == []


class Refusing(ScriptedApi):
    """StarRocks refuses the credentials (401) for a call once its ``passes`` are used up."""

    def __init__(self, server: FakeStarRocks, script: dict[int, str] | None = None) -> None:
        super().__init__(server, script)
        self.passes: dict[str, int] = {}  # call name -> calls still answered (absent: all)

    def _call(self, name: str, label: str, table: str | None, fn: Any) -> Any:
        left = self.passes.get(name)
        if left is not None and left <= 0:
            self.calls.append((name, label, table))
            body = json.dumps({"status": "FAILED", "msg": "Access denied for u@h"})
            refused = classify(TxnOp(name), 401, body, label=label, table=table)
            assert isinstance(refused, StarRocksError)
            raise refused
        if left is not None:
            self.passes[name] = left - 1
        return super()._call(name, label, table, fn)


@pytest.mark.parametrize(
    ("passes", "script", "task"),
    [
        ({"commit": 0}, {}, "CANCELLED"),  # refused for good, rolled back: ABORTED
        ({"commit": 0, "rollback": 0}, {}, "BEGIN"),
        ({"get_load_state": 0}, {}, "BEGIN"),
        ({"get_load_state": 1}, {1: "lost_after"}, "COMMITED"),  # refused in _confirm
    ],
)
def test_multi_settle_says_aborted_only_for_a_label_it_knows_cannot_commit(passes, script, task):
    """A commit refused for good is ABORTED once its rollback lands. When the rollback or a
    state query is refused too, the label may still be open (or committed): settle raises,
    so the start stops instead of rewinding the checkpoint, and the next start settles it."""
    server = FakeStarRocks(registration="commit")
    committer("multi", ScriptedApi(server)).run(replace(plan(), defer_commit=True))
    api = Refusing(server, script)
    api.passes = dict(passes)
    settling = MultiTableCommitter(api, load_job(api, ROWS), policy())
    if task == "CANCELLED":
        assert settling.settle(label(0)) is Verdict.ABORTED
        assert server.tasks[label(0)].state == task
        return
    with pytest.raises(SinkTerminalError, match="may still be open and committable") as e:
        settling.settle(label(0))
    assert isinstance(e.value.__cause__, AuthError)
    assert server.tasks[label(0)].state == task
    restarted = committer("multi", ScriptedApi(server))  # credentials fixed
    assert isinstance(restarted, MultiTableCommitter)
    assert restarted.settle(label(0)) is Verdict.COMMITTED
    assert_applied_once(server)
