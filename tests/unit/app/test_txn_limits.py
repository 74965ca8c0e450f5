"""Which transaction limits each batch applies (app/txn_limits.py): a change between starts
applies from the first batch a start plans, never to the batch Spark replays."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

from app.assembly import AssembleDebezium, AssembleSlot
from app.txn_limits import (
    LIMITS_FILE,
    BatchLimits,
    LimitsFileError,
    TxnLimits,
    plan_limits,
)
from assembler import AssemblerSettings
from assembler.debezium import DebeziumSettings
from tests.unit.app.test_assembly_slot import FakeState, chunk
from tests.unit.assembler.builders import begin, data, end

pytestmark = pytest.mark.unit

OLD = TxnLimits(1_000, 10_000, 60_000)
NEW = TxnLimits(1_000, 10, 60_000)


class FakeFiles:
    """The checkpoint folder: Spark's offset log and the files next to it."""

    def __init__(self, offsets: list[int], stored: Any = None) -> None:
        self.offsets = offsets
        self.files: dict[str, Any] = {} if stored is None else {LIMITS_FILE: stored}
        self.writes = 0
        self.commits: list[int] = []

    def batch_ids(self, folder: str) -> list[int]:
        return self.offsets if folder == "offsets" else self.commits

    def read_json(self, name: str) -> Any:
        value = self.files.get(name)
        return None if value == "garbage" else value

    def exists(self, name: str) -> bool:
        return name in self.files

    def write_json(self, name: str, value: Any) -> None:
        self.files[name] = json.loads(json.dumps(value))
        self.writes += 1


def plan(files: FakeFiles, limits: TxnLimits) -> BatchLimits:
    return plan_limits(files, limits, "/ck")  # type: ignore[arg-type]


def test_a_change_applies_from_the_next_planned_batch_not_to_the_replayed_one() -> None:
    files = FakeFiles([])
    assert plan(files, OLD).for_batch(0) == OLD  # a new checkpoint
    files.offsets = [0, 1, 2, 3, 4]  # batch 4 may be replayed: Spark decides, not the file
    limits = plan(files, NEW)
    assert [limits.for_batch(b) for b in (3, 4, 5, 9)] == [OLD, OLD, NEW, NEW]
    # The next start, with batch 7 the newest: the change is in the past.
    files.offsets = [5, 6, 7]
    again = plan(files, NEW)
    assert [again.for_batch(b) for b in (7, 8)] == [NEW, NEW]
    # And back, from batch 8 on.
    back = plan(files, OLD)
    assert [back.for_batch(b) for b in (7, 8)] == [NEW, OLD]


def test_unchanged_limits_write_nothing() -> None:
    files = FakeFiles([], None)
    plan(files, OLD)
    files.offsets = [0, 1, 2]
    plan(files, OLD)
    plan(files, OLD)
    assert files.writes == 1


def test_a_checkpoint_from_before_the_file_applies_the_new_limits_as_before() -> None:
    files = FakeFiles([0, 1, 2])
    assert plan(files, NEW).for_batch(2) == NEW
    assert files.files[LIMITS_FILE] == {"spans": [[0, NEW.to_json()]]}


@pytest.mark.parametrize(
    "stored",
    [
        "garbage",
        {"spans": []},
        {"spans": [[0, [1, 2]]]},
        {"spans": [[3, [1, 2, 3]], [1, [1, 2, 3]]]},
    ],
)
def test_a_damaged_file_is_refused_naming_it(stored: Any) -> None:
    with pytest.raises(LimitsFileError, match=rf"{LIMITS_FILE} in checkpoint /ck is damaged"):
        plan(FakeFiles([0], stored), OLD)
    # With no batch planned nothing can be replayed: the file is written afresh.
    assert plan(FakeFiles([], stored), OLD).for_batch(0) == OLD
    # Nor with the newest batch in the commit log.
    recorded = FakeFiles([0], stored)
    recorded.commits = [0]
    assert plan(recorded, NEW).for_batch(1) == NEW


def test_the_slot_function_applies_its_batchs_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A transaction over the task's max-txn-bytes is rejected; without a batch's limits the
    function's own settings apply."""
    records = chunk((0, 0, begin("a")), (0, 1, data("a", 1)), (0, 2, end("a", 1)))
    fn = AssembleSlot(AssemblerSettings(max_txn_bytes=OLD.max_txn_bytes))

    def kinds(limits: TxnLimits | None) -> set[str]:
        monkeypatch.setattr("app.assembly.task_limits", lambda: limits)
        out: pd.DataFrame = pd.concat(list(fn((0,), iter([records]), FakeState())))  # type: ignore[arg-type]
        return set(out["kind"]) - {"STATUS"}

    assert kinds(None) == {"ROW"}
    assert kinds(NEW) == {"REJECT"}
    assert kinds(OLD) == {"ROW"}


def test_the_debezium_function_applies_its_batchs_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    fn = AssembleDebezium(DebeziumSettings(transaction_topic="dbz.transaction", database="demo"))
    monkeypatch.setattr("app.assembly.task_limits", lambda: NEW)
    state = FakeState()
    assert list(fn(("dbz.transaction",), iter([]), state)) == []  # type: ignore[arg-type]
    assert TxnLimits.of(fn._assembler.settings.core) == NEW
