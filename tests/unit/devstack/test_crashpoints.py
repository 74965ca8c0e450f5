"""Crash points wrap the sink's TxnApi and load job from outside the product."""

import pytest

from devstack.starrocks.crashpoints import POINTS, parse_crash_at, point_instrument
from sinks.starrocks.committer import BatchPlan, MultiTableCommitter, PerTableCommitter
from sinks.starrocks.retry import RetryPolicy
from tests.unit.sinks.fake_starrocks import Crash, FakeStarRocks, ScriptedApi, load_job

pytestmark = pytest.mark.unit

ROWS = {"orders": [{"id": 1}]}
PLAN = BatchPlan("t", "q", 5, ("orders",), "_cdc_progress", ({"pipeline": "p"},))


def run(mode, hook):
    server = FakeStarRocks()
    api = ScriptedApi(server)
    instrument = point_instrument(hook)
    wrapped_api, wrapped_job = instrument(5, api, load_job(api, ROWS))
    cls = MultiTableCommitter if mode == "multi" else PerTableCommitter
    policy = RetryPolicy(sleep=lambda s: None)
    return server, cls(wrapped_api, wrapped_job, policy).run(PLAN)


@pytest.mark.parametrize("mode", ["multi", "per-table"])
def test_points_fire_in_protocol_order(mode):
    seen = []
    run(mode, lambda batch, point: seen.append((batch, point)))
    names = [p for _, p in seen]
    assert {b for b, _ in seen} == {5}
    assert names.index("after_begin") < names.index("after_load_job") < names.index("after_load")
    assert names.index("after_load") < names.index("before_commit") < names.index("after_commit")
    if mode == "per-table":
        assert names.index("after_prepare") < names.index("before_commit")


# Every (mode, point) pair that exists: multi-table mode has no prepare step.
MODE_POINTS = [
    (mode, point)
    for mode in ("multi", "per-table")
    for point in POINTS
    if point != "during_recovery" and not (mode == "multi" and point == "after_prepare")
]


@pytest.mark.parametrize(("mode", "point"), MODE_POINTS)
def test_a_crash_at_any_point_is_recovered_exactly_once(mode, point):
    server = FakeStarRocks()
    api = ScriptedApi(server)

    def crash(_batch, name):
        if name == point:
            raise Crash(name)

    wrapped_api, wrapped_job = point_instrument(crash)(5, api, load_job(api, ROWS))
    cls = MultiTableCommitter if mode == "multi" else PerTableCommitter
    with pytest.raises(Crash):
        cls(wrapped_api, wrapped_job, RetryPolicy(sleep=lambda s: None)).run(PLAN)
    cls(api, load_job(api, ROWS), RetryPolicy(sleep=lambda s: None)).run(PLAN)
    assert server.visible["orders"] == ROWS["orders"]
    assert server.open_labels() == []


def test_crash_at_spelling():
    assert parse_crash_at("after_commit@3") == ("after_commit", 3)
    assert parse_crash_at("during_recovery") == ("during_recovery", 0)
    with pytest.raises(ValueError, match="POINT one of"):
        parse_crash_at("somewhere")


def test_the_entry_point_loads_the_chaos_hook_from_the_environment(monkeypatch):
    from app.main import load_instrument
    from common.errors import ConfigError

    monkeypatch.setenv("CDC_CRASH_AT", "after_commit@2")
    instrument = load_instrument("devstack.starrocks.crashpoints:from_env")
    assert callable(instrument)
    assert load_instrument("") is None
    with pytest.raises(ConfigError, match="module:function"):
        load_instrument("devstack.starrocks.crashpoints:nope")


def test_kill_driver_at_records_the_marker_then_kills_parent_and_self(tmp_path, monkeypatch):
    import logging
    import os

    from devstack.starrocks import crashpoints

    killed = []
    # The same module objects crashpoints uses: patched for the length of the test.
    monkeypatch.setattr(logging, "shutdown", lambda: None)  # keep pytest's handlers
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append(("kill", sig)))

    def fake_exit(code):
        killed.append(("exit", code))
        raise Crash("exit")

    monkeypatch.setattr(os, "_exit", fake_exit)
    marker = tmp_path / "fired.txt"
    instrument = crashpoints.kill_driver_at("after_commit", 2, str(marker))
    server = FakeStarRocks()
    api = ScriptedApi(server)
    # batch 1 < from_batch: no crash
    a1, j1 = instrument(1, api, load_job(api, ROWS))
    MultiTableCommitter(a1, j1, RetryPolicy(sleep=lambda s: None)).run(PLAN)
    assert killed == []
    a2, j2 = instrument(2, api, load_job(api, ROWS))
    plan2 = BatchPlan("t", "q", 2, ("orders",), "_cdc_progress", ({"pipeline": "p"},))
    with pytest.raises(Crash):
        MultiTableCommitter(a2, j2, RetryPolicy(sleep=lambda s: None)).run(plan2)
    assert [k for k, _ in killed] == ["kill", "exit"]
    assert marker.read_text() == "after_commit 2\n"
