"""Errors of the local Kafka Connect + Debezium worker (devstack only)."""

from __future__ import annotations

from common.errors import CdcError, Terminal


class ConnectError(CdcError):
    """Something about the local Kafka Connect worker or its connector went wrong."""


class ConnectStartError(ConnectError, Terminal):
    """The worker did not start, or its connector did not reach RUNNING in time."""
