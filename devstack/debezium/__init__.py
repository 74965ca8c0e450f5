"""Real Debezium (Kafka Connect standalone + the PostgreSQL connector) for the local stack.

Used by tests, the Debezium demo and ``python -m devstack.debezium``; product code never
imports it.
"""

from devstack.debezium.connect import (
    ConnectHandle,
    DebeziumConnect,
    PostgresSource,
    connect_classpath,
    connector_properties,
    start_connect,
    worker_properties,
)
from devstack.debezium.errors import ConnectError, ConnectStartError

__all__ = [
    "ConnectError",
    "ConnectHandle",
    "ConnectStartError",
    "DebeziumConnect",
    "PostgresSource",
    "connect_classpath",
    "connector_properties",
    "start_connect",
    "worker_properties",
]
