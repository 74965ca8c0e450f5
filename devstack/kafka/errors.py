"""Errors of the local Kafka broker (devstack only; product code never sees them)."""

from __future__ import annotations

from common.errors import CdcError, Terminal, Transient


class BrokerError(CdcError):
    """Something about the local Apache Kafka broker went wrong."""


class BrokerStartError(BrokerError, Terminal):
    """The broker did not start or did not accept Kafka connections in time."""


class BrokerClientError(BrokerError, Transient):
    """An admin or produce call against the local broker failed; retrying may help."""
