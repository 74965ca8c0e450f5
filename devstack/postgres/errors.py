"""Errors of the local PostgreSQL server (devstack only; product code never sees them)."""

from __future__ import annotations

from common.errors import CdcError, Terminal


class PostgresError(CdcError):
    """Something about the local PostgreSQL server went wrong."""


class PostgresStartError(PostgresError, Terminal):
    """PostgreSQL was not found, did not initialise, or did not accept connections in time."""
