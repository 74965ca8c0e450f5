"""The transaction limits each micro-batch assembles with, kept per batch in the checkpoint.

``max-txn-rows``, ``max-txn-bytes`` and ``txn-timeout`` decide which transactions are
rejected, and may change between starts: set by hand, or ``max-txn-bytes`` worked out again
from the executors' heap and the partitions (``app/main.py``). A batch replayed after a crash
between the StarRocks commit and Spark's commit log must decide as its first run did: the sink
finds its label committed and loads nothing, so only the state store sees the replay's
decisions. Were a buffered transaction rejected in the replay but kept in the first run, its
rows would reach neither a table nor the dead letters.

So ``cdc-txn-limits.json``, next to the checkpoint, says from which batch each limits apply;
a change applies from the first batch the start plans, never to the batch Spark replays. The
driver names the batch's limits in a Spark local property of its jobs
(:func:`batch_limits`), and the assembling function reads them in its task
(:func:`task_limits`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from common.errors import CdcError, Terminal

if TYPE_CHECKING:
    from pyspark import SparkContext

    from app.checkpoint_files import CheckpointFiles
    from assembler.settings import AssemblerSettings

log = logging.getLogger(__name__)

LIMITS_FILE = "cdc-txn-limits.json"
#: The Spark local property that carries a batch's limits to its tasks.
LIMITS_PROPERTY = "cdc.assembler.txn-limits"


class LimitsFileError(CdcError, Terminal):
    """``cdc-txn-limits.json`` is damaged: which limits a replayed batch had is unknown."""


@dataclass(frozen=True)
class TxnLimits:
    """The settings that decide a transaction's rejection, as a batch applies them."""

    max_txn_rows: int
    max_txn_bytes: int
    txn_timeout_ms: int

    @classmethod
    def of(cls, settings: AssemblerSettings) -> TxnLimits:
        """The limits of ``settings``."""
        return cls(settings.max_txn_rows, settings.max_txn_bytes, settings.txn_timeout_ms)

    def apply(self, settings: AssemblerSettings) -> AssemblerSettings:
        """``settings`` with these limits (the same object when they already have them)."""
        if TxnLimits.of(settings) == self:
            return settings
        return replace(
            settings,
            max_txn_rows=self.max_txn_rows,
            max_txn_bytes=self.max_txn_bytes,
            txn_timeout_ms=self.txn_timeout_ms,
        )

    def to_json(self) -> list[int]:
        """``[rows, bytes, timeout ms]``: the file's and the local property's form."""
        return [self.max_txn_rows, self.max_txn_bytes, self.txn_timeout_ms]

    @classmethod
    def from_json(cls, value: Any) -> TxnLimits:
        """Parse :meth:`to_json`; ``ValueError`` for anything else."""
        if (
            not isinstance(value, list)
            or len(value) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        ):
            msg = f"expected [max-txn-rows, max-txn-bytes, txn-timeout ms], got {value!r}"
            raise ValueError(msg)
        return cls(*value)

    def describe(self) -> str:
        """The limits as the settings name them."""
        return (
            f"max-txn-rows={self.max_txn_rows} max-txn-bytes={self.max_txn_bytes} "
            f"txn-timeout={self.txn_timeout_ms}ms"
        )


@dataclass(frozen=True)
class BatchLimits:
    """``(first batch, limits)`` pairs, ascending: which limits each batch applies."""

    spans: tuple[tuple[int, TxnLimits], ...]

    def for_batch(self, batch_id: int) -> TxnLimits:
        """The limits of ``batch_id`` (batches before the first span take the first's)."""
        chosen = self.spans[0][1]
        for first, limits in self.spans:
            if first <= batch_id:
                chosen = limits
        return chosen


def plan_limits(files: CheckpointFiles, limits: TxnLimits, location: str) -> BatchLimits:
    """The limits of each batch of the checkpoint, ``limits`` from the first one planned now.

    Spark plans batch ``last + 1`` next, ``last`` being the newest in the offset log; it may
    replay ``last`` first (not in the commit log), which keeps the limits it ran with. Only
    that batch's limits are kept from the file: the batches before it are never run again.
    Called after commit behind's recovery, which may rewind the offset log.

    Raises:
        LimitsFileError: the file is there but damaged.
    """
    planned = files.batch_ids("offsets")
    spans: tuple[tuple[int, TxnLimits], ...] = ((0, limits),)
    stored = files.read_json(LIMITS_FILE)
    # No batch planned, nothing to replay; no file, a checkpoint from before it, whose replay
    # applies ``limits`` as every start did then.
    if planned and (stored is not None or files.exists(LIMITS_FILE)):
        last = planned[-1]
        try:
            replayed = BatchLimits(_parse(stored, location)).for_batch(last)
        except LimitsFileError:
            if last not in files.batch_ids("commits"):
                raise
            # Batch ``last`` is recorded: Spark replays nothing, so no batch needs old limits.
            log.warning("ignoring a damaged %s: no batch of %s is replayed", LIMITS_FILE, location)
            replayed = limits
        if replayed != limits:
            spans = ((0, replayed), (last + 1, limits))
            log.warning(
                "transaction limits change from batch %s on: %s (were %s; batch %s keeps them "
                "if Spark replays it, so that it decides as its first run did)",
                last + 1,
                limits.describe(),
                replayed.describe(),
                last,
            )
    value = {"spans": [[first, lim.to_json()] for first, lim in spans]}
    if value != stored:
        files.write_json(LIMITS_FILE, value)
    return BatchLimits(spans)


def _parse(stored: Any, location: str) -> tuple[tuple[int, TxnLimits], ...]:
    try:
        spans = tuple(
            (int(first), TxnLimits.from_json(lim))
            for first, lim in (stored["spans"] if isinstance(stored, dict) else ())
        )
        if not spans or [first for first, _ in spans] != sorted({f for f, _ in spans}):
            msg = "no spans, or spans out of order"
            raise ValueError(msg)
    except (KeyError, TypeError, ValueError) as e:
        # Guessing could decide a replayed batch's transactions otherwise than its first run.
        msg = (
            f"{LIMITS_FILE} in checkpoint {location} is damaged ({stored!r}: {e}): it must read "
            '{"spans": [[first batch, [max-txn-rows, max-txn-bytes, txn-timeout ms]], ...]}; '
            "restore it, or delete it if the newest batch in the checkpoint's offsets folder "
            "is also in its commits folder (no batch is replayed then)"
        )
        raise LimitsFileError(msg) from e
    return spans


@contextmanager
def batch_limits(sc: SparkContext, limits: TxnLimits) -> Iterator[None]:
    """Run the jobs of this block with ``limits`` in every task (driver, the batch's thread)."""
    sc.setLocalProperty(LIMITS_PROPERTY, json.dumps(limits.to_json()))
    try:
        yield
    finally:
        sc.setLocalProperty(LIMITS_PROPERTY, None)  # type: ignore[arg-type]  # Spark takes None


def task_limits() -> TxnLimits | None:
    """The limits of the batch this task runs for; ``None`` outside a batch's job."""
    from pyspark import TaskContext

    context = TaskContext.get()
    value = context.getLocalProperty(LIMITS_PROPERTY) if context is not None else None
    return None if value is None else TxnLimits.from_json(json.loads(value))
