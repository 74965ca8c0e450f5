"""A transactional Kafka producer upstream (Kafka Connect with exactly-once source support,
as Debezium runs it): records of aborted Kafka transactions are never read, and the gaps they
and the transaction markers leave are no data loss. Real Kafka, real Spark, the emulator."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from benchmarks.idle import order_txn
from devstack.kafka.admin import create_topic, produce
from devstack.kafka.broker import KafkaBroker
from devstack.starrocks.launcher import EmulatorHandle
from tests.fixtures.kafka import ExternalBroker
from tests.integration.app.test_one_job_per_batch import topic_config
from tests.integration.app.test_replay import orders, run_available

pytestmark = pytest.mark.integration


def write(producer: Producer, topic: str, values: list[bytes], *, commit: bool) -> None:
    """``values`` in one Kafka transaction, committed or aborted."""
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, key=b"k", partition=0)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def transactional_topic(bootstrap: str, name: str) -> tuple[str, Producer]:
    """A new one-partition topic named after ``name``, and a transactional producer for it."""
    topic = f"{name}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-producer"})
    producer.init_transactions(30)
    return topic, producer


def test_records_of_aborted_kafka_transactions_are_never_read(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
) -> None:
    emulator = starrocks_emulator
    bootstrap = kafka_broker.bootstrap
    topic, producer = transactional_topic(bootstrap, "txnprod")
    write(producer, topic, order_txn(7), commit=False)  # a whole source txn, aborted
    write(producer, topic, order_txn(3, end=False), commit=False)  # a write that failed ...
    write(producer, topic, order_txn(3), commit=True)  # ... and its retry
    write(producer, topic, order_txn(1), commit=True)
    produce(bootstrap, topic, order_txn(2), partition=0, key=b"k")  # not transactional

    recorder = run_available(spark, topic_config(emulator, bootstrap, topic, tmp_path / "ck"))

    assert orders(emulator) == [1, 2, 3]
    assert emulator.sql("SELECT COUNT(*) FROM demo._cdc_dead_letter") == [(0,)]
    assert sum(s.rejected_records for s in recorder.seen) == 0


def test_a_partition_that_ends_on_a_commit_marker_holds_no_open_transaction(
    spark: Any,
    kafka_broker: KafkaBroker | ExternalBroker,
    starrocks_emulator: EmulatorHandle,
    tmp_path: Path,
) -> None:
    """Spark reads such a partition to the offset after the marker, which no consumer is
    handed: counting "consumed past the last emitted record" as open, the pipeline showed a
    transaction open there for good (``cdc_open_transactions``, the progress line)."""
    emulator = starrocks_emulator
    bootstrap = kafka_broker.bootstrap
    topic, producer = transactional_topic(bootstrap, "txnopen")
    write(producer, topic, order_txn(1), commit=True)
    write(producer, topic, order_txn(2), commit=True)
    config = topic_config(emulator, bootstrap, topic, tmp_path / "ck")

    first = run_available(spark, config)
    assert orders(emulator) == [1, 2]
    assert first.open_transactions == 0

    # A source transaction whose END is not written yet, in a committed Kafka transaction.
    write(producer, topic, order_txn(3, end=False), commit=True)
    second = run_available(spark, config)
    assert orders(emulator) == [1, 2]
    assert second.open_transactions == 1
