"""The assembler's output, loaded by the task that made it (executor side of the default path).

Where the sink can load in the assembling task (``StarRocksSink.task_loader``), the
assembling function hands each group's output rows to :class:`LoadInTask` instead of
returning them to Spark. It does in Python what :func:`app.pipeline.to_sink_rows` and the
sink's load job do in Spark on the other path: REJECT rows become dead-letter rows, the rows
are counted (:class:`app.batch_count.BatchCounter`), grouped by table in their source order,
and loaded. The query's output is then the tasks' report rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from app.batch_count import BatchCounter
from assembler.output import KIND_REJECT
from sinks.starrocks.fit import fit_bytes_text, fit_payload

#: ``(rows, tally rows) -> report rows``: the sink's executor-side loader
#: (:class:`sinks.starrocks.intask.TaskLoader`).
Loader = Callable[[list[tuple[Any, ...]], list[dict[str, Any]]], list[dict[str, Any]]]

# Positions in an output row (assembler.output.OUTPUT_FIELDS).
_KIND, _TOPIC, _PARTITION, _TXN_ID, _TXN_SEQ, _ROW_SEQ, _DATABASE, _TABLE, _OP, _ROW = range(10)
_END, _FIRST, _LAST, _SOURCE_TS, _REASON = range(10, 15)
# What the loader reads: (table, op, row, topic, partition, txn_id).
_LOADED = itemgetter(_TABLE, _OP, _ROW, _TOPIC, _PARTITION, _TXN_ID)
_BY_TABLE = itemgetter(0)


@dataclass(frozen=True)
class LoadInTask:
    """Picklable: turns one group's output rows into loads and report rows (executor).

    Args:
        loader: The sink's task loader.
        counter: Counts the rows for the progress line and the sink's targets.
        pipeline: ``pipeline.name``, kept in each dead-letter row.
        database: The sink's database (``database-name``), where dead letters go.
        dead_letter_table: The sink's dead-letter table.
    """

    loader: Loader
    counter: BatchCounter
    pipeline: str
    database: str
    dead_letter_table: str

    def __call__(
        self, outputs: Sequence[Sequence[Any]], status: Sequence[Sequence[Any]] = ()
    ) -> list[dict[str, Any]]:
        """Load ``outputs`` (rows of ``OUTPUT_FIELDS``); the report rows.

        ``status``: the group's STATUS rows, counted and never loaded.
        """
        rows = [out if out[_KIND] != KIND_REJECT else self.sink_row(out) for out in outputs]
        # The getters run in C, once per row: this runs once per record of the batch.
        loads = list(map(_LOADED, rows))
        # Stable: each partition's rows keep the assembler's (txn_seq, row_seq) order.
        loads.sort(key=_BY_TABLE)
        tally = self.counter.count_outputs(rows)
        if status:
            tally += self.counter.count_outputs(status)
        return self.loader(loads, tally)

    def sink_row(self, out: Sequence[Any]) -> tuple[Any, ...]:
        """A REJECT output row aimed at the dead-letter table (``to_sink_rows`` in Spark)."""
        row = list(out)
        row[_DATABASE] = self.database
        row[_TABLE] = self.dead_letter_table
        row[_OP] = "UPSERT"
        row[_ROW] = self.dead_letter(out)
        return tuple(row)

    def dead_letter(self, out: Sequence[Any]) -> str:
        """The dead-letter table's row of a REJECT output row, as JSON text.

        The same columns and cuts as :func:`app.pipeline.to_sink_rows` (Spark's ``to_json``
        leaves null fields out, and so does this). A rejected DATA event with a target keeps it
        and its op with the row image, so that the change can be applied once fixed; any other
        record is kept as it came.
        """
        payload = out[_ROW]
        reason = out[_REASON]
        if out[_DATABASE] is not None and out[_TABLE] is not None:
            payload = _json(
                {"database": out[_DATABASE], "table": out[_TABLE], "op": out[_OP], "row": payload}
            )
        payload, reason = fit_payload(payload, reason)
        return _json(
            {
                "topic": out[_TOPIC],
                "kafka_partition": out[_PARTITION],
                "first_offset": out[_FIRST],
                "row_seq": out[_ROW_SEQ],
                "pipeline": self.pipeline,
                "txn_id": fit_bytes_text(out[_TXN_ID], 255),
                "last_offset": out[_LAST],
                "reason": fit_bytes_text(reason, 1024),
                "payload": payload,
                "source_ts_ms": out[_SOURCE_TS],
            }
        )


def _json(fields: dict[str, Any]) -> str:
    """``fields`` as Spark's ``to_json`` writes a struct: compact, null fields left out."""
    return json.dumps(
        {k: v for k, v in fields.items() if v is not None},
        ensure_ascii=False,
        separators=(",", ":"),
    )
