"""A crash between the sink's commit and Spark's commit log (``app.pipeline``, steps 3 and 4),
in process on real Kafka, real Spark and the emulator: the next start replays the batch, the
sink finds its label committed and loads nothing, and the query goes on from the same state.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.pipeline import detach_listeners
from benchmarks.idle import order_txn
from devstack.kafka.admin import create_topic, produce
from devstack.kafka.broker import KafkaBroker
from devstack.starrocks.launcher import EmulatorHandle
from tests.fixtures.kafka import ExternalBroker
from tests.integration.app.test_batch_writer import Recorder
from tests.integration.app.test_one_job_per_batch import start, topic_config

pytestmark = pytest.mark.integration


def two_orders_and_an_open_one(bootstrap: str, topic: str) -> None:
    """Orders 1 and 101 whole; order 2 still open, so the state store carries it over."""
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [*order_txn(1), *order_txn(2, end=False)], partition=0, key=b"k")
    produce(bootstrap, topic, order_txn(101), partition=1, key=b"k")


def orders(emulator: EmulatorHandle) -> list[int]:
    return [r[0] for r in emulator.sql("SELECT order_id FROM demo.orders ORDER BY order_id")]


def run_available(spark: Any, config: Any) -> Recorder:
    """Start the pipeline's query, process everything in Kafka, stop; what it recorded."""
    recorder = Recorder()
    query = start(spark, config, recorder)
    try:
        query.processAllAvailable()  # raises what failed the query
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
        detach_listeners(spark)
        recorder.sink.close()
    return recorder


def test_a_batch_the_sink_committed_but_spark_did_not_record_is_replayed_and_skipped(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
) -> None:
    emulator = starrocks_emulator
    bootstrap = kafka_broker.bootstrap
    topic = f"replay-{uuid.uuid4().hex[:8]}"
    # Order 2 is still open when the batch ends: the state store carries it over the replay.
    two_orders_and_an_open_one(bootstrap, topic)
    checkpoint = tmp_path / "ck"
    config = topic_config(emulator, bootstrap, topic, checkpoint)

    first = run_available(spark, config)
    assert [(s.batch_id, s.outcome) for s in first.seen] == [(0, "committed")]
    assert orders(emulator) == [1, 101]

    # Spark's state after a crash right after the sink's commit: the batch is in the offset log
    # and its state is written, but the commit log does not have it.
    for name in ("0", ".0.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    produce(bootstrap, topic, order_txn(2)[2:], partition=0, key=b"k")  # order 2's END

    second = run_available(spark, config)
    replayed, after = second.seen
    assert (replayed.batch_id, replayed.outcome, replayed.skipped) == (0, "already_applied", True)
    assert (after.batch_id, after.outcome, after.transactions) == (1, "committed", 1)
    assert orders(emulator) == [1, 2, 101]
    # One StarRocks transaction per batch, none for the replay.
    labels = emulator.control.labels("demo")
    assert sorted(labels.values()) == ["VISIBLE", "VISIBLE"], labels
    assert sorted((checkpoint / "commits").glob("[0-9]*")) == [
        checkpoint / "commits" / "0",
        checkpoint / "commits" / "1",
    ]


def test_a_replayed_batch_keeps_the_limits_it_first_ran_with(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
) -> None:
    """The start after the crash lowers max-txn-bytes below open order 2's buffered row. Batch
    0's replay must keep order 2 open as its first run did (the sink skips its committed
    label, so a rejection there would reach no table and no dead letter); batch 1, under the
    new limit, gets only order 2's END, and commits it whole."""
    emulator = starrocks_emulator
    bootstrap = kafka_broker.bootstrap
    topic = f"limits-{uuid.uuid4().hex[:8]}"
    two_orders_and_an_open_one(bootstrap, topic)
    checkpoint = tmp_path / "ck"

    def run(*extra: str) -> Recorder:
        return run_available(spark, topic_config(emulator, bootstrap, topic, checkpoint, *extra))

    run()
    assert orders(emulator) == [1, 101]
    for name in ("0", ".0.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    produce(bootstrap, topic, order_txn(2)[2:], partition=0, key=b"k")  # order 2's END

    second = run("assembler.max-txn-bytes=10")

    assert [(s.batch_id, s.outcome) for s in second.seen] == [
        (0, "already_applied"),
        (1, "committed"),
    ]
    assert orders(emulator) == [1, 2, 101]
    assert emulator.sql("SELECT COUNT(*) FROM demo._cdc_dead_letter") == [(0,)]
    spans = json.loads((checkpoint / "cdc-txn-limits.json").read_text())["spans"]
    assert [(first, limits[1]) for first, limits in spans] == [(0, 256 * 2**20), (1, 10)]


def test_a_batch_spark_recorded_whose_commit_behind_was_lost_is_replayed_by_a_rewind(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
) -> None:
    """Commit behind (sinks/starrocks/behind.py): Spark records batch 0, its commit fails and
    an FE restart cancels its transaction. The next batch stops the query; the next start
    rewinds the checkpoint and replays batch 0, exactly once, its open order carried over."""
    emulator = starrocks_emulator
    bootstrap = kafka_broker.bootstrap
    topic = f"rewind-{uuid.uuid4().hex[:8]}"
    two_orders_and_an_open_one(bootstrap, topic)
    checkpoint = tmp_path / "ck"
    config = topic_config(
        emulator, bootstrap, topic, checkpoint, "starrocks.sink.commit-behind=true"
    )

    emulator.control.fail_next(
        "commit", 2, status="FAILED", message="Can not commit CANCELLED transaction 1, label is x"
    )  # the commit and its re-send once the label is found uncommitted: the sink checks first
    first = Recorder()
    query = start(spark, config, first)
    try:
        query.processAllAvailable()  # batch 0 loaded, Spark records it, its commit fails
        assert (checkpoint / "commits" / "0").exists()
        emulator.control.restart()  # the FE cancels the begun, uncommitted task
        produce(bootstrap, topic, order_txn(2)[2:], partition=0, key=b"k")  # order 2's END
        with pytest.raises(Exception, match="COMMIT_BEHIND_FAILED"):
            query.processAllAvailable()  # batch 1 finds batch 0 not committed: the query stops
    finally:
        query.stop()
        detach_listeners(spark)
        first.sink.close()
    assert [(s.batch_id, s.outcome) for s in first.seen] == [(0, "committing")]
    assert orders(emulator) == []

    second = Recorder()
    query = start(spark, config, second)  # recovery: the lost label, then the rewind
    try:
        query.processAllAvailable()
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
        detach_listeners(spark)
        second.sink.close()
    assert [(s.batch_id, s.outcome) for s in second.seen] == [(0, "committing"), (1, "committing")]
    assert [s.transactions for s in second.seen] == [2, 1]
    assert orders(emulator) == [1, 2, 101]
    states = sorted(emulator.control.labels("demo").values())
    assert states.count("VISIBLE") == 2, states  # batch 0's next attempt and batch 1
