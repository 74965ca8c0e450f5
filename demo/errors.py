"""Errors of the demo tools, rooted at :class:`common.errors.CdcError`."""

from __future__ import annotations

from common.errors import CdcError, Terminal, Transient


class DemoError(CdcError):
    """Root of the demo tools' errors."""


class DemoConfigError(DemoError, Terminal):
    """A generator or verifier option is invalid; the message names the option."""


class TopicError(DemoError, Terminal):
    """The target topic is missing or has fewer partitions than the workload needs."""


class ProduceError(DemoError, Terminal):
    """Events were not delivered.

    Terminal on purpose: running the generator again re-sends every transaction (the same
    txn ids), so a person decides whether to recreate the topic first.
    """


class DatabaseError(DemoError, Transient):
    """StarRocks (MySQL protocol) could not be reached or a query failed; retry later."""


class TruthFileError(DemoError, Terminal):
    """The ground-truth file is missing, unreadable or of an unknown format."""
