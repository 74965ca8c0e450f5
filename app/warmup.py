"""Start the executors' Python workers while the driver plans the first micro-batch.

A query's first batch waits for each Python worker it needs to start: fork from the daemon,
import pandas, pyarrow, PySpark's worker and the assembler (~0.5-1 s of CPU each here). The
driver meanwhile reads the topics' layout, the sink's progress and the checkpoint and plans
the query, with the executors idle. A small job of one Python task per core, on a thread of
its own as soon as the session exists, starts the workers then, and Spark hands the idle
workers to the query's tasks (``spark.python.worker.reuse``, on by default). On the orders
workload here the first batch ended 0.6-1.9 s sooner (docs/benchmarks.md, "Changes that paid").
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: What the stateful tasks import first; the warm-up imports it too.
TASK_MODULE = "app.assembly"


def warm_python_workers(spark: SparkSession) -> threading.Thread | None:
    """Run :func:`warm` on a daemon thread; none when Spark does not reuse its workers."""
    if spark.sparkContext.getConf().get("spark.python.worker.reuse", "true").lower() != "true":
        return None
    thread = threading.Thread(target=_warm_quietly, args=(spark,), name="warm-python-workers")
    thread.daemon = True
    thread.start()
    return thread


def warm(spark: SparkSession) -> list[int]:
    """One Python task per core that imports what the query's tasks import; the workers' pids."""
    tasks = spark.sparkContext.defaultParallelism
    rows = spark.range(tasks, numPartitions=tasks).mapInPandas(_import, "pid long").collect()
    return sorted({row.pid for row in rows})


def _warm_quietly(spark: SparkSession) -> None:
    started = time.monotonic()
    try:
        # Local to this thread: PySpark pins each Python thread to a JVM thread of its own.
        spark.sparkContext.setJobDescription("warm Python workers (app/warmup.py)")
        pids = warm(spark)
    except Exception as error:  # a session stopped meanwhile, or workers that cannot start
        log.info("python workers not warmed, the first batch starts them: %s", error)
        return
    ms = (time.monotonic() - started) * 1000
    log.info("python workers warm workers=%d ms=%.0f", len(pids), ms)


def _import(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    import importlib

    import pandas as pd

    importlib.import_module(TASK_MODULE)
    for _ in frames:
        pass
    yield pd.DataFrame({"pid": [os.getpid()]})
