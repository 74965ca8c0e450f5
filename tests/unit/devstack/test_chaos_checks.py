"""The chaos runner's checks: double commits (labels read with the product's rule) and exits
no fault explains."""

from collections import Counter
from types import SimpleNamespace

import pytest

from devstack.chaos import RunResult, _double_commits, render, unexplained_exits
from sinks.starrocks.labels import make_label

pytestmark = pytest.mark.unit

QID = "cccccccc-0000-0000-0000-000000000000"


def stack(labels):
    control = SimpleNamespace(labels=lambda: labels)
    return SimpleNamespace(emulator=SimpleNamespace(control=control))


def test_per_table_double_commit_is_seen():
    labels = {
        make_label("chaos", QID, 4, 0, "orders"): "VISIBLE",
        make_label("chaos", QID, 4, 1, "orders"): "VISIBLE",
        make_label("chaos", QID, 4, 0, "order_items"): "VISIBLE",
    }
    assert _double_commits(stack(labels)) == 1


def test_multi_table_double_commit_is_seen_and_aborted_attempts_are_not():
    labels = {
        make_label("chaos", QID, 4, 0): "ABORTED",
        make_label("chaos", QID, 4, 1): "VISIBLE",
        make_label("chaos", QID, 5, 0): "VISIBLE",
        make_label("chaos", QID, 5, 1): "COMMITTED",
    }
    assert _double_commits(stack(labels)) == 1


def test_every_exit_needs_a_fault_that_explains_it():
    # Two crash points fired and one too-many-txns was thrown: three exits are explained.
    injected = Counter({"crash:after_commit": 1, "too-many-txns": 1, "sink-5xx": 1})
    assert unexplained_exits(3, 2, injected) == 0
    # A restart that failed again (a replay the query could not finish) is not.
    assert unexplained_exits(4, 2, injected) == 1
    # A terminal fault allows an exit, it does not demand one.
    assert unexplained_exits(2, 2, injected) == 0
    assert unexplained_exits(1, 0, Counter({"sink-5xx": 1, "kill9": 1})) == 1


def test_a_run_with_an_unexplained_exit_fails_and_shows_its_exits():
    ok = RunResult(run=1, seed=1, faults=["kill9"], caught_up=True, watch_checks=10)
    assert ok.passed
    exit_line = "level=ERROR logger=app query failed: STATE_STORE_COMMIT_VALIDATION_FAILED"
    bad = RunResult(
        run=2,
        seed=2,
        faults=["crash:after_commit"],
        caught_up=True,
        watch_checks=10,
        exits=["(no ERROR line)", exit_line],
        unexplained_exits=1,
    )
    assert not bad.passed
    table = render([ok, bad])
    assert "exits no fault explains: 1" in table
    assert exit_line in table
    assert "unexplained exits 1" in table


def test_a_run_that_loaded_a_row_twice_or_not_at_all_fails_whatever_the_tables_show():
    def result(loaded: int) -> RunResult:
        return RunResult(
            run=1,
            seed=1,
            faults=["kill9"],
            caught_up=True,
            watch_checks=10,
            rows_sent=120,
            rows_loaded=loaded,
        )

    assert result(120).passed
    assert not result(130).passed  # a transaction applied again: upserts leave no trace
    assert not result(110).passed
    table = render([result(120), result(130)])
    assert " 120/120 " in table
    assert " 130/120 " in table
    assert "rows loaded 250 of 240 sent" in table
