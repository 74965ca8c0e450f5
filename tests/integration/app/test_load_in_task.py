"""Tasks that assemble and load (the default) write exactly what the load job writes, in one
Spark stage less: the same rows, the same dead letters, the same progress, from bad input too.
Real Kafka, real Spark local mode, the emulator.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.pipeline import detach_listeners
from demo.badinput import BadInputKind
from demo.generate import GeneratorConfig, generate
from demo.verify import run
from demo.workload import WorkloadConfig
from devstack.kafka import create_topic
from devstack.kafka.broker import KafkaBroker
from devstack.starrocks.launcher import EmulatorHandle
from tests.fixtures.kafka import ExternalBroker
from tests.integration.app.test_batch_writer import Recorder
from tests.integration.app.test_one_job_per_batch import start, topic_config

pytestmark = pytest.mark.integration

MAX_TXN_ROWS = 20
TABLES = {
    "orders": "order_id, customer_id, item_count, total_amount, version, order_status, "
    "updated_ts_ms",
    "order_items": "item_id, order_id, product_name, quantity, price, amount, version",
    "_cdc_dead_letter": "topic, kafka_partition, first_offset, row_seq, txn_id, last_offset, "
    "reason, payload, source_ts_ms",
    "_cdc_progress": "topic, kafka_partition, last_offset, last_txn_id",
}


def empty_tables(emulator: EmulatorHandle) -> None:
    existing = {name for (name,) in emulator.sql("SHOW TABLES FROM demo")}
    for table in TABLES.keys() & existing:
        emulator.sql(f"TRUNCATE TABLE demo.{table}")


def test_tasks_that_load_write_what_the_load_job_writes_in_one_stage_less(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
) -> None:
    emulator = starrocks_emulator
    topic = f"intask-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap, topic, 2)
    # Every bad-input class but the never-ended transaction (it needs idle batches to end).
    bad: dict[BadInputKind, int] = {
        kind: 1 for kind in BadInputKind if kind is not BadInputKind.TXN_TIMEOUT
    }
    produced = generate(
        GeneratorConfig(
            bootstrap=kafka_broker.bootstrap,
            topic=topic,
            workload=WorkloadConfig(orders=40, partitions=2, seed=11),
            bad_inputs=bad,
            max_txn_rows=MAX_TXN_ROWS,
        )
    )
    records = sum(produced.events_per_partition.values())
    written: dict[bool, dict[str, list[tuple[Any, ...]]]] = {}
    stages: dict[bool, set[int]] = {}
    for in_task in (True, False):
        config = topic_config(
            emulator,
            kafka_broker.bootstrap,
            topic,
            tmp_path / f"ck-{in_task}",
            f"starrocks.sink.load-in-task={str(in_task).lower()}",
            f"assembler.max-txn-rows={MAX_TXN_ROWS}",
            # Transactions straddle batches: the state carries open ones.
            "source.max-offsets-per-trigger=70",
        )
        empty_tables(emulator)  # other tests of the session, and the first round, wrote there
        query = start(spark, config, Recorder())
        try:
            deadline = time.monotonic() + 240
            while sum(p["numInputRows"] for p in query.recentProgress) < records:
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, "the pipeline did not read every record"
                time.sleep(0.3)
            while query.status["isTriggerActive"]:
                time.sleep(0.1)
            tracker = spark.sparkContext.statusTracker()
            jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(str(query.runId))]
            stages[in_task] = {len(job.stageIds) for job in jobs if job is not None}
        finally:
            query.stop()
            detach_listeners(spark)
        verdict = run(emulator.connect(), truth=produced.truth)
        assert verdict.final.ok, verdict.to_dict()
        written[in_task] = {
            table: emulator.sql(f"SELECT {columns} FROM demo.{table} ORDER BY {columns}")
            for table, columns in TABLES.items()
        }

    assert written[True] == written[False]
    rejected = sum(bad.txn.rejected_records for bad in produced.bad_transactions)
    assert len(written[True]["_cdc_dead_letter"]) == rejected > 0
    assert len(written[True]["_cdc_progress"]) == 2
    # Kafka read and assembly (+ load); the load job adds a stage of its own.
    assert stages == {True: {2}, False: {3}}


def test_a_checkpoint_of_the_load_job_path_goes_on_with_tasks_that_load(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
) -> None:
    """An upgrade: a query that loaded by its own job is restarted loading in its tasks."""
    emulator = starrocks_emulator
    topic = f"intask-up-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap, topic, 2)
    produced = generate(
        GeneratorConfig(
            bootstrap=kafka_broker.bootstrap,
            topic=topic,
            workload=WorkloadConfig(orders=40, partitions=2, seed=12),
        )
    )
    records = sum(produced.events_per_partition.values())
    checkpoint = tmp_path / "ck"
    read = 0
    for in_task, until in ((False, records // 3), (True, records)):
        config = topic_config(
            emulator,
            kafka_broker.bootstrap,
            topic,
            checkpoint,
            f"starrocks.sink.load-in-task={str(in_task).lower()}",
            "source.max-offsets-per-trigger=60",
        )
        if not in_task:
            empty_tables(emulator)
        query = start(spark, config, Recorder())
        try:
            deadline = time.monotonic() + 240
            while read + sum(p["numInputRows"] for p in query.recentProgress) < until:
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, "the pipeline did not read its records"
                time.sleep(0.2)
            while query.status["isTriggerActive"]:
                time.sleep(0.05)
            read += sum(p["numInputRows"] for p in query.recentProgress)
        finally:
            query.stop()
            detach_listeners(spark)
    assert read == records
    verdict = run(emulator.connect(), truth=produced.truth)
    assert verdict.final.ok, verdict.to_dict()
    assert verdict.comparison is not None
    for table in verdict.comparison.tables:
        assert (table.missing, table.extra, table.wrong_version) == (0, 0, 0)
