"""Spark runs the Python workers through ``app.pydaemon`` (spark.python.daemon.module)."""

from __future__ import annotations

from typing import Any


def _worker_facts(_: Any) -> tuple[str, str, int]:
    import gc
    import sys

    from pyspark import daemon

    main = getattr(sys.modules["__main__"], "__spec__", None)
    return (main.name if main else "", type(vars(daemon)["gc"]).__name__, gc.get_freeze_count())


def test_workers_come_from_the_projects_daemon_and_freeze_their_imports(spark: Any) -> None:
    sc = spark.sparkContext
    facts = []
    # Reused workers: the collection after a worker's first task freezes its imports.
    for _ in range(4):
        facts += sc.parallelize(range(2), 2).map(_worker_facts).collect()
    assert {(main, collector) for main, collector, _ in facts} == {
        ("app.pydaemon", "FreezingCollector")
    }
    assert max(frozen for _, _, frozen in facts) > 1000, facts
