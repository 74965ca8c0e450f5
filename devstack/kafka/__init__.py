"""A local Kafka stand-in: a noida-db broker speaking only the Kafka protocol.

Used by tests, benchmarks and ``python -m devstack.kafka``; product code never imports it.
"""

from devstack.kafka.admin import add_partitions, create_topic, produce, wait_until_ready
from devstack.kafka.broker import BrokerHandle, KafkaBroker, broker_binary, start_broker
from devstack.kafka.errors import BrokerClientError, BrokerError, BrokerStartError

__all__ = [
    "BrokerClientError",
    "BrokerError",
    "BrokerHandle",
    "BrokerStartError",
    "KafkaBroker",
    "add_partitions",
    "broker_binary",
    "create_topic",
    "produce",
    "start_broker",
    "wait_until_ready",
]
