"""An idle pipeline (spark-submit.sh, real Kafka, emulator) runs no micro-batch and opens no
StarRocks transaction, even with an open transaction's timeout pending in the state store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.idle import TOPIC, order_txn
from devstack.kafka.admin import create_topic, produce
from devstack.pipeline_process import PipelineProcess
from devstack.stack import LOCAL_CONFIG, LocalStack, wait_caught_up

pytestmark = pytest.mark.e2e

NAME = "idle"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    with LocalStack(tmp_path / "stack") as s:
        s.apply_ddl()
        yield s


def batches(checkpoint: Path) -> int:
    """Micro-batches Spark completed, data or not: one file each in the checkpoint's commits/."""
    commits = checkpoint / "commits"
    return sum(1 for f in commits.iterdir() if f.name.isdigit()) if commits.exists() else 0


def test_idle_pipeline_runs_no_batch_and_no_starrocks_transaction(
    stack: LocalStack, tmp_path: Path
) -> None:
    create_topic(stack.bootstrap, TOPIC, 1)
    produce(stack.bootstrap, TOPIC, [*order_txn(1), *order_txn(2)], partition=0, key=b"k")
    checkpoint = tmp_path / "checkpoint"
    overrides = stack.pipeline_overrides(TOPIC, checkpoint, NAME)
    proc = PipelineProcess(LOCAL_CONFIG, overrides, tmp_path / "pipeline.log").start()
    try:
        conn = stack.connect()
        try:
            assert wait_caught_up(conn, NAME, TOPIC, {0: 6}, 240)
        finally:
            conn.close()
        # An open transaction: a processing-time timeout is now pending in the state store.
        produce(stack.bootstrap, TOPIC, order_txn(3, end=False), partition=0, key=b"k")
        deadline = time.monotonic() + 60
        while "in       2" not in "\n".join(proc.lines) and time.monotonic() < deadline:
            time.sleep(0.2)  # the batch that read BEGIN + DATA (2 records)
        time.sleep(2)
        assert stack.emulator is not None
        done, txns = batches(checkpoint), len(stack.emulator.control.transactions())
        assert done > 0
        time.sleep(6)  # six triggers of 1 s
        assert batches(checkpoint) == done, proc.lines[-5:]
        assert len(stack.emulator.control.transactions()) == txns
    finally:
        assert proc.stop() == 0
