"""Spark's Python daemon (``pyspark.daemon``), without a full garbage collection per task.

A reused Python worker runs ``gc.collect()`` after every task. A full collection walks every
object the collector tracks, and a worker that has imported pandas, pyarrow and the project
tracks ~85,000: 20-90 ms of CPU after each task, and a micro-batch runs several Python tasks
(docs/benchmarks.md). Here a worker freezes (``gc.freeze``) what survives a collection
whenever it has imported new modules since the last one: the collections after it walk only
what later tasks create. Module-level objects live as long as the worker anyway; the frozen
set grows only with imports, so what it could keep from the collector is bounded.

It also takes the archives Spark puts on a worker's path but the worker never imports from
off it (:func:`worker_path`).

Selected with ``spark.python.daemon.module=app.pydaemon`` (``app.session``), only where the
workers can import the project.
"""

from __future__ import annotations

import gc
import sys
import zipfile
from pathlib import Path
from typing import Any


class FreezingCollector:
    """Stands in for the ``gc`` module inside ``pyspark.daemon`` (its only use is collect)."""

    def __init__(self, modules: dict[str, Any] | None = None) -> None:
        self._modules = sys.modules if modules is None else modules
        self._at_freeze: tuple[int, str | None] = (0, None)

    def collect(self, generation: int = 2) -> int:
        """Collect, then freeze the survivors if modules were imported since the last freeze."""
        found = gc.collect(generation)
        imports = self._imports()
        if imports != self._at_freeze:
            self._at_freeze = imports
            gc.freeze()
        return found

    def _imports(self) -> tuple[int, str | None]:
        # Size and newest key: an import changes the newest key even when another module was
        # removed meanwhile (the size alone would then look unchanged).
        return len(self._modules), next(reversed(self._modules), None)

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)


def worker_path(path: list[str]) -> list[str]:
    """``path`` without the archives Spark adds that this worker would never import from.

    Spark puts ``<SPARK_HOME>/python/lib/pyspark.zip``, its py4j zip and the spark-core jar
    (``PythonUtils.sparkPythonPath``: for a build that packs PySpark into it) first on
    every Python worker's path. zipimport keeps no bytecode, so a worker compiled PySpark
    from the zip, and ``importlib.invalidate_caches()`` at a worker's first task re-reads
    the directory of every archive it has looked into, once per package imported from it
    (the jar alone has ~5,800 entries): ~0.1-0.5 s of CPU per new worker here. Dropped:

    - the zips, when SPARK_HOME is a pip-installed ``pyspark`` package that ``path`` also
      holds (the same release, with bytecode). Any other Spark's zips stay;
    - a jar with no Python module in it.
    """
    installed = {Path(p, "pyspark", "python", "lib").resolve() for p in path if _has(p, "pyspark")}
    with_py4j = any(_has(p, "py4j") for p in path)

    def unused(entry: str) -> bool:
        archive = Path(entry)
        if archive.suffix == ".jar":
            return not _holds_python(archive)
        if archive.suffix != ".zip" or archive.parent.resolve() not in installed:
            return False
        return archive.name == "pyspark.zip" or (archive.name.startswith("py4j-") and with_py4j)

    return [p for p in path if not unused(p)]


def _has(entry: str, package: str) -> bool:
    return not entry.endswith((".zip", ".jar")) and Path(entry, package, "__init__.py").is_file()


def _holds_python(archive: Path) -> bool:
    try:
        with zipfile.ZipFile(archive) as z:
            return any(name.endswith((".py", ".pyc")) for name in z.namelist())
    except (OSError, zipfile.BadZipFile):
        return True  # not ours to judge: left where Spark put it


if __name__ == "__main__":
    # Before the first import of pyspark, which would otherwise come from the zip. Importing
    # this module's package already made zipimporters for the archives: forget them too.
    kept = worker_path(sys.path)
    for entry in set(sys.path) - set(kept):
        sys.path_importer_cache.pop(entry, None)
    sys.path[:] = kept
    from pyspark import daemon

    daemon.gc = FreezingCollector()  # type: ignore[attr-defined,assignment]
    daemon.manager()
