"""Real Apache Kafka (KRaft, one node) for the local stack, from the jars `make setup` resolves.

Used by tests, benchmarks and ``python -m devstack.kafka``; product code never imports it.
"""

from devstack.kafka.admin import (
    add_partitions,
    create_topic,
    produce,
    produce_by_partition,
    topic_partitions,
    wait_until_ready,
)
from devstack.kafka.broker import (
    BrokerHandle,
    KafkaBroker,
    broker_classpath,
    free_port,
    start_broker,
)
from devstack.kafka.errors import BrokerClientError, BrokerError, BrokerStartError

__all__ = [
    "BrokerClientError",
    "BrokerError",
    "BrokerHandle",
    "BrokerStartError",
    "KafkaBroker",
    "add_partitions",
    "broker_classpath",
    "create_topic",
    "free_port",
    "produce",
    "produce_by_partition",
    "start_broker",
    "topic_partitions",
    "wait_until_ready",
]
