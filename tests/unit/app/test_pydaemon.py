"""The Python daemon's collector: full collections walk only what was not frozen."""

from __future__ import annotations

import gc
import sys
import types
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.pydaemon import FreezingCollector, worker_path


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


def _archive(path: Path, *names: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for name in names:
            z.writestr(name, "")
    return str(path)


def _package(site: Path, name: str) -> None:
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("")


def test_workers_drop_the_zips_of_the_installed_pyspark_and_jars_without_python(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site-packages"
    _package(site, "pyspark")
    _package(site, "py4j")
    lib = site / "pyspark" / "python" / "lib"
    pyspark_zip = _archive(lib / "pyspark.zip", "pyspark/__init__.py")
    py4j_zip = _archive(lib / "py4j-0.10.9.9-src.zip", "py4j/__init__.py")
    core_jar = _archive(site / "pyspark" / "jars" / "spark-core.jar", "org/A.class")
    project = _archive(tmp_path / "project.zip", "app/__init__.py")
    # Spark's order: its archives first, then the launcher's and the environment's entries.
    path = [pyspark_zip, py4j_zip, core_jar, str(site), project]

    assert worker_path(path) == [str(site), project]


def test_workers_keep_what_they_may_import_from(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    _package(site, "pyspark")  # no py4j installed: its zip is the only one
    lib = site / "pyspark" / "python" / "lib"
    py4j_zip = _archive(lib / "py4j-0.10.9.9-src.zip", "py4j/__init__.py")
    # Another Spark's zip (SPARK_HOME elsewhere): not the installed release, kept.
    other = _archive(tmp_path / "spark" / "python" / "lib" / "pyspark.zip", "pyspark/__init__.py")
    packed_jar = _archive(tmp_path / "spark-core.jar", "org/A.class", "pyspark/__init__.py")
    not_a_zip = tmp_path / "broken.jar"
    not_a_zip.write_text("not a zip")
    path = [other, py4j_zip, packed_jar, str(not_a_zip), str(site)]

    assert worker_path(path) == path
