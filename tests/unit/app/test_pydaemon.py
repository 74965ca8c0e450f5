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


def frozen(obj: object) -> bool:
    # gc.get_objects() lists the three generations, never the frozen (permanent) one.
    return gc.is_tracked(obj) and not any(o is obj for o in gc.get_objects())


def test_survivors_are_frozen_once_per_round_of_imports(unfrozen: None) -> None:
    # Its own module table: the test's verdict must not depend on what other threads import.
    modules = dict(sys.modules)
    collector = FreezingCollector(modules)
    worker_state: list[int] = []
    collector.collect()
    assert frozen(worker_state), "the first collection freezes what the worker imported"

    # No new modules: later tasks' objects stay collectable.
    later: list[int] = []
    collector.collect()
    assert not frozen(later)

    # A task that imported something: its objects are frozen with the next collection,
    # even when another module was removed meanwhile (so the table's size is unchanged).
    modules.pop(next(iter(modules)))
    modules["_pydaemon_test_module"] = types.ModuleType("_pydaemon_test_module")
    collector.collect()
    assert frozen(later)
    assert frozen(modules["_pydaemon_test_module"])


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
