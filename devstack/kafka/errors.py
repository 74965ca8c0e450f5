"""Errors of the local Kafka stand-in (devstack only; product code never sees them)."""

from __future__ import annotations

from common.errors import CdcError, Terminal, Transient


class BrokerError(CdcError):
    """Something about the local noida-db broker went wrong."""


class BrokerStartError(BrokerError, Terminal):
    """The broker binary did not start or did not accept Kafka connections in time."""


class BrokerClientError(BrokerError, Transient):
    """An admin or produce call against the local broker failed; retrying may help."""
