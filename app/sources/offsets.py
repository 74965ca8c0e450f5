"""Offsets as Spark's Kafka connector writes them, and the pure planning rules over them.

No Spark, no Kafka client here: the driver-side reader and the executor-side range reader call
these functions, and tests drive them directly.

The offset JSON is the connector's: ``{"topic": {"0": 23, "1": 42}}`` where each number is the
next offset to read (exclusive end of what was read). In ``startingOffsets`` ``-2`` means
earliest and ``-1`` latest, as in Spark.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]


def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` to the connector's ``{"t": {"p": o}}`` (sorted, so it is stable)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json_dict(data: Mapping[str, object]) -> PartitionOffsets:
    """The connector's ``{"t": {"p": o}}`` to ``{(t, p): o}``.

    Raises:
        ValueError: the structure is not topic -> partition -> integer offset.
    """
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        if not isinstance(parts, Mapping):
            msg = f"offsets for topic {topic!r} must be an object of partition -> offset"
            raise ValueError(msg)
        for partition, offset in parts.items():
            if isinstance(offset, bool) or not isinstance(offset, int):
                msg = f"offset of {topic}/{partition} must be an integer, got {offset!r}"
                raise ValueError(msg)
            out[(str(topic), int(partition))] = offset
    return out


def rate_limit(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_rows: int,
) -> PartitionOffsets:
    """Cap ``latest`` so that about ``max_rows`` records are read, shared in proportion.

    Spark's ``KafkaMicroBatchStream.rateLimit``: each partition gets ``max_rows * size / total``
    (floored, but at least 1 if it has data, so small partitions never starve). The rounding up
    of tiny shares can let one batch exceed ``max_rows`` by up to the number of partitions, as
    in Spark. Partitions missing from ``start`` are assumed to start at 0 (new partitions).
    """
    sizes = {tp: end - start.get(tp, 0) for tp, end in latest.items() if end > start.get(tp, 0)}
    total = sum(sizes.values())
    if total <= max_rows:
        return dict(latest)
    capped: PartitionOffsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            capped[tp] = end
            continue
        share = max_rows * (size / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        capped[tp] = min(end, start.get(tp, 0) + step)
    return capped


@dataclass(frozen=True)
class RangeDecision:
    """What to read of a planned range given the log's current bounds.

    ``lost`` is the number of planned records that are gone (0 = no data loss); ``start``/``end``
    are what can still be read.
    """

    start: int
    end: int
    lost: int


def check_range(start: int, end: int, log_start: int, log_end: int) -> RangeDecision:
    """Compare a planned ``[start, end)`` with the log's ``[log_start, log_end)``.

    Records below ``log_start`` were deleted (retention, ``DeleteRecords``); records at or
    above ``log_end`` that were planned are gone too (the log was truncated or recreated).
    """
    read_start = max(start, log_start)
    read_end = min(end, log_end)
    if read_end < read_start:
        read_end = read_start
    lost = (read_start - start) + (end - read_end)
    return RangeDecision(start=read_start, end=max(read_start, read_end), lost=max(0, lost))


def data_loss_message(topic: str, partition: int, start: int, end: int, low: int, high: int) -> str:
    """The one text every data-loss report uses: what is gone and how to continue."""
    return (
        f"data loss on {topic}/{partition}: the query must read offsets [{start}, {end}) but the "
        f"log now holds [{low}, {high}) (retention, deleted records, or a recreated topic). "
        "Records in that gap are gone. To continue from what exists, restart with "
        "failOnDataLoss=false (the skipped range is logged), or start a new checkpoint."
    )
