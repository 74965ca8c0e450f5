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


def _worker_sockets(_: Any) -> tuple[str | None, list[str]]:
    """The worker's environment flag and the families of the sockets it holds open."""
    import os

    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    families = []
    # The inode's column in each table: /proc/net/unix has a path after it, or nothing.
    for family, column in (("unix", 6), ("tcp", 9), ("tcp6", 9)):
        with open(f"/proc/net/{family}") as f:
            next(f)  # header
            held = {line.split()[column] for line in f} & inodes
        families += [family] * len(held)
    return os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED"), families


def test_workers_talk_to_the_jvm_over_a_unix_domain_socket(spark: Any) -> None:
    # Loopback TCP cost ~40 ms per Python task (app.session.BASE_CONF).
    facts = spark.sparkContext.parallelize(range(2), 2).map(_worker_sockets).collect()
    assert {str(flag).lower() for flag, _ in facts} == {"true"}, facts
    assert all("unix" in families for _, families in facts), facts
