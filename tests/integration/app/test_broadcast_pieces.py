"""A stage's broadcast is serialized into a buffer of one piece (app.session.BASE_CONF).

Spark broadcasts every stage's task binary from the DAG scheduler's thread into a buffer of
``spark.broadcast.blockSize``, allocated and zeroed whatever the binary's size: at Spark's
4 MiB, 12 MiB of garbage a micro-batch for three broadcasts of 10-40 KiB.
"""

from __future__ import annotations

from typing import Any

from app.session import BASE_CONF, BROADCAST_PIECE

SCHEDULER_THREAD = "dag-scheduler-event-loop"
MIB = 2**20


def _allocated_by(spark: Any, thread: str) -> int:
    """Bytes the driver JVM's threads named ``thread`` have allocated since they started."""
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    mx = beans.getThreadMXBean()
    total = 0
    for tid in mx.getAllThreadIds():
        info = mx.getThreadInfo(tid)
        if info is not None and info.getThreadName() == thread:
            total += mx.getThreadAllocatedBytes(tid)
    return int(total)


def test_the_session_cuts_broadcasts_in_small_pieces(spark: Any) -> None:
    assert spark.sparkContext.getConf().get(BROADCAST_PIECE) == BASE_CONF[BROADCAST_PIECE] == "256k"


def test_a_stage_does_not_allocate_megabytes_to_broadcast_its_task(spark: Any) -> None:
    spark.range(1000).count()  # the scheduler's thread exists and its code is loaded
    before = _allocated_by(spark, SCHEDULER_THREAD)
    assert before > 0, "the DAG scheduler's thread was not found by name"
    jobs = 8
    for _ in range(jobs):
        spark.range(1000).count()  # two stages: the partial counts, then their sum
    per_job = (_allocated_by(spark, SCHEDULER_THREAD) - before) / jobs
    # At Spark's 4 MiB pieces a two-stage job allocates at least 8 MiB here.
    assert per_job < 2 * MIB, f"{per_job / MIB:.1f} MiB allocated to schedule a two-stage job"
