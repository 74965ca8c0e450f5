"""confluent-kafka consumers for the source: configuration and driver-side metadata calls.

Two users: :class:`app.sources.kafka_source.KafkaStreamReader` on the driver (partition lists
and watermarks, one long-lived consumer) and :mod:`app.sources.range_reader` on executors (one
short-lived consumer per planned range). Neither joins a group or commits anything.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from app.sources.errors import KafkaClientError, KafkaMetadataError
from app.sources.options import KafkaSourceOptions

logger = logging.getLogger(__name__)

T = TypeVar("T")

# librdkafka's default read_committed hides aborted transactions and makes the "latest" offset
# we plan with the last stable offset, so a planned range never waits on an open transaction.
DEFAULT_ISOLATION = "read_committed"


def consumer_conf(options: KafkaSourceOptions, role: str) -> dict[str, Any]:
    """The client settings for a driver (``role="driver"``) or executor consumer."""
    conf: dict[str, Any] = {
        "bootstrap.servers": options.bootstrap_servers,
        "isolation.level": DEFAULT_ISOLATION,
        # Some brokers (noida-db) ignore fetch.max.bytes; a fetch larger than librdkafka's
        # receive limit would fail, so allow big responses.
        "receive.message.max.bytes": 200_000_000,
        "client.id": f"cdc-kafka-source-{role}",
    }
    conf.update(options.client_conf)
    conf.update(
        {
            # A group id is required by the client but never used: we assign(), never
            # subscribe(), so there is no rebalance and no group membership.
            "group.id": conf.get("group.id", f"{options.group_id_prefix}-{uuid.uuid4().hex}"),
            # Spark's checkpoint owns offsets: the source never commits or stores them.
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # A start below the log start must surface as an error (data loss), not a silent jump.
            "auto.offset.reset": "error",
            # End of partition is known from the plan; EOF events would only add noise.
            "enable.partition.eof": False,
        }
    )
    return conf


def new_consumer(options: KafkaSourceOptions, role: str) -> Consumer:
    """Create a consumer; a bad client setting becomes a :class:`KafkaClientError`."""
    try:
        return Consumer(consumer_conf(options, role))
    except (KafkaException, ValueError, TypeError) as e:
        msg = (
            f"cannot create a Kafka consumer for {options.bootstrap_servers}: {e}; "
            "check the kafka.* options (they are librdkafka settings)"
        )
        raise KafkaClientError(msg) from e


class MetadataClient:
    """Partition lists and watermarks with bounded retries; driver side (and executors' checks).

    Retries follow Spark's ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``.
    """

    def __init__(self, options: KafkaSourceOptions, consumer: Consumer) -> None:
        self._options = options
        self._consumer = consumer
        self._timeout_s = max(1.0, min(30.0, options.poll_timeout_ms / 1000))

    def partitions(self, topic: str) -> list[int]:
        """Current partition ids of ``topic``; empty if the topic does not exist (yet)."""

        def call() -> list[int]:
            metadata = self._consumer.list_topics(topic, timeout=self._timeout_s)
            info = metadata.topics.get(topic)
            if info is None:
                return []
            if info.error is not None:
                if info.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    return []
                raise KafkaException(info.error)
            return sorted(info.partitions)

        return self._retry(call, f"listing partitions of {topic}")

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """``(log start offset, latest offset)`` of one partition, asked from the broker."""

        def call() -> tuple[int, int]:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self._timeout_s, cached=False
            )
            return int(low), int(high)

        return self._retry(call, f"fetching offsets of {topic}/{partition}")

    def _retry(self, call: Callable[[], T], what: str) -> T:
        attempts = self._options.fetch_offset_num_retries + 1
        last: Exception | None = None
        for attempt in range(attempts):
            try:
                return call()
            except KafkaException as e:
                last = e
                error = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                if error is not None and error.fatal():
                    msg = f"{what} on {self._options.bootstrap_servers} failed fatally: {e}"
                    raise KafkaClientError(msg) from e
                logger.warning(
                    "kafka metadata call failed what=%s attempt=%s/%s error=%s",
                    what,
                    attempt + 1,
                    attempts,
                    e,
                )
                if attempt + 1 < attempts:
                    time.sleep(self._options.fetch_offset_retry_interval_ms / 1000)
        msg = (
            f"{what} on {self._options.bootstrap_servers} failed after {attempts} attempts: "
            f"{last}; is the broker up? (raise fetchOffset.numRetries to wait longer)"
        )
        raise KafkaMetadataError(msg) from last
