"""Turn a failed query's Java error into one line a user can act on.

Spark's Kafka connector reports lost records with error class ``KAFKA_DATA_LOSS.<reason>``
buried in a long Java stack; the pipeline prints the reason (topic-partition and offsets, in
Spark's own words) and what to do about it instead. Any other error is its first line, with
its root cause (the last ``Caused by:``) when a wrapper hides it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Spark renders the error class as a tag on the driver ("[KAFKA_DATA_LOSS.X]") but not when an
# executor's read fails inside foreachBatch; its first sentence is the same in both.
_DATA_LOSS = re.compile(
    r"\[KAFKA_DATA_LOSS(?:\.(?P<kind>[A-Z_]+))?\]"
    r"|Some data may have been lost because they are not available in Kafka any more"
)
_REASON = re.compile(
    r"Reason:\s*(?P<reason>.+?)(?:\s+with consumer group|\s+SQLSTATE|\n\s+at |\n\n|$)",
    re.DOTALL,
)

_UNCHANGED = (
    "The checkpoint and StarRocks are unchanged: nothing after the last committed batch was "
    "written."
)
_ADVICE = (
    "The records are no longer in Kafka: retention deleted them while the pipeline was down "
    "or behind, or the topic was deleted and re-created. To go on without them, restart with "
    "--set source.fail-on-data-loss=false (Spark then logs each skipped range at WARN); to "
    f"keep them, re-produce them into the topic first. {_UNCHANGED}"
)


# Spark's KAFKA_DATA_LOSS.PARTITIONS_DELETED: partitions in the checkpoint that the subscription
# no longer has. Retention is not the cause, and re-producing cannot help.
_DELETED_ADVICE = (
    "Partitions in the checkpoint are no longer subscribed: their topic was removed from "
    "source.topics, or deleted. If you removed it on purpose, start once with --set "
    "source.fail-on-data-loss=false (Spark drops its offsets and logs them at WARN), then "
    f"without it. {_UNCHANGED}"
)


_CAUSED_BY = re.compile(r"^\s*Caused by: (.+)$", re.MULTILINE)

_PARTITION = re.compile(r"topic partition (?P<topic>\S+)-(?P<partition>\d+)\b")

#: ``(topic, partition) -> the earliest offset Kafka still has`` (None when unknown).
EarliestOffset = Callable[[str, int], "int | None"]


def explain_query_failure(text: str, earliest: EarliestOffset | None = None) -> str:
    """One line for the log: the known cause and what to do, or the error's first line.

    Args:
        text: the query's exception, as text.
        earliest: asks Kafka where a partition now starts, to say exactly what is gone.
    """
    loss = _DATA_LOSS.search(text)
    if loss:
        found = _REASON.search(text, loss.end())
        reason = " ".join(found.group("reason").split()) if found else ""
        where = _PARTITION.search(reason)
        start = (
            earliest(where.group("topic"), int(where.group("partition")))
            if where and earliest
            else None
        )
        now = (
            f" (the earliest offset Kafka still has there is {start})" if start is not None else ""
        )
        advice = _DELETED_ADVICE if loss.group("kind") == "PARTITIONS_DELETED" else _ADVICE
        return f"Kafka data loss: {reason}{now}. {advice}"
    first = text.strip().splitlines()[0].strip() if text.strip() else "unknown error"
    # A wrapper ("Exception thrown in awaitResult:") says nothing: name the root cause too.
    causes = _CAUSED_BY.findall(text)
    root = causes[-1].strip() if causes else ""
    return f"{first} (caused by {root})" if root and root not in first else first


def kafka_earliest(client_settings: dict[str, str]) -> EarliestOffset:
    """An ``EarliestOffset`` that asks the source's brokers (driver side, one short call)."""

    def earliest(topic: str, partition: int) -> int | None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        try:
            # Inside: a setting librdkafka refuses loses the detail, not the failure's message.
            consumer = Consumer({**client_settings, "group.id": "cdc-failure-report"})
        except KafkaException:
            return None
        try:
            low, _high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=10
            )
            return int(low)
        except KafkaException:
            return None
        finally:
            consumer.close()

    return earliest
