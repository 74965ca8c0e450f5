"""Spark runs the Python workers through ``app.pydaemon`` (spark.python.daemon.module)."""

from __future__ import annotations

from typing import Any


def _worker_facts(_: Any) -> tuple[str, str, int, str, list[str]]:
    import gc
    import sys
    import zipimport

    import pyspark
    from pyspark import daemon

    main = getattr(sys.modules["__main__"], "__spec__", None)
    archives = [
        entry
        for entry, finder in sys.path_importer_cache.items()
        if isinstance(finder, zipimport.zipimporter)
    ]
    return (
        main.name if main else "",
        type(vars(daemon)["gc"]).__name__,
        gc.get_freeze_count(),
        str(pyspark.__file__),
        archives,
    )


def test_workers_come_from_the_projects_daemon_and_freeze_their_imports(spark: Any) -> None:
    sc = spark.sparkContext
    facts = []
    # Reused workers: the collection after a worker's first task freezes its imports.
    for _ in range(4):
        facts += sc.parallelize(range(2), 2).map(_worker_facts).collect()
    assert {(main, collector) for main, collector, *_ in facts} == {
        ("app.pydaemon", "FreezingCollector")
    }
    assert max(frozen for _, _, frozen, *_ in facts) > 1000, facts


def test_workers_import_the_installed_pyspark_and_look_into_no_archive(spark: Any) -> None:
    import pyspark

    facts = spark.sparkContext.parallelize(range(2), 2).map(_worker_facts).collect()
    # Not from Spark's pyspark.zip (compiled anew by every worker), and no archive whose
    # directory a worker's first task would re-read (app.pydaemon.worker_path).
    assert {(origin, tuple(archives)) for *_, origin, archives in facts} == {
        (str(pyspark.__file__), ())
    }
