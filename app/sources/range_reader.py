"""Executor side: read exactly one planned offset range of one partition.

Called from :meth:`KafkaStreamReader.read` inside a Spark Python worker, once per task. The
range ``[start, end)`` comes from the driver's plan (and so from Spark's checkpoint); the reader
returns the records with offsets in it, in offset order, nothing else. A replayed batch gets
the same range and therefore the same records (minus any that retention has deleted since,
which ``failOnDataLoss`` governs).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, TopicPartition

from app.sources.client import MetadataClient, new_consumer
from app.sources.errors import DataLossError, KafkaClientError, KafkaReadTimeoutError
from app.sources.offsets import check_range, data_loss_message
from app.sources.options import KafkaSourceOptions
from app.sources.schema import ARROW_SCHEMA

logger = logging.getLogger(__name__)

# Upper bound of records per consume() call and per Arrow batch handed to Spark.
MAX_BATCH = 10_000
# One consume() call waits at most this long; the range as a whole gets poll_timeout_ms
# without progress. consume(num_messages=N) returns early only once N records are there
# (DESIGN.md §7), so we always ask for exactly what is left of the range.
POLL_INTERVAL_S = 1.0

_OUT_OF_RANGE = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})

Row = tuple[bytes | None, bytes | None, str, int, int, Any, int]


def read_range(
    options: KafkaSourceOptions, topic: str, partition: int, start: int, end: int
) -> Iterator[list[Message]]:
    """Yield lists of messages with ``start <= offset < end``, in offset order.

    Raises:
        DataLossError: planned records are gone and ``failOnDataLoss`` is true.
        KafkaReadTimeoutError: no progress for ``kafkaConsumer.pollTimeoutMs`` (transient:
            Spark's task retry or a query restart reads the same range again).
        KafkaClientError: the client reported a non-retriable error.
    """
    if end <= start:
        return
    consumer = new_consumer(options, "executor")
    try:
        metadata = MetadataClient(options, consumer)
        start, end = _checked(options, metadata, topic, partition, start, end)
        if end <= start:
            return
        consumer.assign([TopicPartition(topic, partition, start)])
        next_offset = start
        timeout_s = options.poll_timeout_ms / 1000
        last_progress = time.monotonic()
        while next_offset < end:
            wanted = min(end - next_offset, MAX_BATCH)
            messages = consumer.consume(num_messages=wanted, timeout=POLL_INTERVAL_S)
            batch: list[Message] = []
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() in _OUT_OF_RANGE:
                        start, end = _checked(options, metadata, topic, partition, next_offset, end)
                        next_offset = start
                        consumer.assign([TopicPartition(topic, partition, start)])
                        break
                    _raise_if_fatal(error, topic, partition, next_offset)
                    logger.warning(
                        "kafka fetch error topic=%s partition=%s offset=%s error=%s",
                        topic,
                        partition,
                        next_offset,
                        error,
                    )
                    continue
                offset = message.offset()
                if offset is None or offset < next_offset:
                    continue
                if offset >= end:
                    next_offset = end
                    break
                batch.append(message)
                next_offset = offset + 1
            if batch:
                last_progress = time.monotonic()
                yield batch
                continue
            if next_offset >= end:
                break
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position >= end:
                # Only offsets without records (transaction markers, compaction) were left.
                break
            if time.monotonic() - last_progress > timeout_s:
                msg = (
                    f"reading {topic}/{partition} offsets [{next_offset}, {end}) made no progress "
                    f"for {timeout_s:.0f}s on {options.bootstrap_servers}; the broker may be down "
                    "or slow. Spark retries the task; raise kafkaConsumer.pollTimeoutMs to wait "
                    "longer"
                )
                raise KafkaReadTimeoutError(msg)
    finally:
        consumer.close()


def _checked(
    options: KafkaSourceOptions,
    metadata: MetadataClient,
    topic: str,
    partition: int,
    start: int,
    end: int,
) -> tuple[int, int]:
    low, high = metadata.watermarks(topic, partition)
    decision = check_range(start, end, low, high)
    if decision.lost == 0:
        return start, end
    text = data_loss_message(topic, partition, start, end, low, high)
    if options.fail_on_data_loss:
        raise DataLossError(text)
    logger.warning(
        "skipping lost records (failOnDataLoss=false) topic=%s partition=%s planned=[%s,%s) "
        "reading=[%s,%s) lost=%s",
        topic,
        partition,
        start,
        end,
        decision.start,
        decision.end,
        decision.lost,
    )
    return decision.start, decision.end


def _raise_if_fatal(error: KafkaError, topic: str, partition: int, offset: int) -> None:
    if error.fatal() or not (error.retriable() or error.code() < 0):
        msg = (
            f"reading {topic}/{partition} at offset {offset} failed: {error}; "
            "check the kafka.* options and ACLs"
        )
        raise KafkaClientError(msg)


def _spark_timestamp_type(kind: int) -> int:
    # confluent-kafka: 0 none, 1 create time, 2 log append time; Spark's connector (Java
    # TimestampType ids): -1 none, 0 create time, 1 log append time.
    return kind - 1


def to_record_batch(messages: list[Message], topic: str, partition: int) -> pa.RecordBatch:
    """Messages as one Arrow batch in the connector's schema (the fast path into Spark)."""
    n = len(messages)
    stamps = [m.timestamp() for m in messages]
    columns = [
        pa.array([m.key() for m in messages], type=pa.binary()),
        pa.array([m.value() for m in messages], type=pa.binary()),
        pa.array([topic] * n, type=pa.string()),
        pa.array([partition] * n, type=pa.int32()),
        pa.array([m.offset() for m in messages], type=pa.int64()),
        pa.array([ms * 1000 for _, ms in stamps], type=ARROW_SCHEMA.field("timestamp").type),
        pa.array([_spark_timestamp_type(kind) for kind, _ in stamps], type=pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def to_rows(messages: list[Message], topic: str, partition: int) -> Iterator[Row]:
    """Messages as plain tuples (the slower path, kept for comparison: rowFormat=tuples)."""
    from datetime import UTC, datetime, timedelta

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for m in messages:
        kind, ms = m.timestamp()
        yield (
            m.key(),
            m.value(),
            topic,
            partition,
            m.offset() or 0,
            epoch + timedelta(milliseconds=ms),
            _spark_timestamp_type(kind),
        )
