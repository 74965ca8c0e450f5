"""Executor side: stream one Spark partition's rows into the open transaction(s).

The driver repartitions the batch by ``table`` (so one table never spans two tasks: at most
one in-flight load per table, rows in order) and sorts each partition by
``(table, partition, txn_seq, row_seq)``; Spark then calls a :class:`PartitionLoader`
through ``mapInArrow`` on the executors, where the data is. The driver never collects rows:
each task returns one small report row per table (rows, bytes, requests, error).

A loader never raises for StarRocks or data problems: it stops at the first error and
reports it, so the driver gets a structured outcome (transient or terminal) instead of a
Python traceback wrapped in a Spark exception, and decides about rollback and retry.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

import orjson

from common.errors import Transient
from common.exact_json import exact_loads, exact_text, refuse_constant
from common.native import native_module
from sinks.base import Tally, encode_tally
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.errors import InvalidRequestError, StarRocksError
from sinks.starrocks.txnapi import LoadFailure, LoadReport

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

logger = logging.getLogger(__name__)

#: (name, Spark DDL type) of the per-table report rows a loader task returns.
REPORT_FIELDS = (
    ("table", "string"),
    ("rows", "bigint"),
    ("bytes", "bigint"),
    ("requests", "int"),
    ("error_kind", "string"),
    ("error", "string"),
    ("error_class", "string"),
    ("error_url", "string"),
    ("tally", "string"),
)
#: ``LoadPlan.labels`` key that stands for every table: a batch counted by its own load job
#: (multi-table mode, where every table shares the label) has tables known only afterwards.
ANY_TABLE = "*"
#: Columns the loader reads, in this order.
LOADER_COLUMNS = ("table", "op", "row", "topic", "partition", "txn_id")

OP_CODES = {"UPSERT": 0, "DELETE": 1}


@dataclass(frozen=True)
class LoadPlan:
    """Everything an executor needs for one batch (picklable: no sessions, no Spark)."""

    config: StarRocksSinkConfig
    # table -> label (multi-table mode: the same label everywhere, maybe under ANY_TABLE)
    labels: Mapping[str, str]
    multi: bool
    batch_id: int
    tally: Tally | None = None  # counts the rows as they pass (sinks.base.Tally)


@dataclass
class TableReport:
    """What one task did for one table."""

    table: str
    rows: int = 0
    bytes: int = 0
    requests: int = 0
    error_kind: str = ""  # "" | "transient" | "terminal"
    error: str = ""
    error_class: str = ""  # StarRocksError subclass name, rebuilt on the driver
    error_url: str = ""  # the server's ErrorURL / tracking_url, if any
    tally: str | None = None  # the task's tally rows (encode_tally), on a row of its own

    def as_dict(self) -> dict[str, Any]:
        """Row of :func:`report_schema`."""
        return {
            "table": self.table,
            "rows": self.rows,
            "bytes": self.bytes,
            "requests": self.requests,
            "error_kind": self.error_kind,
            "error": self.error,
            "error_class": self.error_class,
            "error_url": self.error_url,
            "tally": self.tally,
        }

    def typed(self) -> LoadReport:
        """The driver's typed view (:class:`sinks.starrocks.txnapi.LoadReport`)."""
        failure = None
        if self.error_kind:
            failure = LoadFailure(
                error_class=self.error_class or "StarRocksError",
                message=self.error,
                transient=self.error_kind == "transient",
                error_url=self.error_url,
            )
        return LoadReport(self.table, self.rows, self.bytes, self.requests, failure)


#: ``txncdc_native.encode_row``: the splice below without a parse in Python; ``None`` where
#: the row needs this function's judgement (common/native.py).
_native_encode: Callable[[int, str], bytes | None] | None = getattr(
    native_module(), "encode_row", None
)
#: ``txncdc_native.encode_run``: the loader's loop over a run of plain splices, in one call.
_native_run: Callable[[list[Any], int, int, bool, int], tuple[int, bytes, int]] | None = getattr(
    native_module(), "encode_run", None
)
_OP_PREFIX = {code: b'{"__op":%d' % code for code in OP_CODES.values()}
#: Rows per list when the loader's rows come as an iterator (the ``mapInArrow`` path).
_BLOCK_ROWS = 8192


#: Where a row comes from, for an error message: the text, a function building it, or
#: ``(table, topic, partition, txn_id)`` (formatted only on error; no object per row).
Where = str | Callable[[], str] | tuple[str, str, int, str]


def encode_row(op: str | None, row: str | None, where: Where) -> bytes:
    """One JSON object with ``__op`` (0 upsert, 1 delete) for a Primary Key table (spec §5).

    The row is parsed once to check that it is a JSON object; the bytes sent are the row's
    own text with ``"__op":N`` spliced in front (re-serialising would cost as much again).
    ``where`` (built only on error) names table, topic/partition and txn for the message.

    Raises:
        InvalidRequestError: ``row`` is not a JSON object or ``op`` is unknown.
    """
    code = OP_CODES.get(op or "UPSERT")
    if code is None:
        code = OP_CODES.get((op or "").upper())
    if code is None:
        msg = f"row {_where(where)} has op={op!r}; expected UPSERT or DELETE"
        raise InvalidRequestError(msg)
    if _native_encode is not None and row is not None:
        spliced = _native_encode(code, row)
        if spliced is not None:
            return spliced
    try:
        data = row.encode("utf-8") if row is not None else b"null"
    except UnicodeEncodeError as e:
        msg = (
            f"row {_where(where)} has no UTF-8 form ({e.reason} at character {e.start}); fix "
            "the producer or reject it upstream"
        )
        raise InvalidRequestError(msg) from e
    try:
        image = orjson.loads(data)
    except ValueError:
        # The stdlib decides what orjson refuses (lone surrogates), and words the error; NaN
        # and Infinity stay refused (StarRocks' strict parser would fail the whole batch).
        try:
            image = json.loads(data, parse_constant=refuse_constant)
        except ValueError as e:
            msg = (
                f"row {_where(where)} is not valid JSON ({e}); fix the producer or reject it "
                "upstream"
            )
            raise InvalidRequestError(msg) from e
    if not isinstance(image, dict):
        msg = f"row {_where(where)} must be a JSON object, got {type(image).__name__}"
        raise InvalidRequestError(msg)
    if not image:
        return _OP_PREFIX[code] + b"}"
    if "__op" in image:  # the row's own __op would compete with ours: ours wins
        image["__op"] = code
        return exact_text(image, lambda: {**exact_loads(data), "__op": code}).encode("utf-8")
    # A JSON object's first non-blank byte is its "{".
    return _OP_PREFIX[code] + b"," + data[data.index(b"{") + 1 :]


def _where(where: Where) -> str:
    if isinstance(where, str):
        return where
    if isinstance(where, tuple):
        return _where_text(*where)
    return where()


def _where_text(table: str, topic: str, partition: int, txn_id: str) -> str:
    return f"table={table} topic={topic} partition={partition} txn_id={txn_id}"


@dataclass
class _Chunk:
    parts: list[bytes] = field(default_factory=list)
    size: int = 2  # "[" and "]"

    def body(self) -> bytes:
        return b"[" + b",".join(self.parts) + b"]"


class PartitionLoader:
    """Picklable ``mapInArrow`` function: loads its partition, yields a report batch.

    Called by Spark on an executor, once per task. It opens its own HTTP client, sends one
    chunk at a time per table (never two in flight for a table), and returns one report
    row per table it saw.
    """

    def __init__(self, plan: LoadPlan) -> None:
        self.plan = plan

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Spark entry point (executor)."""
        import pyarrow as pa

        attempt = _task_attempt()
        if attempt > 0:
            reports = [rerun_report("a load task", attempt, self.plan.batch_id)]
        elif self.plan.tally is None:
            reports = self.load(_rows(batches))
        else:
            counted: list[dict[str, Any]] = []
            reports = self.load(_rows(_counting(batches, self.plan.tally, counted)))
            # Rows a failed load never reached are missing: the driver then fails the batch.
            reports.append(TableReport(table="", tally=encode_tally(counted)))
        yield pa.RecordBatch.from_pylist(
            [r.as_dict() for r in reports], schema=_report_arrow_schema()
        )

    def load(self, rows: Iterable[tuple[Any, ...]]) -> list[TableReport]:
        """Load ``(table, op, row, topic, partition, txn_id)`` tuples, sorted by table."""
        from sinks.starrocks.client import StarRocksClient

        plan = self.plan
        reports: dict[str, TableReport] = {}
        client: StarRocksClient | None = None
        current: str | None = None
        chunk = _Chunk()
        report = TableReport(table="")
        max_bytes = plan.config.max_bytes_per_load
        run = _native_run
        try:
            for block in [rows] if isinstance(rows, list) else _blocks(rows):
                i, n = 0, len(block)
                while i < n:
                    table, op, row, topic, partition, txn_id = block[i]
                    if table != current:
                        if current is not None and chunk.parts:
                            client = client or StarRocksClient(plan.config)
                            self._send(client, current, chunk, report)
                            chunk = _Chunk()
                        current = table
                        report = reports.setdefault(table, TableReport(table=table))
                    if run is not None:
                        # The rows from i on that are plain splices, as one part; the row
                        # where it stops (if any) takes the path below.
                        stop, joined, size = run(block, i, chunk.size, bool(chunk.parts), max_bytes)
                        if stop > i:
                            chunk.parts.append(joined)
                            chunk.size = size
                            report.rows += stop - i
                            i = stop
                            continue
                    part = encode_row(op, row, (table, topic, partition, txn_id))
                    if chunk.parts and chunk.size + len(part) + 1 > max_bytes:
                        client = client or StarRocksClient(plan.config)
                        self._send(client, table, chunk, report)
                        chunk = _Chunk()
                    chunk.parts.append(part)
                    chunk.size += len(part) + 1
                    report.rows += 1
                    i += 1
            if current is not None and chunk.parts:
                client = client or StarRocksClient(plan.config)
                self._send(client, current, chunk, reports[current])
        except StarRocksError as e:
            report = reports.setdefault(current or "", TableReport(table=current or ""))
            report.error_kind = "transient" if isinstance(e, Transient) else "terminal"
            report.error = str(e)
            report.error_class = type(e).__name__
            report.error_url = str(e.context.get("error_url") or "")
            logger.warning(
                "starrocks load failed batch_id=%s table=%s kind=%s error=%s",
                plan.batch_id,
                current,
                report.error_kind,
                e,
            )
        finally:
            if client is not None:
                client.close()
        return list(reports.values())

    def _send(self, client: Any, table: str, chunk: _Chunk, report: TableReport) -> None:
        plan = self.plan
        body = chunk.body()
        client.load(
            plan.labels.get(table) or plan.labels[ANY_TABLE],
            table,
            body,
            multi=plan.multi,
            properties=plan.config.properties_for(table),
        )
        report.bytes += len(body)
        report.requests += 1


def rerun_report(task: str, attempt: int, batch_id: int) -> TableReport:
    """The report of a task Spark re-ran (task retry or speculation), which loads nothing.

    Chunks of its first run may already be inside the transaction, so re-sending would
    duplicate rows; the driver rolls the label back and retries the batch under a new attempt.
    """
    return TableReport(
        table="",
        error_kind="transient",
        error=f"Spark re-ran {task} (task attempt {attempt}) of batch {batch_id}; the batch "
        "is retried under a new label",
    )


def _counting(
    batches: Iterator[pa.RecordBatch], tally: Tally, counted: list[dict[str, Any]]
) -> Iterator[pa.RecordBatch]:
    """Each batch counted, then its rows that have a table (the others are only counted)."""
    import pyarrow.compute as pc

    for batch in batches:
        counted.extend(tally(batch))
        tables = batch.column("table")
        yield batch if tables.null_count == 0 else batch.filter(pc.is_valid(tables))


def _blocks(rows: Iterable[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    """``rows`` in lists: what the native run takes, without holding them all at once."""
    it = iter(rows)
    while block := list(islice(it, _BLOCK_ROWS)):
        yield block


def _rows(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
    for batch in batches:
        columns = [batch.column(name).to_pylist() for name in LOADER_COLUMNS]
        yield from zip(*columns, strict=True)


def report_schema() -> StructType:
    """The Spark schema of the report rows (driver).

    A ``StructType``, not a DDL string: ``mapInArrow`` parses a string schema again on every
    call, ~9 ms of the driver's time per micro-batch.
    """
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    kinds = {"string": StringType(), "bigint": LongType(), "int": IntegerType()}
    return StructType([StructField(name, kinds[kind]) for name, kind in REPORT_FIELDS])


def _report_arrow_schema() -> pa.Schema:
    import pyarrow as pa

    kinds = {"string": pa.string(), "bigint": pa.int64(), "int": pa.int32()}
    return pa.schema([(name, kinds[kind]) for name, kind in REPORT_FIELDS])


def _task_attempt() -> int:
    """Spark task attempt number (0 outside Spark)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return int(ctx.attemptNumber()) if ctx is not None else 0


def parse_reports(rows: Iterable[Mapping[str, Any]]) -> list[LoadReport]:
    """Driver side: report rows collected from the loading job, as typed reports."""
    return [
        TableReport(
            table=str(r["table"] or ""),
            rows=int(r["rows"] or 0),
            bytes=int(r["bytes"] or 0),
            requests=int(r["requests"] or 0),
            error_kind=str(r["error_kind"] or ""),
            error=str(r["error"] or ""),
            error_class=str(r.get("error_class") or ""),
            error_url=str(r.get("error_url") or ""),
        ).typed()
        for r in rows
    ]


def progress_body(rows: list[dict[str, Any]]) -> bytes:
    """JSON array body for the progress table (upserts, ``__op`` 0)."""
    return json.dumps(
        [{**r, "__op": 0} for r in rows], ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")
