"""Spark's Python daemon (``pyspark.daemon``), without a full garbage collection per task.

A reused Python worker runs ``gc.collect()`` after every task. A full collection walks every
object the collector tracks, and a worker that has imported pandas, pyarrow and the project
tracks ~85,000: 20-90 ms of CPU after each task, and a micro-batch runs several Python tasks
(docs/benchmarks.md). Here a worker freezes (``gc.freeze``) what survives a collection
whenever it has imported new modules since the last one: the collections after it walk only
what later tasks create. Module-level objects live as long as the worker anyway; the frozen
set grows only with imports, so what it could keep from the collector is bounded.

Selected with ``spark.python.daemon.module=app.pydaemon`` (``app.session``), only where the
workers can import the project.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

from pyspark import daemon


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


if __name__ == "__main__":
    daemon.gc = FreezingCollector()  # type: ignore[attr-defined,assignment]
    daemon.manager()
