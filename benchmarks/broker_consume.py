"""The broker-consume ceiling: one confluent-kafka consumer reading a topic from the broker.

No Spark: the rate one process can pull records off the real Apache Kafka broker that
``devstack.stack.LocalStack`` runs, with the client's default fetch settings.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, TopicPartition


def raw_rate(bootstrap: str, topic: str, partitions: int, total: int) -> float:
    """Records per second to read ``total`` records from every partition's start.

    Offsets are assigned explicitly and never committed: the throwaway group id only satisfies
    the client, which requires one.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    started = time.perf_counter()
    try:
        while seen < total:
            for msg in consumer.consume(num_messages=min(10_000, total - seen), timeout=5):
                if msg.error() is None:
                    seen += 1
        return seen / (time.perf_counter() - started)
    finally:
        consumer.close()
