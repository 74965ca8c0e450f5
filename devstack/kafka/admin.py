"""Minimal admin and produce helpers for tests, benchmarks and the CLI (driver side only)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

# The typed stubs declare these in cimpl (confluent_kafka.admin re-exports them untyped).
from confluent_kafka.cimpl import NewPartitions, NewTopic

from devstack.kafka.errors import BrokerClientError, BrokerStartError


def wait_until_ready(bootstrap: str, timeout: float) -> None:
    """Block until a metadata request to ``bootstrap`` succeeds.

    Raises:
        BrokerStartError: no successful metadata call within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    admin = AdminClient({"bootstrap.servers": bootstrap})
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=min(2.0, max(0.1, deadline - time.monotonic())))
        except KafkaException as e:
            last = e
            time.sleep(0.1)
            continue
        if metadata.brokers:
            return
    msg = f"broker {bootstrap} did not answer a metadata request in {timeout:.0f}s: {last}"
    raise BrokerStartError(msg)


def create_topic(bootstrap: str, name: str, partitions: int = 1, timeout: float = 15.0) -> None:
    """Create ``name`` with ``partitions`` partitions and wait until its metadata shows them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout,
    )
    try:
        futures[name].result(timeout)
    except KafkaException as e:
        msg = f"creating topic {name} with {partitions} partitions on {bootstrap} failed: {e}"
        raise BrokerClientError(msg) from e
    _wait_partitions(admin, name, partitions, timeout)


def add_partitions(bootstrap: str, name: str, total: int, timeout: float = 15.0) -> None:
    """Grow topic ``name`` to ``total`` partitions (as ``kafka-topics --alter`` does)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_partitions([NewPartitions(name, total)], operation_timeout=timeout)
    try:
        futures[name].result(timeout)
    except KafkaException as e:
        msg = f"growing topic {name} to {total} partitions on {bootstrap} failed: {e}"
        raise BrokerClientError(msg) from e
    _wait_partitions(admin, name, total, timeout)


def topic_partitions(bootstrap: str, name: str, timeout: float = 10.0) -> int:
    """How many partitions topic ``name`` has (0 if the broker does not know it)."""
    return _partition_count(AdminClient({"bootstrap.servers": bootstrap}), name, timeout)


def _partition_count(admin: AdminClient, name: str, timeout: float) -> int:
    topic = admin.list_topics(name, timeout=timeout).topics.get(name)
    return len(topic.partitions) if topic is not None and topic.error is None else 0


def _wait_partitions(admin: AdminClient, name: str, partitions: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _partition_count(admin, name, timeout) >= partitions:
            return
        time.sleep(0.05)
    msg = f"topic {name} does not show {partitions} partitions after {timeout:.0f}s"
    raise BrokerClientError(msg)


#: librdkafka's ``RD_KAFKA_PARTITION_UA``, the producer's default: its partitioner chooses.
ANY_PARTITION = -1


def produce(
    bootstrap: str,
    topic: str,
    values: Iterable[bytes | None],
    *,
    partition: int | None = None,
    key: bytes | None = None,
    timeout: float = 60.0,
) -> int:
    """Produce ``values`` to ``topic`` (one partition if given), wait for every ack.

    Returns:
        The number of records acknowledged.

    Raises:
        BrokerClientError: a delivery failed or the flush did not finish in ``timeout``.
    """
    return produce_by_partition(bootstrap, topic, {partition: values}, key=key, timeout=timeout)


def produce_by_partition(
    bootstrap: str,
    topic: str,
    values: Mapping[int | None, Iterable[bytes | None]],
    *,
    key: bytes | None = None,
    timeout: float = 60.0,
) -> int:
    """Produce each partition's ``values`` (``None``: the partitioner's choice) with one producer.

    A producer per partition would pay its connection and idempotent id each time (~0.5 s).

    Returns:
        The number of records acknowledged.

    Raises:
        BrokerClientError: a delivery failed or the flush did not finish in ``timeout``.
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            # Batch small records together: tests and benchmarks produce many tiny values.
            "linger.ms": 5,
            # Order per partition must equal produce order (the tests compare offsets).
            "enable.idempotence": True,
        }
    )
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    count = 0
    for partition, partition_values in values.items():
        for value in partition_values:
            while True:
                try:
                    producer.produce(
                        topic,
                        value=value,
                        key=key,
                        partition=ANY_PARTITION if partition is None else partition,
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    # Local queue full: serve delivery reports to make room, then retry.
                    producer.poll(0.05)
            count += 1
    left = producer.flush(timeout)
    if left or errors:
        msg = (
            f"producing to {topic} on {bootstrap}: {left} not flushed, "
            f"{len(errors)} failed (first: {errors[:1]})"
        )
        raise BrokerClientError(msg)
    return count
