"""The source record the assembler consumes: one Kafka record, already fetched."""

from __future__ import annotations

from typing import NamedTuple


class SourceRecord(NamedTuple):
    """One Kafka record as the Spark source delivers it (topic, partition, offset, value).

    ``value`` is the raw event bytes (``None`` for a tombstone, which the assembler rejects
    as undecodable). The Kafka record timestamp is not read: decisions take processing time
    (``now_ms``), and the column would cost a conversion per record for nothing.
    """

    topic: str
    partition: int
    offset: int
    value: bytes | None
    #: The Kafka record key; only the Debezium path reads it (a delete's key columns).
    key: bytes | None = None
