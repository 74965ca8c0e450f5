"""Run a streaming query over the source and collect what each micro-batch saw."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.sources import read_kafka_stream


@dataclass
class Collected:
    """Rows per batch id, as (topic, partition, offset, value)."""

    batches: dict[int, list[tuple[str, int, int, bytes]]] = field(default_factory=dict)

    @property
    def rows(self) -> list[tuple[str, int, int, bytes]]:
        return [row for batch_id in sorted(self.batches) for row in self.batches[batch_id]]

    def per_partition(self) -> dict[tuple[str, int], list[int]]:
        out: dict[tuple[str, int], list[int]] = {}
        for topic, partition, offset, _ in self.rows:
            out.setdefault((topic, partition), []).append(offset)
        return out


def run_available_now(
    spark: Any,
    options: Mapping[str, str],
    checkpoint: Path,
    collected: Collected | None = None,
    timeout: float = 180,
) -> Collected:
    """One ``availableNow`` run from ``checkpoint``; appends batches to ``collected``."""
    out = collected if collected is not None else Collected()

    def on_batch(df: Any, batch_id: int) -> None:
        rows = df.select("topic", "partition", "offset", "value").collect()
        # A replayed batch id replaces what the first attempt saw (idempotent sink semantics).
        out.batches[batch_id] = [
            (r["topic"], r["partition"], r["offset"], bytes(r["value"])) for r in rows
        ]

    query = (
        read_kafka_stream(spark, options)
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(timeout)
        assert finished, f"query did not finish in {timeout}s"
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
    finally:
        query.stop()
    return out
