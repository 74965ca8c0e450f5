"""The Python daemon's collector: full collections walk only what was not frozen."""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Iterator

import pytest

from app.pydaemon import FreezingCollector


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_survivors_are_frozen_once_per_round_of_imports(unfrozen: None) -> None:
    collector = FreezingCollector()
    assert gc.get_freeze_count() == 0
    collector.collect()
    frozen = gc.get_freeze_count()
    assert frozen > 0, "the first collection freezes what the worker imported"

    # No new modules: later tasks' objects stay collectable.
    later: list[list[int]] = [[] for _ in range(100)]
    collector.collect()
    assert gc.get_freeze_count() == frozen
    del later

    # A task that imported something: its modules are frozen with the next collection.
    sys.modules["_pydaemon_test_module"] = types.ModuleType("_pydaemon_test_module")
    try:
        collector.collect()
        assert gc.get_freeze_count() > frozen
    finally:
        del sys.modules["_pydaemon_test_module"]


def test_cyclic_garbage_of_tasks_is_still_collected(unfrozen: None) -> None:
    collector = FreezingCollector()
    collector.collect()

    class Node:
        def __init__(self) -> None:
            self.me = self

    Node()  # a reference cycle: only the cyclic collector frees it
    assert collector.collect() > 0


def test_the_rest_of_the_gc_module_passes_through() -> None:
    assert FreezingCollector().isenabled() is gc.isenabled()
