"""``cdc-kafka``: a Spark Python streaming data source over confluent-kafka.

Roles (PySpark's ``DataSourceStreamReader`` contract):

* Driver (Spark's Python streaming-source runner, one process per query): ``initialOffset``,
  ``latestOffset``, ``partitions``, ``commit``, ``stop``. Planning turns the brokers'
  watermarks into exact per-partition ranges; Spark writes each batch's end offsets to its
  checkpoint *before* the batch runs, so the checkpoint is the only owner of offsets.
* Executor (a Python worker per task): ``read`` consumes exactly one planned range.

Offsets are the official connector's JSON: ``{"topic": {"0": 23}}`` (next offset to read).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from app.sources.client import MetadataClient, new_consumer
from app.sources.errors import DataLossError
from app.sources.offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsets,
    data_loss_message,
    from_json_dict,
    rate_limit,
    to_json_dict,
)
from app.sources.options import KafkaSourceOptions, parse_options
from app.sources.range_reader import read_range, to_record_batch, to_rows
from app.sources.schema import SCHEMA
from common.errors import ConfigError

logger = logging.getLogger(__name__)

SOURCE_NAME = "cdc-kafka"


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of ``topic``/``partition``. Pickled to executors."""

    topic: str
    partition: int
    start: int
    end: int


class KafkaDataSource(DataSource):
    """Entry point Spark instantiates from ``format("cdc-kafka")`` with the reader's options."""

    @classmethod
    def name(cls) -> str:
        """The short name for ``spark.readStream.format(...)``."""
        return SOURCE_NAME

    def schema(self) -> StructType:
        """The official Kafka connector's schema (without ``headers``)."""
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - PySpark's name
        """Called by Spark on the driver when the query starts (and when planning reads)."""
        return KafkaStreamReader(parse_options(self.options))


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans exact offset ranges on the driver and reads them on executors.

    The instance is pickled into each task; the driver's Kafka consumer is created lazily and
    excluded from pickling, so executors only carry the parsed options.
    """

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = options
        self._metadata: MetadataClient | None = None
        self._consumer: Any = None
        self._target: PartitionOffsets | None = None
        self._initial: dict[str, Any] | None = None
        self._last_seen: PartitionOffsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_options": self._options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_options"])  # type: ignore[misc]

    # ---- driver side -------------------------------------------------------------------

    def _client(self) -> MetadataClient:
        if self._metadata is None:
            self._consumer = new_consumer(self._options, "driver")
            self._metadata = MetadataClient(self._options, self._consumer)
        return self._metadata

    def _latest(self) -> tuple[PartitionOffsets, PartitionOffsets]:
        """``(log starts, latest offsets)`` of every current partition of the subscription."""
        client = self._client()
        lows: PartitionOffsets = {}
        highs: PartitionOffsets = {}
        for topic in self._options.topics:
            partitions = client.partitions(topic)
            if not partitions:
                logger.warning("subscribed topic has no partitions (missing?) topic=%s", topic)
            for partition in partitions:
                low, high = client.watermarks(topic, partition)
                lows[(topic, partition)] = low
                highs[(topic, partition)] = high
        return lows, highs

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - PySpark's name
        """Driver: where a query without checkpoint starts (``startingOffsets``).

        Resolved to concrete offsets once per query run: Spark asks again on every trigger
        until the first batch is in its offset log, and "latest" must not move meanwhile.
        """
        if self._initial is None:
            self._initial = self._resolve_initial()
        return self._initial

    def _resolve_initial(self) -> dict[str, Any]:
        lows, highs = self._latest()
        starting = self._options.starting
        if starting.kind == "earliest":
            return to_json_dict(lows)
        if starting.kind == "latest":
            return to_json_dict(highs)
        missing = sorted(f"{t}/{p}" for t, p in highs if (t, p) not in starting.offsets)
        if missing:
            msg = (
                "startingOffsets must give every partition of the subscribed topics "
                f"(-2 earliest, -1 latest); missing: {', '.join(missing)}"
            )
            raise ConfigError(msg)
        resolved: PartitionOffsets = {}
        for tp, offset in starting.offsets.items():
            if tp not in highs:
                msg = f"startingOffsets names {tp[0]}/{tp[1]}, which does not exist"
                raise ConfigError(msg)
            low, high = lows[tp], highs[tp]
            if offset == EARLIEST:
                resolved[tp] = low
            elif offset == LATEST:
                resolved[tp] = high
            elif low <= offset <= high:
                resolved[tp] = offset
            else:
                text = data_loss_message(tp[0], tp[1], offset, offset, low, high)
                if self._options.fail_on_data_loss:
                    msg = f"startingOffsets: {text}"
                    raise DataLossError(msg)
                resolved[tp] = min(max(offset, low), high)
                logger.warning(
                    "startingOffsets out of range, clamped topic=%s partition=%s offset=%s used=%s",
                    tp[0],
                    tp[1],
                    offset,
                    resolved[tp],
                )
        return to_json_dict(resolved)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - PySpark's name
        """Driver, ``trigger(availableNow=True)`` only: freeze the target at today's end."""
        _, self._target = self._latest()

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 - PySpark's name
        """Driver: ``maxOffsetsPerTrigger`` as Spark's row limit, else read all."""
        limit = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802 - PySpark's name
        """Driver: the end offsets of the next batch (Spark checkpoints them before running it).

        New partitions (absent from ``start``) begin at offset 0. Partitions that vanished are
        data loss. The result never moves backwards and never passes the availableNow target.
        """
        begin = from_json_dict(start)
        _, highs = self._latest()
        self._last_seen = highs
        if self._target is not None:
            highs = {tp: min(h, self._target[tp]) for tp, h in highs.items() if tp in self._target}
        end: PartitionOffsets = {}
        for tp, offset in begin.items():
            if tp not in highs and (self._target is None or tp in self._target):
                self._lost(tp, f"{tp[0]}/{tp[1]} no longer exists (topic deleted or recreated)")
                continue
            high = highs.get(tp, offset)
            if high < offset:
                self._lost(
                    tp,
                    f"{tp[0]}/{tp[1]}: latest offset {high} is below the checkpoint's {offset} "
                    "(the log was truncated or the topic recreated)",
                )
                high = offset
            end[tp] = high
        for tp, high in highs.items():
            if tp not in begin:
                logger.info("new partition topic=%s partition=%s from=0", tp[0], tp[1])
                end[tp] = high
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        return to_json_dict(end)

    def _lost(self, tp: tuple[str, int], what: str) -> None:
        msg = (
            f"data loss: {what}. Restart with failOnDataLoss=false to continue without it, "
            "or start a new checkpoint."
        )
        if self._options.fail_on_data_loss:
            raise DataLossError(msg)
        logger.warning("%s (failOnDataLoss=false) topic=%s partition=%s", msg, tp[0], tp[1])

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802 - PySpark's name
        """Driver: the brokers' latest offsets as last seen by planning (no extra round trip)."""
        return None if self._last_seen is None else to_json_dict(self._last_seen)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """Driver: one task per partition with records in ``[start, end)``.

        A pure function of the two offsets, so a replayed batch plans the same tasks.
        """
        begin = from_json_dict(start)
        stop = from_json_dict(end)
        return [
            KafkaInputPartition(topic, partition, begin.get((topic, partition), 0), last)
            for (topic, partition), last in sorted(stop.items())
            if last > begin.get((topic, partition), 0)
        ]

    def commit(self, end: dict[str, Any]) -> None:
        """Driver: Spark finished the batch up to ``end``. Nothing to do: Kafka keeps no offsets."""

    def stop(self) -> None:
        """Driver: the query ended; close the metadata consumer."""
        if self._consumer is not None:
            self._consumer.close()
        self._consumer = None
        self._metadata = None

    # ---- executor side -----------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Executor: the records of one planned range, as Arrow batches (or tuples)."""
        assert isinstance(partition, KafkaInputPartition)
        p = partition
        batches = read_range(self._options, p.topic, p.partition, p.start, p.end)
        if self._options.row_format == "tuples":
            for messages in batches:
                yield from to_rows(messages, p.topic, p.partition)
            return
        for messages in batches:
            yield to_record_batch(messages, p.topic, p.partition)
