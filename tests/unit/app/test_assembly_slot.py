"""The slot adapter as ``applyInPandasWithState`` calls it, with a stand-in for ``GroupState``."""

from __future__ import annotations

import gc
import pickle
from typing import Any

import pandas as pd
import pytest

from app.assembly import AssembleSlot
from assembler import AssemblerSettings, encode_event
from assembler.slots import SLOT_STATE_VERSION
from assembler.state import StateError
from tests.unit.assembler.builders import begin, data, end

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000


class FakeState:
    """What the adapter uses of Spark's ``GroupState``; keeps what it is given."""

    def __init__(self, stored: tuple[Any, ...] | None = None, timed_out: bool = False) -> None:
        self.stored = stored
        self.hasTimedOut = timed_out
        self.timeout: int | None = None
        self.now = NOW

    @property
    def exists(self) -> bool:
        return self.stored is not None

    @property
    def get(self) -> tuple[Any, ...]:
        assert self.stored is not None
        return self.stored

    def getCurrentProcessingTimeMs(self) -> int:
        return self.now

    def update(self, value: tuple[Any, ...]) -> None:
        self.stored = value

    def setTimeoutDuration(self, duration: int) -> None:
        self.timeout = duration


def chunk(*records: tuple[int, int, Any]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "topic": ["cdc"] * len(records),
            "partition": [p for p, _, _ in records],
            "offset": [o for _, o, _ in records],
            "value": [encode_event(e, "json") for _, _, e in records],
            "timestamp": pd.to_datetime([NOW] * len(records), unit="ms"),
        }
    )


def test_a_transaction_spanning_calls_is_emitted_whole_from_the_stored_slot() -> None:
    fn = AssembleSlot(AssemblerSettings(txn_timeout_ms=5_000))
    state = FakeState()
    first = chunk((0, 0, begin("a")), (0, 1, data("a", 1)), (1, 0, begin("b")))
    # Nothing to emit; the status rows say what each partition holds open, and since when.
    [status] = list(fn((7,), iter([first]), state))  # type: ignore[arg-type]
    assert set(status["kind"]) == {"STATUS"}
    assert sorted(
        zip(status["partition"], status["first_offset"], status["txn_id"], strict=True)
    ) == [(0, 0, "a"), (1, 0, "b")]
    assert set(status["source_ts_ms"]) == {NOW}
    assert state.stored is not None
    assert state.stored[:2] == (SLOT_STATE_VERSION, 2)
    assert state.timeout == 5_000
    second = chunk((0, 2, end("a", 1)), (1, 1, data("b", 2)), (1, 2, end("b", 1)))
    state.timeout = None
    out: pd.DataFrame = pd.concat(list(fn((7,), iter([second]), state)))  # type: ignore[arg-type]
    rows = out[out["kind"] == "ROW"]
    assert sorted(zip(rows["partition"], rows["txn_id"], strict=True)) == [(0, "a"), (1, "b")]
    closed = out[out["kind"] == "STATUS"]
    assert sorted(zip(closed["partition"], closed["first_offset"], strict=True)) == [
        (0, -1),
        (1, -1),
    ]
    assert state.timeout is None, "nothing is open: no timeout is set"


def test_without_spark_timeouts_the_slot_sets_none_and_keeps_that_when_pickled() -> None:
    # Spark refuses a timeout duration from a query without state timeouts (NoTimeout).
    fn: AssembleSlot = pickle.loads(
        pickle.dumps(AssembleSlot(AssemblerSettings(txn_timeout_ms=5), False))
    )
    state = FakeState()
    [status] = list(fn((7,), iter([chunk((0, 0, begin("a")))]), state))  # type: ignore[arg-type]
    assert list(status["kind"]) == ["STATUS"]
    assert state.timeout is None
    # Overdue and quiet: still rejected, in the next call that gives the slot records.
    state.now = NOW + 10
    later = chunk((1, 0, begin("b")))
    out: pd.DataFrame = pd.concat(list(fn((7,), iter([later]), state)))  # type: ignore[arg-type]
    rejected = out[out["kind"] != "STATUS"]
    assert set(rejected["txn_id"]) == {"a"}
    assert set(rejected["kind"]) == {"REJECT"}


def test_a_slot_state_of_another_version_is_refused_naming_the_slot() -> None:
    fn = AssembleSlot(AssemblerSettings())
    state = FakeState((SLOT_STATE_VERSION + 1, 0, b""))
    with pytest.raises(StateError, match=r"slot 7 .*incompatible release"):
        list(fn((7,), iter([]), state))  # type: ignore[arg-type]


def test_a_batch_leaves_the_collector_nothing_to_walk() -> None:
    """The batch's records and rows are freed before the collector is back on.

    Otherwise the collector's first allocation after the batch walks every one of them
    (0.2 µs a record in ``benchmarks.hot_paths``).
    """
    records = []
    for t in range(300):
        txn = f"t{t}"
        events = [begin(txn), *(data(txn, i) for i in range(1, 9)), end(txn, 8)]
        records += [(0, t * 10 + i, e) for i, e in enumerate(events)]
    batch = chunk(*records)
    fn = AssembleSlot(AssemblerSettings())
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    # Three tries: another thread of the test process may trigger a collection of its own;
    # without the fix every try collects.
    quiet = 0
    for _ in range(3):
        gc.collect()
        collections.clear()
        gc.callbacks.append(seen)
        try:
            frames = list(fn((0,), iter([batch]), FakeState()))  # type: ignore[arg-type]
        finally:
            gc.callbacks.remove(seen)
        assert sum(len(f) for f in frames) == 300 * 8 + 1  # and one STATUS row
        quiet += not collections
    assert quiet > 0, "the collector ran after every batch"
