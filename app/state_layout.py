"""How the assembler's state is keyed in a checkpoint: by slot, or by Kafka partition (driver).

A new checkpoint keys the assembler's state by *slot*: one ``applyInPandasWithState`` group per
state-store partition, holding every Kafka partition mapped to it (:mod:`assembler.slots`), so
a micro-batch's cost does not grow with the number of Kafka partitions. Checkpoints written
before slots keyed it by (topic, partition); Spark cannot re-key a checkpoint's state, so they
keep that layout (docs/assembler.md says how to move one to slots).

Which layout a checkpoint has is kept next to it, in ``cdc-state-layout.json``, with the number
of slots: the partition-to-slot mapping depends on it, so it must never change for a
checkpoint, whatever ``pipeline.state-partitions`` says later.

So is how a slot's overdue transactions are woken (``timeouts``), which Spark also freezes into
the state's schema (a state timeout adds a column):

- ``on-data`` (a new checkpoint with ``pipeline.idle-batches: false``, the default): no Spark
  state timeout. A slot checks its quiet partitions' deadlines whenever the batch gives it
  records. A Spark timeout costs a second Python runner in every stateful task of every batch,
  timed-out groups or not (~25 ms a 1,000-row batch, docs/benchmarks.md), and buys nothing
  here: with no idle batches it fires only with a batch that has data anyway, and all that can
  wait behind an abandoned transaction is its own partition's data, which calls its slot.
- ``processing-time`` (``pipeline.idle-batches: true``, and every checkpoint written before
  this choice was kept): Spark's processing-time timeout wakes the slot at its earliest
  deadline, in any batch, idle ones included.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.checkpoint_files import CheckpointFiles
from common.errors import CdcError, Terminal
from common.spark_hash import partition_keys

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

log = logging.getLogger(__name__)

LAYOUT_FILE = "cdc-state-layout.json"
#: The grouping column of the slot layout.
SLOT_COLUMN = "_cdc_slot"
#: ``timeouts`` values of the layout file; a file without the key is from before the choice.
ON_DATA, PROCESSING_TIME = "on-data", "processing-time"


class LayoutError(CdcError, Terminal):
    """The checkpoint's layout file is damaged: the partition-to-slot mapping is unknown."""


@dataclass(frozen=True)
class StateLayout:
    """``slots`` state-store slots, or ``None``: one group per Kafka partition (before slots).

    ``timeouts``: Spark's processing-time state timeout is on (``processing-time``), or a slot
    checks its deadlines only when it has records (``on-data``; slots only).
    """

    slots: int | None
    timeouts: bool = True


def plan_layout(
    spark: SparkSession, location: str, state_partitions: int, idle_batches: bool = False
) -> StateLayout:
    """The layout of the checkpoint at ``location``; a new checkpoint gets slots.

    Args:
        spark: the session (its Hadoop file system reads and writes the checkpoint).
        location: the checkpoint location.
        state_partitions: the state-store partitions a new checkpoint gets (Spark's
            ``spark.sql.shuffle.partitions`` of this session).
        idle_batches: ``pipeline.idle-batches``; a new checkpoint gets Spark's state timeouts
            only with it (module docstring).

    Raises:
        LayoutError: the layout file is there but damaged.
    """
    fs = CheckpointFiles(spark, location)
    stored = fs.read_json(LAYOUT_FILE)
    if not fs.has_offsets():
        # Nothing is stored yet: Spark freezes this session's state partitions (and the state
        # schema) with the first batch, and the layout follows them.
        timeouts = PROCESSING_TIME if idle_batches else ON_DATA
        layout = {"layout": "slots", "slots": state_partitions, "timeouts": timeouts}
        if stored != layout:
            fs.write_json(LAYOUT_FILE, layout)
        return StateLayout(state_partitions, timeouts=idle_batches)
    if isinstance(stored, dict) and stored.get("layout") == "slots":
        slots = stored.get("slots")
        timeouts = stored.get("timeouts", PROCESSING_TIME)
        if (
            isinstance(slots, int)
            and not isinstance(slots, bool)
            and slots > 0
            and timeouts in (ON_DATA, PROCESSING_TIME)
        ):
            if idle_batches and timeouts == ON_DATA:
                log.warning(
                    "checkpoint %s was started with pipeline.idle-batches: false, so its "
                    "assembler state has no Spark timeout: an abandoned transaction's "
                    "txn-timeout is still checked only when its slot has records. Start a new "
                    "checkpoint to time out on idle batches too (the assembler docs, Slots)",
                    location,
                )
            return StateLayout(slots, timeouts=timeouts == PROCESSING_TIME)
    if stored is not None or fs.exists(LAYOUT_FILE):
        # Guessing would map partitions to the wrong slots' states (or, taken for the layout
        # before slots, fail on the state schema): restore the file or start afresh.
        msg = (
            f"{LAYOUT_FILE} in checkpoint {location} is damaged ({stored!r}): it must read "
            '{"layout": "slots", "slots": N, "timeouts": T} with N the '
            "spark.sql.shuffle.partitions this checkpoint was started with (its offsets/0 "
            f'file) and T "{ON_DATA}" or "{PROCESSING_TIME}" (no "timeouts" key: '
            f'"{PROCESSING_TIME}"); restore it, or use a new pipeline.checkpoint-location '
            "(source.on-lost-checkpoint: resume starts it from StarRocks' progress table)"
        )
        raise LayoutError(msg)
    log.warning(
        "checkpoint %s keys the assembler's state by Kafka partition (written before slots): "
        "it keeps that layout, whose cost per micro-batch grows with the partitions; the "
        "assembler docs (Slots) say how to move it to slots",
        location,
    )
    return StateLayout(None)


def session_state_partitions(spark: SparkSession) -> int:
    """The state-store partitions a new checkpoint of this session gets."""
    return int(spark.conf.get("spark.sql.shuffle.partitions") or "200")


def slot_of(slots: int) -> Column:
    """The slot of each Kafka record: spreads one topic's partitions evenly over the slots.

    ``pmod(hash(topic), slots) + partition`` modulo ``slots``: consecutive partitions of a
    topic go to consecutive slots. The value is the slot's *key*
    (:func:`common.spark_hash.partition_keys`), so that Spark's hash partitioning puts slot ``i``
    in state-store partition ``i``.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    index = F.pmod(F.pmod(F.hash("topic"), F.lit(slots)) + F.col("partition"), F.lit(slots))
    keys = F.array(*[F.lit(k) for k in partition_keys(slots)])
    return F.element_at(keys, index + 1)
