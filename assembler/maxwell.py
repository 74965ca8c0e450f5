"""Maxwell's daemon JSON (``source.envelope: maxwell``), decoded for the same state machine.

Maxwell (zendesk/maxwell) writes one JSON object per row change::

    {"database": "shop", "table": "orders", "type": "insert", "ts": 1700000000, "xid": 8249,
     "xoffset": 0, "data": {...}}
    ...
    {"database": "shop", "table": "order_items", "type": "update", "ts": 1700000000,
     "xid": 8249, "commit": true, "data": {...}, "old": {...}}

There is no BEGIN: every row carries its transaction's ``xid`` and the last one has
``"commit": true``. With ``producer_partition_by=database`` (Maxwell's default) a transaction's
rows are contiguous in one partition, so it is the same per-partition stream as the project's
own envelope and the same state machine assembles it (``assembler.machine``): a row of a new
``xid`` opens a transaction, the ``commit`` row completes it, a row of another ``xid`` while one
is open rejects the open one (``begin-while-open``: its commit flag was lost), and a transaction
whose commit never comes is rejected by ``txn-timeout``.

* ``insert``/``update`` upsert ``data``; ``delete`` deletes by the key columns of ``data``
  (Maxwell sends the whole deleted row). Numbers keep their exact text (DECIMAL columns).
* DDL records (``table-create``, ``table-alter``, ``database-create``, ... with ``output_ddl``)
  carry no row: they are skipped, like Debezium's schema-change events.
* ``bootstrap-start``/``bootstrap-complete`` markers are skipped; ``bootstrap-insert`` rows
  (Maxwell's snapshot) have no transaction and arrive interleaved with live transactions, so
  they are not applied here: each is an ``unknown-type`` violation (dead-lettered by default)
  naming the table, and the docs (docs/maxwell.md) say how to load a snapshot instead.
"""

from __future__ import annotations

from typing import Any

from assembler.codecs import DecodeError, SkipRecord, json_object, row_text
from assembler.events import MAXWELL_COMMIT, MAXWELL_ROW, Event

_OPS = {"insert": "UPSERT", "update": "UPSERT", "delete": "DELETE"}
_SKIPPED = ("bootstrap-start", "bootstrap-complete")
#: Event type of a row the state machine must not apply (an ``unknown-type`` violation).
BOOTSTRAP_ROW = "MAXWELL_BOOTSTRAP_INSERT"


class MaxwellDecoder:
    """One Maxwell JSON record -> one :class:`Event` of a Maxwell type (executor)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (MaxwellDecoder, ())

    def decode(self, value: bytes | None) -> Event:
        """Decode one record; raises :class:`SkipRecord` for records without a row change."""
        obj, raw = json_object(value)
        kind = obj.get("type")
        database, table = obj.get("database"), obj.get("table")
        if kind in _SKIPPED or (isinstance(kind, str) and "sql" in obj and kind not in _OPS):
            msg = f"maxwell {kind}"
            raise SkipRecord(msg)
        ts = obj.get("ts_ms")
        if not isinstance(ts, int):
            seconds = obj.get("ts")
            ts = seconds * 1000 if isinstance(seconds, int) else None
        if kind == "bootstrap-insert":
            data = obj.get("data")
            return Event(
                txn_id=f"bootstrap:{database}.{table}",
                type=BOOTSTRAP_ROW,
                database=database if isinstance(database, str) else None,
                table=table if isinstance(table, str) else None,
                row=row_text(data, raw, "data") if type(data) is dict else None,
                source_ts_ms=ts,
            )
        op = _OPS.get(kind) if isinstance(kind, str) else None
        if op is None:
            msg = f"maxwell record of unknown type {kind!r}"
            raise DecodeError(msg)
        xid = obj.get("xid")
        if not isinstance(xid, int) or isinstance(xid, bool):
            msg = f"maxwell {kind} of {database}.{table} without an integer xid"
            raise DecodeError(msg)
        data = obj.get("data")
        if type(data) is not dict:
            msg = f"maxwell {kind} of {database}.{table} without a 'data' object"
            raise DecodeError(msg)
        if not isinstance(database, str) or not isinstance(table, str):
            msg = "maxwell record without database/table"
            raise DecodeError(msg)
        return Event(
            txn_id=str(xid),
            type=MAXWELL_COMMIT if obj.get("commit") is True else MAXWELL_ROW,
            database=database,
            table=table,
            op=op,
            row=row_text(data, raw, "data"),
            source_ts_ms=ts,
        )
