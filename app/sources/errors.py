"""Errors of the Kafka source. Each names topic/partition/offsets and what to do.

They cross the executor -> driver boundary pickled, so each keeps ``__init__(message)``.
"""

from __future__ import annotations

from common.errors import CdcError, Terminal, Transient


class KafkaSourceError(CdcError):
    """Root of the Kafka source's errors."""


class DataLossError(KafkaSourceError, Terminal):
    """Records the checkpoint says we must read are gone (retention, deleted topic, reset log).

    Raised only with ``failOnDataLoss=true``; the message says how to continue knowingly.
    """


class KafkaReadTimeoutError(KafkaSourceError, Transient):
    """A planned offset range could not be read within the bounded time; a retry may succeed."""


class KafkaMetadataError(KafkaSourceError, Transient):
    """Partitions or watermarks could not be fetched from the brokers (after retries)."""


class KafkaClientError(KafkaSourceError, Terminal):
    """The Kafka client reported a non-retriable error (bad config, authorization, ...)."""
