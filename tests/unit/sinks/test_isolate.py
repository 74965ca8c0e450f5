"""Finding the source transactions with filtered rows: the bisection and the probe protocol."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sinks.starrocks.errors import FilteredRowsError, LabelAlreadyExistsError, ServerBusyError
from sinks.starrocks.isolate import (
    FailureNotReproducedError,
    ProbeLabelUsedError,
    TooManyFilteredError,
    find_filtered,
    probe_load,
)
from sinks.starrocks.protocol import LoadState
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.txnapi import LoadFailure, LoadReport

pytestmark = pytest.mark.unit


def prober(bad: set[int]) -> tuple[list[Sequence[int]], object]:
    seen: list[Sequence[int]] = []

    def probe(part: Sequence[int]) -> str | None:
        seen.append(part)
        hit = sorted(set(part) & bad)
        return f"rows of {hit} filtered" if hit else None

    return seen, probe


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_bisection_finds_exactly_the_failing_units_in_few_probes(
    case: tuple[int, set[int]],
) -> None:
    n, bad = case
    seen, probe = prober(bad)
    if not bad:
        # The batch failed, but no unit does in a probe: nothing is named.
        with pytest.raises(FailureNotReproducedError, match=f"none of its {n} source"):
            find_filtered(list(range(n)), "batch failed", probe, max_bad=n)  # type: ignore[arg-type]
        return
    found, probes = find_filtered(list(range(n)), "batch failed", probe, max_bad=n)  # type: ignore[arg-type]
    assert [u for u, _ in found] == sorted(bad)
    assert probes == len(seen)
    assert probes <= len(bad) * (2 * math.ceil(math.log2(n)) + 1)
    for unit, why in found:
        # Named by a probe that saw it fail, never by the batch's own failure.
        assert str(unit) in why


def test_a_known_failing_half_is_not_probed_but_a_unit_is_named_only_once_seen_failing() -> None:
    seen, probe = prober({3})
    found, probes = find_filtered([0, 1, 2, 3], "batch failed", probe, max_bad=1)  # type: ignore[arg-type]
    # [0, 1] loads, so [2, 3] fails without a probe; then [2] loads, and [3] is seen failing.
    assert seen == [[0, 1], [2], [3]]
    assert (found, probes) == ([(3, "rows of [3] filtered")], 3)
    alone = find_filtered(["a"], "why", lambda _part: "a's rows", max_bad=1)
    assert alone == ([("a", "a's rows")], 1)


def test_a_failure_that_no_probe_reproduces_names_no_unit() -> None:
    """The batch's filtered row is outside the units (a dead letter's, say), or the failure
    went: the bisection must not infer its way down to a good unit and name it."""
    seen, probe = prober(set())
    with pytest.raises(FailureNotReproducedError, match=r"\(batch failed\), but none of its 4"):
        find_filtered([0, 1, 2, 3], "batch failed", probe, max_bad=4)  # type: ignore[arg-type]
    assert seen == [[0, 1], [2], [3]]
    # A unit that loads alone is left out even when others are found: here 0 and 1 fail
    # only together.
    probed: list[Sequence[int]] = []

    def together(part: Sequence[int]) -> str | None:
        probed.append(part)
        return f"rows of {list(part)} filtered" if 3 in part or part == [0, 1] else None

    found, probes = find_filtered([0, 1, 2, 3], "batch failed", together, max_bad=4)
    assert found == [(3, "rows of [3] filtered")]
    assert probed == [[0, 1], [2, 3], [0], [1], [2], [3]]
    assert probes == 6


def test_more_failing_units_than_allowed_stop_the_search() -> None:
    _, probe = prober({1, 5, 9})
    with pytest.raises(TooManyFilteredError, match=r"more than 2 source transactions"):
        find_filtered(list(range(10)), "batch failed", probe, max_bad=2)  # type: ignore[arg-type]


class RecordingApi:
    """Just enough of TxnApi: records calls; ``prepare`` of ``bad_table`` is filtered."""

    def __init__(self, bad_table: str | None = None) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self.bad_table = bad_table

    def begin(self, label: str, table: str | None) -> None:
        self.calls.append(("begin", label, table))

    def prepare(self, label: str, table: str) -> None:
        self.calls.append(("prepare", label, table))
        if table == self.bad_table:
            raise FilteredRowsError("too many filtered rows", error_url="http://be/err")

    def rollback(self, label: str, table: str | None) -> None:
        self.calls.append(("rollback", label, table))

    def commit(self, label: str, table: str | None) -> None:
        raise AssertionError("a probe is never committed")

    def get_load_state(self, label: str) -> LoadState:
        return LoadState.ABORTED


LABELS = {"orders": "p-orders", "items": "p-items"}


def loads(*failures: LoadReport) -> object:
    def load(labels: Mapping[str, str]) -> Sequence[LoadReport]:
        assert labels == LABELS
        return failures

    return load


def test_a_probe_prepares_every_table_and_always_rolls_back() -> None:
    api = RecordingApi()
    assert probe_load(api, RetryPolicy(), LABELS, loads()) is None  # type: ignore[arg-type]
    assert [c[0] for c in api.calls] == ["begin"] * 2 + ["prepare"] * 2 + ["rollback"] * 2

    filtered = RecordingApi(bad_table="items")
    why = probe_load(filtered, RetryPolicy(), LABELS, loads())  # type: ignore[arg-type]
    assert why == "too many filtered rows (rejected rows: http://be/err)"
    assert [c for c in filtered.calls if c[0] == "rollback"] == [
        ("rollback", "p-items", "items"),
        ("rollback", "p-orders", "orders"),
    ]


def test_a_probe_load_that_fails_otherwise_raises_after_rolling_back() -> None:
    api = RecordingApi()
    busy = LoadReport("orders", failure=LoadFailure("ServerBusyError", "busy", True))
    with pytest.raises(ServerBusyError, match="busy"):
        probe_load(api, RetryPolicy(), LABELS, loads(busy))  # type: ignore[arg-type]
    assert [c[0] for c in api.calls] == ["begin", "begin", "rollback", "rollback"]


class UsedLabelApi(RecordingApi):
    """``begin`` of ``used`` answers LABEL_ALREADY_EXISTS: a crashed run's probe."""

    def __init__(self, used: str) -> None:
        super().__init__()
        self.used = used

    def begin(self, label: str, table: str | None) -> None:
        if label == self.used:
            raise LabelAlreadyExistsError("label exists", existing_status="PREPARED")
        super().begin(label, table)


def test_a_crashed_runs_probe_label_is_rolled_back_whole_and_the_probe_moves_on() -> None:
    api = UsedLabelApi(used="p-orders")
    with pytest.raises(ProbeLabelUsedError, match="p-orders"):
        probe_load(api, RetryPolicy(), LABELS, loads())  # type: ignore[arg-type]
    # items was begun here; orders was the crashed run's: both end rolled back, nothing loaded.
    assert sorted(c for c in api.calls if c[0] != "begin") == [
        ("rollback", "p-items", "items"),
        ("rollback", "p-orders", "orders"),
    ]
