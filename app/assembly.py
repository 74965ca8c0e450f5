"""The thin adapter between the pure assembler and ``applyInPandasWithState``.

It only converts: pandas chunks to :class:`~assembler.records.SourceRecord` lists, the
``GroupState`` tuple to :class:`~assembler.state.PartitionState` and back, and the core's
timeout deadline to a processing-time timeout. All decisions are the core's.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from itertools import repeat
from typing import TYPE_CHECKING, Any

import pandas as pd
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from app.txn_limits import TxnLimits, task_limits
from assembler.debezium import DEBEZIUM_STATE_FIELDS, DebeziumAssembler, DebeziumSettings
from assembler.machine import TransactionAssembler
from assembler.output import OUTPUT_FIELDS
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings
from assembler.slots import SLOT_STATE_FIELDS, SLOT_STATE_VERSION, SlotAssembler
from assembler.state import STATE_FIELDS, PartitionState, StateError
from sinks.starrocks.intask import REPORT_COLUMNS
from sinks.starrocks.loader import report_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, GroupedData

    from app.task_load import LoadInTask

OUTPUT_COLUMNS = [name for name, _ in OUTPUT_FIELDS]
OUTPUT_DDL = ", ".join(f"`{name}` {kind}" for name, kind in OUTPUT_FIELDS)
STATE_DDL = ", ".join(f"`{name}` {kind}" for name, kind in STATE_FIELDS)
SLOT_STATE_DDL = ", ".join(f"`{name}` {kind}" for name, kind in SLOT_STATE_FIELDS)

# Columns of the Kafka source schema the assembler needs (key, timestamp and timestampType are
# unused).
SOURCE_COLUMNS = ("topic", "partition", "offset", "value")
DEBEZIUM_STATE_DDL = ", ".join(f"`{name}` {kind}" for name, kind in DEBEZIUM_STATE_FIELDS)
# The Debezium path reads the record key too: a delete's key columns are the key's fields.
DEBEZIUM_SOURCE_COLUMNS = (*SOURCE_COLUMNS, "key")
#: The grouping column of the Debezium path: one group per source (connector).
SOURCE_GROUP = "_cdc_source"


def assemble_transactions(
    events: DataFrame,
    settings: AssemblerSettings,
    slots: int | None = None,
    timeouts: bool = True,
    load: LoadInTask | None = None,
) -> DataFrame:
    """Assemble each Kafka partition's transactions; emit complete transactions only.

    ``events`` has the Kafka connector's schema. The result has the columns of
    :data:`assembler.output.OUTPUT_FIELDS`: ROW rows of complete transactions and REJECT
    rows of rejected ones.

    Args:
        events: the Kafka records.
        settings: the assembler's settings.
        slots: group by slot, ``slots`` of them (:mod:`assembler.slots`); ``None``: the
            session's state-store partitions (``spark.sql.shuffle.partitions``).
        timeouts: Spark's processing-time state timeout wakes a slot at its earliest
            deadline; without it a slot checks its deadlines when it has records
            (``app/state_layout.py`` says which a checkpoint has).
        load: Load the rows in the assembling task (``app/task_load.py``); the result then
            has the sink's report rows instead.
    """
    from app.state_layout import session_state_partitions

    if slots is None:
        slots = session_state_partitions(events.sparkSession)
    return by_slot(events, slots).applyInPandasWithState(
        AssembleSlot(settings, timeouts, load),
        outputStructType=OUTPUT_DDL if load is None else report_schema(),
        stateStructType=SLOT_STATE_DDL,
        outputMode="append",
        timeoutConf=(
            GroupStateTimeout.ProcessingTimeTimeout if timeouts else GroupStateTimeout.NoTimeout
        ),
    )


def by_slot(events: DataFrame, slots: int) -> GroupedData:
    """The assembler's input, the Kafka records' :data:`SOURCE_COLUMNS`, grouped by state slot."""
    from app.state_layout import SLOT_COLUMN, slot_of

    return (
        events.select(*SOURCE_COLUMNS).withColumn(SLOT_COLUMN, slot_of(slots)).groupBy(SLOT_COLUMN)
    )


def assemble_per_partition(events: DataFrame, settings: AssemblerSettings) -> DataFrame:
    """:func:`assemble_transactions` with one group per (topic, partition).

    The state layout of checkpoints written before slots (app/state_layout.py); its cost per
    micro-batch grows with the number of partitions.
    """
    return (
        events.select(*SOURCE_COLUMNS)
        .groupBy("topic", "partition")
        .applyInPandasWithState(
            AssembleGroup(settings),
            outputStructType=OUTPUT_DDL,
            stateStructType=STATE_DDL,
            outputMode="append",
            timeoutConf=GroupStateTimeout.ProcessingTimeTimeout,
        )
    )


class _Assembling:
    """A function Spark runs on executors.

    Pickled with its settings; builds the assembler (and its decoder) lazily, once per Python
    worker. With ``load``, a group's rows are loaded here and its report rows returned.
    """

    def __init__(self, settings: AssemblerSettings, load: LoadInTask | None = None) -> None:
        self._settings = settings
        self._load = load
        self._assembler: TransactionAssembler | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The assembler holds a decoder (maybe an HTTP session): rebuild it on the executor.
        return {**self.__dict__, "_assembler": None}

    def assembler(self) -> TransactionAssembler:
        """This worker's assembler, with the limits of the task's batch (app/txn_limits.py)."""
        limits = task_limits()
        if self._assembler is None:
            self._assembler = TransactionAssembler(self._settings)
        if limits is not None and TxnLimits.of(self._assembler.settings) != limits:
            self._assembler = self._assembler.with_settings(limits.apply(self._settings))
        return self._assembler


class AssembleSlot(_Assembling):
    """The function Spark calls once per slot and micro-batch (executor side).

    ``timeouts``: the query has Spark's processing-time state timeout, which the slot sets to
    its earliest deadline (without it Spark refuses a timeout duration).
    """

    def __init__(
        self, settings: AssemblerSettings, timeouts: bool = True, load: LoadInTask | None = None
    ) -> None:
        super().__init__(settings, load)
        self._timeouts = timeouts

    def __call__(
        self, key: tuple[Any, ...], chunks: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        """Apply this batch's records of one slot; yield the rows the core emits."""
        # Spark's batch timestamp: the same when a batch is replayed after a crash, so a
        # replay takes the same timeout decisions as the first run.
        now_ms = int(state.getCurrentProcessingTimeMs())
        with paused_gc():
            entries = _slot_entries(state.get, key) if state.exists else None
            records = [] if state.hasTimedOut else list(_chunk_records(chunks))
            step = SlotAssembler(self.assembler()).process(entries, records, now_ms)
            state.update((SLOT_STATE_VERSION, step.partitions, step.entries))
            if self._timeouts and step.timeout_at_ms is not None:
                # Processing-time timeouts take a duration; at least 1 ms, or Spark rejects it.
                state.setTimeoutDuration(max(1, step.timeout_at_ms - now_ms))
            frames = list(emit(step.outputs, self._load, step.status))
            # Freed while the collector is off; else its first allocation after this block
            # would walk them all (0.2 µs a record, benchmarks.hot_paths).
            del records, step
        yield from frames


@contextmanager
def paused_gc() -> Iterator[None]:
    """No automatic garbage collection while a group's batch is assembled and loaded.

    The work allocates ~10 container objects per record and frees few until it ends, so the
    collector would walk the growing output again and again (a quarter of the assembling
    function's CPU, ``benchmarks.hot_paths``). It makes no reference cycles, and PySpark's
    worker collects after every task anyway (``app/pydaemon.py``).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def emit(
    outputs: list[Any], load: LoadInTask | None, status: Sequence[Any] = ()
) -> Iterator[pd.DataFrame]:
    """A group's output rows as one frame, or, with ``load``, loaded and reported.

    ``status``: the group's STATUS rows (what its partitions hold open), counted, never loaded.
    """
    if not outputs and not status:
        return
    if load is None:
        yield pd.DataFrame([*outputs, *status] if status else outputs, columns=OUTPUT_COLUMNS)
        return
    reports = load(outputs, status)
    if reports:
        yield pd.DataFrame(reports, columns=REPORT_COLUMNS)


def _slot_entries(stored: tuple[Any, ...], key: tuple[Any, ...]) -> bytes:
    if len(stored) != len(SLOT_STATE_FIELDS) or stored[0] != SLOT_STATE_VERSION:
        msg = (
            f"unreadable assembler state of slot {key[0]} (version {stored[0]}, {len(stored)} "
            f"fields; expected version {SLOT_STATE_VERSION}, {len(SLOT_STATE_FIELDS)} fields): "
            "the checkpoint was written by an incompatible release; use a new checkpoint "
            "location or the release that wrote it"
        )
        raise StateError(msg)
    return bytes(stored[2])


def _chunk_records(chunks: Iterator[pd.DataFrame], keyed: bool = False) -> Iterator[SourceRecord]:
    """Every record of the chunks, any partitions; with its Kafka key when ``keyed``."""
    # Chunks arrive in no guaranteed order; the core sorts each partition's records by offset.
    for chunk in chunks:
        if chunk.empty:
            continue
        columns: list[Iterable[Any]] = [
            chunk["topic"].tolist(),
            chunk["partition"].tolist(),
            chunk["offset"].tolist(),
            chunk["value"].tolist(),
        ]
        columns.append(chunk["key"].tolist() if keyed else repeat(None))
        # Columns of one chunk, all of its length. tuple.__new__ builds each record in C;
        # SourceRecord(...) would run the named tuple's Python __new__ (~1 µs a record). Not
        # strict: the key column of a chunk without keys is an endless repeat(None).
        yield from map(tuple.__new__, repeat(SourceRecord), zip(*columns, strict=False))


class AssembleGroup(_Assembling):
    """The function Spark calls once per (topic, partition) group and micro-batch (before slots)."""

    def __call__(
        self, key: tuple[Any, ...], chunks: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        """Apply this batch's records of one group; yield the rows the core emits."""
        assembler = self.assembler()
        # Spark's batch timestamp: the same when a batch is replayed after a crash, so a
        # replay takes the same timeout decisions as the first run.
        now_ms = int(state.getCurrentProcessingTimeMs())
        previous = PartitionState.from_tuple(tuple(state.get)) if state.exists else None
        if state.hasTimedOut:
            if previous is None:  # pragma: no cover - Spark only times out groups with state
                return
            step = assembler.expire(previous, now_ms)
        else:
            topic, partition = str(key[0]), int(key[1])
            records = list(_records(topic, partition, chunks))
            step = assembler.process(previous, records, now_ms)
        state.update(step.state.to_tuple())
        if step.timeout_at_ms is not None:
            # Processing-time timeouts take a duration; at least 1 ms, or Spark rejects it.
            state.setTimeoutDuration(max(1, step.timeout_at_ms - now_ms))
        # Output rows are named tuples in OUTPUT_FIELDS order.
        yield from emit(step.outputs, self._load, [step.state.open_status()])


def _records(topic: str, partition: int, chunks: Iterator[pd.DataFrame]) -> Iterator[SourceRecord]:
    # Chunks of one group arrive in no guaranteed order; the core sorts by offset.
    # tolist() yields Python ints and bytes in C; this loop runs once per Kafka record.
    for chunk in chunks:
        if chunk.empty:
            continue
        offsets = chunk["offset"].tolist()
        values = chunk["value"].tolist()
        for offset, value in zip(offsets, values, strict=True):
            yield SourceRecord(topic, partition, offset, value)


def assemble_debezium(
    events: DataFrame, settings: DebeziumSettings, load: LoadInTask | None = None
) -> DataFrame:
    """Group every record of one Debezium source together and emit whole transactions.

    The group key is the source's transaction topic (one per connector): only a group that
    sees all of a connector's topics can tell when a transaction is complete. The price is
    parallelism: one connector's assembly runs in one task per micro-batch, whatever the
    number of topics and partitions (docs/debezium.md).
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    func = AssembleDebezium(settings, load)
    return (
        events.select(*DEBEZIUM_SOURCE_COLUMNS)
        .withColumn(SOURCE_GROUP, F.lit(settings.transaction_topic))
        .groupBy(SOURCE_GROUP)
        .applyInPandasWithState(
            func,
            outputStructType=OUTPUT_DDL if load is None else report_schema(),
            stateStructType=DEBEZIUM_STATE_DDL,
            outputMode="append",
            timeoutConf=GroupStateTimeout.ProcessingTimeTimeout,
        )
    )


class AssembleDebezium:
    """The function Spark calls once per source group and micro-batch (executor side)."""

    def __init__(self, settings: DebeziumSettings, load: LoadInTask | None = None) -> None:
        self._assembler = DebeziumAssembler(settings)
        self._load = load

    def __call__(
        self, key: tuple[Any, ...], chunks: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        """Apply this batch's records of one source; yield the rows the core emits."""
        now_ms = int(state.getCurrentProcessingTimeMs())
        previous = tuple(state.get) if state.exists else None
        limits = task_limits()
        core = self._assembler.settings.core
        if limits is not None and TxnLimits.of(core) != limits:
            settings = self._assembler.settings
            self._assembler = DebeziumAssembler(replace(settings, core=limits.apply(core)))
        with paused_gc():
            records: list[SourceRecord] = []
            if state.hasTimedOut:
                if previous is None:  # pragma: no cover - Spark only times out groups with state
                    return
                step = self._assembler.expire(previous, now_ms)
            else:
                records = list(_chunk_records(chunks, keyed=True))
                step = self._assembler.process(previous, records, now_ms)
            state.update(step.state)
            if step.timeout_at_ms is not None:
                state.setTimeoutDuration(max(1, step.timeout_at_ms - now_ms))
            frames = list(emit(step.outputs, self._load, step.status))
            del records, step  # freed while the collector is off (AssembleSlot)
        yield from frames
