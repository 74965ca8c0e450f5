"""Real PostgreSQL for the local stack, from the machine's Debian binaries.

Used by tests, the Debezium demo and ``python -m devstack.postgres``; product code never
imports it.
"""

from devstack.postgres.errors import PostgresError, PostgresStartError
from devstack.postgres.server import (
    PostgresHandle,
    PostgresServer,
    find_pg_bin,
    start_postgres,
)

__all__ = [
    "PostgresError",
    "PostgresHandle",
    "PostgresServer",
    "PostgresStartError",
    "find_pg_bin",
    "start_postgres",
]
