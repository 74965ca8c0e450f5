"""The source record the assembler consumes: one Kafka record, already fetched."""

from __future__ import annotations

from typing import NamedTuple


class SourceRecord(NamedTuple):
    """One Kafka record as the Spark source delivers it (topic, partition, offset, value).

    ``value`` is the raw event bytes (``None`` for a tombstone, which the assembler rejects
    as undecodable). ``timestamp_ms`` is the Kafka record timestamp; the core does not use it
    for decisions (processing time comes from ``now_ms``) but keeps it available to adapters.
    """

    topic: str
    partition: int
    offset: int
    value: bytes | None
    timestamp_ms: int | None = None
    #: The Kafka record key; only the Debezium path reads it (a delete's key columns).
    key: bytes | None = None
