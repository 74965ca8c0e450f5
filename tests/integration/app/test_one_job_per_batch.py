"""The whole query in process (real Kafka, real Spark, the real sink on the emulator): each
micro-batch is assembled, loaded and counted by ONE Spark job, and a batch whose load fails is
assembled again under a new label with the same rows and the same state, exactly once.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.config import AppConfig
from app.pipeline import detach_listeners, query_id_of, start_query
from demo.generate import GeneratorConfig, generate
from demo.verify import run
from demo.workload import WorkloadConfig
from devstack.kafka import create_topic
from devstack.kafka.broker import KafkaBroker
from devstack.starrocks.launcher import EmulatorHandle
from sinks.starrocks.sink import StarRocksSink
from tests.fixtures.kafka import ExternalBroker
from tests.integration.app.test_batch_writer import Recorder, emulator_config

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def produce_and_configure(
    kafka_broker: KafkaBroker | ExternalBroker, emulator: EmulatorHandle, tmp_path: Path
) -> tuple[Any, AppConfig]:
    """60 orders over 2 partitions in a fresh topic, and the app's config for them."""
    topic = f"onejob-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap, topic, 2)
    produced = generate(
        GeneratorConfig(
            bootstrap=kafka_broker.bootstrap,
            topic=topic,
            workload=WorkloadConfig(orders=60, partitions=2, seed=5),
        )
    )
    # Small batches: transactions straddle them, so the state store carries open ones.
    small = "source.max-offsets-per-trigger=70"
    return produced, topic_config(emulator, kafka_broker.bootstrap, topic, tmp_path / "ck", small)


def topic_config(
    emulator: EmulatorHandle, bootstrap: str, topic: str, checkpoint: Path, *extra: str
) -> AppConfig:
    """The app's config reading ``topic`` into the emulator, named and labelled after it."""
    return emulator_config(
        emulator,
        f"pipeline.name={topic}",
        f"pipeline.checkpoint-location={checkpoint}",
        "pipeline.progress=quiet",
        f"source.bootstrap-servers={bootstrap}",
        f"source.topics={topic}",
        f"starrocks.sink.label-prefix={topic}",
        "starrocks.sink.buffer-flush.interval-ms=200",
        *extra,
    )


def start(spark: Any, config: AppConfig, recorder: Recorder) -> Any:
    """Start the pipeline's query; ``recorder.sink`` is its sink (close it to settle commits)."""
    sink = StarRocksSink(config.starrocks, query_id_provider=lambda: query_id_of(spark))
    sink.open()
    recorder.sink = sink
    return start_query(spark, config, sink, recorder)


def test_each_batch_is_one_job_and_a_failed_load_is_redone_exactly_once(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
) -> None:
    emulator = starrocks_emulator
    produced, config = produce_and_configure(kafka_broker, emulator, tmp_path)
    total = sum(produced.txns_per_partition.values())
    # The first load of the run fails with a 5xx: that batch is redone under attempt 1.
    emulator.control.fail_next("load", 1, http_status=500, status="INTERNAL_ERROR", message="x")
    recorder = Recorder()
    query = start(spark, config, recorder)
    try:
        deadline = time.monotonic() + 240
        while sum(s.transactions for s in recorder.seen) < total:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, [
                (s.batch_id, s.transactions) for s in recorder.seen
            ]
            time.sleep(0.3)
        # Every record is in; with no new data no batch starts (pipeline.idle-batches off).
        while query.status["isTriggerActive"]:
            time.sleep(0.1)
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId))
        batches = len(recorder.seen)
    finally:
        query.stop()
        detach_listeners(spark)

    conn = emulator.connect()
    verdict = run(conn, truth=produced.truth)
    assert verdict.final.ok, verdict.to_dict()
    assert verdict.comparison is not None
    for table in verdict.comparison.tables:
        assert (table.missing, table.extra, table.wrong_version) == (0, 0, 0)
    # Straddling transactions: some batches ended with an open one, carried in the state.
    assert len(recorder.seen) >= 4
    retried = [s for s in recorder.seen if s.attempt == 1]
    assert len(retried) == 1
    assert retried[0].outcome == "committed"
    # One job per batch, plus the failed attempt's.
    assert len(jobs) == batches + 1


def test_a_stop_during_the_load_rolls_the_label_back_without_a_retry(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    emulator = starrocks_emulator
    _, config = produce_and_configure(kafka_broker, emulator, tmp_path)
    emulator.control.delay("load", 3.0)
    query = start(spark, config, Recorder())
    try:
        deadline = time.monotonic() + 120
        while emulator.control.faults():  # the delayed load is in flight once it is taken
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, "no load started"
            time.sleep(0.05)
    finally:
        query.stop()
        detach_listeners(spark)
    labels = emulator.control.labels("demo")
    assert list(labels.values()) == ["ABORTED"], labels
    assert emulator.sql("SELECT count(*) FROM demo.orders") == [(0,)]
    assert not [r for r in caplog.records if "batch retry" in r.getMessage()]
