"""Debezium transactions assembled across topics (DESIGN.md §7b), pure Python.

Debezium writes each table to its own topic and the transaction boundaries to
``<prefix>.transaction``: ``BEGIN``, then ``END`` with ``event_count`` and one count per
``data_collection``; every data event carries ``transaction{id, total_order,
data_collection_order}``. Topics are not ordered with each other, so one group sees every
topic of a connector (the adapter groups by source) and:

* a transaction is **complete** when its END has been applied and every data collection's
  count (and the total) is met by distinct ``total_order`` values;
* complete transactions are emitted **in END order** of the transaction topic (commit order):
  an incomplete END at the head holds back the ones behind it;
* each is emitted whole, in one call, rows in ``total_order``, numbered ``txn_seq`` (per
  group, gap-free) and ``row_seq``;
* ``c``/``u``/``r`` become an UPSERT of ``after``; ``d`` a DELETE with the key columns (the
  fields of the Kafka record key, valued from ``before``); ``source.schema.table`` maps to a
  target ``database.table``.

Snapshot events (``op=r`` without a transaction block) belong to no transaction: each call
emits those it received in chunks of at most ``snapshot-batch-rows`` rows, each chunk its own
``txn_seq``, before the transactions it completes. In a topic every row of the initial snapshot
precedes the streaming changes, and a transaction is emitted only after all its rows arrived,
so a snapshot row is never applied after a later change of its table. An incremental snapshot's
rows come in the middle of the stream: one read after an event of a transaction still waiting
in its topic partition is held until that transaction is emitted or rejected, so it is never
applied before an earlier change either.

Debezium's Postgres transaction id is ``<xid>:<LSN of the record carrying it>``: the LSN part
differs between BEGIN, each data event and END. With ``txn-id=postgres`` (the default) a
transaction is keyed by the xid, and the END's LSN (its commit position, increasing in commit
order) is a watermark: an END at or below it is a Kafka Connect re-send (at-least-once after a
worker crash) of a transaction already emitted, and it and its data events are dropped.
With ``txn-id=exact`` an END whose id is among the last :data:`EXACT_IDS_KEPT` that left the
queue is such a re-send. Duplicated data events of a transaction not yet emitted are recognised
by ``total_order`` and their own LSN. Two events with one ``total_order`` at different LSNs mean
that Debezium resumed inside the transaction after a Connect crash: it writes BEGIN again,
numbers the rest from 1 and counts only the rest in its END. From then on the transaction's
events are keyed by LSN, and it is rebuilt whole when its two writes overlap: the first
write's copy of the event the second resumed at gives that event's place in the transaction, so
the first write's events before it are counted exactly, and the END counts the rest. Without an
overlap nothing tells whether the first write's last events have all been read: it waits out
``txn-timeout`` and is rejected (``restarted-mid-transaction``), as is a transaction Debezium
resumed inside more than once. A transaction whose BEGIN was read twice waits until its first
event has been read twice too.

Heartbeats (topic ``__debezium-heartbeat.*`` or a value without ``op``), tombstones (null
value on a data topic), logical decoding messages (``op=m``) and schema-change records are
skipped. Every other problem is a violation with a policy (``reject`` sends the whole
transaction to the reject output; ``fail`` raises :class:`DebeziumAssemblyFailed` naming topic,
partition, offset and transaction): see ``docs/debezium.md``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from assembler.exceptions import AssemblerError
from assembler.machine import raw_value_text
from assembler.output import KIND_REJECT, KIND_ROW, NONE_OPEN, OutputRow, status_row
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings, Policy, Violation, _parse_policy
from common.errors import ConfigError, Terminal
from common.exact_json import exact_loads, exact_text

#: Debezium's marker for an unchanged TOASTed column it could not read (no old value in the
#: WAL unless the table has REPLICA IDENTITY FULL).
UNAVAILABLE_VALUE = "__debezium_unavailable_value"


def _java_name_uuid(name: bytes) -> str:
    """Java's ``UUID.nameUUIDFromBytes``: an MD5 name-based UUID without a namespace."""
    digest = hashlib.md5(name).digest()  # noqa: S324 - Java's UUID version 3, not security
    return str(uuid.UUID(bytes=digest, version=3))


_PLACEHOLDER_BYTES = UNAVAILABLE_VALUE.encode()
# How Debezium's UnchangedToastedPlaceholder writes the marker in each column type, as
# JsonConverter puts it in JSON: the text (text, varchar, json, and an hstore in JSON mode as
# {marker: marker}); its bytes for bytea, in base64 (``binary.handling.mode=bytes``, base64,
# base64-url-safe) or hex; a text[] or bytea[] as a list of that one; a uuid[] as the list of
# the name-based UUID of its bytes; an hstore in map mode as {marker: marker}; and a number
# array (smallint[], integer[], bigint[], real[], ...) as the list of its byte values.
_PLACEHOLDER_TEXTS = frozenset(
    {
        UNAVAILABLE_VALUE,
        base64.b64encode(_PLACEHOLDER_BYTES).decode(),
        _PLACEHOLDER_BYTES.hex(),
        _PLACEHOLDER_BYTES.hex().upper(),
        _java_name_uuid(_PLACEHOLDER_BYTES),
    }
)
_PLACEHOLDER_HSTORE = {UNAVAILABLE_VALUE: UNAVAILABLE_VALUE}
_PLACEHOLDER_NUMBERS = list(_PLACEHOLDER_BYTES)
# The forms that do not hold the plain text: the raw record's bytes cannot show them.
_PLACEHOLDER_ENCODED = _PLACEHOLDER_TEXTS - {UNAVAILABLE_VALUE}


def _is_placeholder(value: Any) -> bool:
    """Whether a column's value is Debezium's unchanged-TOAST placeholder, in any form."""
    if isinstance(value, str):
        if value in _PLACEHOLDER_TEXTS:
            return True
        if UNAVAILABLE_VALUE not in value:
            return False
        try:  # an hstore in hstore.handling.mode=json: the map as JSON text
            return bool(orjson.loads(value) == _PLACEHOLDER_HSTORE)
        except orjson.JSONDecodeError:
            return False
    if isinstance(value, list):
        if len(value) == 1:
            return isinstance(value[0], str) and value[0] in _PLACEHOLDER_TEXTS
        return value == _PLACEHOLDER_NUMBERS
    return isinstance(value, dict) and value == _PLACEHOLDER_HSTORE


def _placeholder_columns(after: dict[str, Any], raw: bytes) -> list[str]:
    """The columns of ``after`` that hold the unchanged-TOAST placeholder, sorted."""
    if _PLACEHOLDER_BYTES not in raw and not any(map(_is_encoded, after.values())):
        return []  # the common case
    return sorted(k for k, v in after.items() if _is_placeholder(v))


def _is_encoded(value: Any) -> bool:
    """A bytea, bytea[], uuid[] or number array placeholder (a cheap test for every column)."""
    if type(value) is str:
        return value in _PLACEHOLDER_ENCODED
    if type(value) is list:
        return value == _PLACEHOLDER_NUMBERS or (
            len(value) == 1 and type(value[0]) is str and value[0] in _PLACEHOLDER_ENCODED
        )
    return False


DEBEZIUM_STATE_VERSION = 3
"""3: as 2, with the snapshot rows held behind waiting transactions and the index they are held
by (a release that does not know them must not drop them, so it refuses the state). 2: a JSON
header, then each waiting transaction's rows as JSON text of their own, parsed only when a call
touches that transaction (a backlog's waiting rows cost a copy per call, not a parse). 1: one
JSON document. 1 and 2 are still read, and written as 3."""
EXACT_IDS_KEPT = 100_000
"""With ``txn-id=exact`` no commit position tells a re-send: the ids of the last this many
transactions that left the queue are kept, and an END among them is a Kafka Connect re-send.
Connect re-sends what followed its last offset flush, and nothing new comes while it is down, so
the re-sent are the latest: this covers an ``offset.flush.interval.ms`` (60 s by default) of
up to ~1,600 transactions a second (about 2.5 MB of state with SQL Server's ids)."""
_HEADER_LENGTH = struct.Struct(">I")
DEBEZIUM_STATE_FIELDS: tuple[tuple[str, str], ...] = (
    ("version", "int"),
    ("blob", "binary"),
)
"""The group state: a version and one BINARY blob (ARRAY/MAP state fields crash Spark)."""

#: Violations only this path has, with their ``on-error.<name>`` keys (the shared ones
#: are :class:`~assembler.settings.Violation`).
UNKNOWN_TABLE = "unknown-table"
MISSING_METADATA = "missing-metadata"
UNAVAILABLE = "unavailable-value"
RESTARTED = "restarted-mid-transaction"
EXTRA_VIOLATIONS = (UNKNOWN_TABLE, MISSING_METADATA, UNAVAILABLE, RESTARTED)
_DEAD_LETTERED = (
    "; all its events go to the dead-letter table (apply them from there, or re-snapshot the "
    "tables)"
)
"""How a ``restarted-mid-transaction`` reason ends: what happens, and what to do."""

_UPSERT_OPS = frozenset({"c", "u", "r"})
_SKIPPED_OPS = frozenset({"m"})  # logical decoding messages: not row changes

OPTION_KEYS: tuple[str, ...] = (
    "transaction-topic",
    "txn-id",
    "database",
    "snapshot-batch-rows",
    "heartbeat-topic-prefix",
    *(f"on-error.{v}" for v in EXTRA_VIOLATIONS),
)
"""Keys of :meth:`DebeziumSettings.from_options` besides ``table.<schema>.<table>``."""


@dataclass(frozen=True)
class DebeziumSettings:
    """How Debezium records are read and mapped; frozen and picklable.

    Attributes:
        transaction_topic: ``<topic.prefix>.transaction`` (or ``topic.transaction``).
        database: target database of tables the map does not name.
        table_map: ``schema.table`` -> (database, table). When empty, every source table maps
            to ``(database, table)``; when not empty, a table it does not name is an
            ``unknown-table`` violation.
        txn_id: ``postgres`` (key by the xid before the ``:``) or ``exact``.
        snapshot_batch_rows: the largest chunk of snapshot rows emitted as one unit.
        heartbeat_topic_prefix: topics starting with it are heartbeats.
        policies: ``unknown-table``, ``missing-metadata``, ``unavailable-value``,
            ``restarted-mid-transaction`` -> policy.
        core: shared policies and limits (``txn-timeout``, ``max-txn-rows``, ...).
    """

    transaction_topic: str
    database: str
    table_map: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    txn_id: Literal["postgres", "exact"] = "postgres"
    snapshot_batch_rows: int = 10_000
    heartbeat_topic_prefix: str = "__debezium-heartbeat"
    policies: Mapping[str, Policy] = field(default_factory=dict)
    core: AssemblerSettings = field(default_factory=AssemblerSettings)

    def __post_init__(self) -> None:
        if not self.transaction_topic:
            msg = "debezium transaction-topic: required (<topic.prefix>.transaction)"
            raise ConfigError(msg)
        if self.snapshot_batch_rows <= 0:
            msg = f"snapshot-batch-rows must be positive, got {self.snapshot_batch_rows}"
            raise ConfigError(msg)
        if self.txn_id not in ("postgres", "exact"):
            msg = f"txn-id: {self.txn_id!r} is not postgres or exact"
            raise ConfigError(msg)
        object.__setattr__(self, "table_map", dict(self.table_map))
        object.__setattr__(self, "policies", dict(self.policies))

    def policy(self, violation: str) -> Policy:
        """Policy of a shared or Debezium-only violation (``reject`` unless set)."""
        if violation in EXTRA_VIOLATIONS:
            return self.policies.get(violation, self.core.policy(Violation.UNDECODABLE))
        return self.core.policy(Violation(violation))

    def target(self, schema: str, table: str) -> tuple[str, str] | None:
        """The target (database, table) of a source table; ``None`` when unknown."""
        if not self.table_map:
            return self.database, table
        return self.table_map.get(f"{schema}.{table}")

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], core: AssemblerSettings | None = None
    ) -> DebeziumSettings:
        """Build from string options (the config's ``source.debezium.*``).

        ``table.<schema>.<table>=<database>.<table>`` entries form the table map.

        Raises:
            ConfigError: an unknown key or invalid value, naming the key.
        """
        table_map: dict[str, tuple[str, str]] = {}
        for key, value in options.items():
            if key.startswith("table."):
                source = key.removeprefix("table.")
                db, sep, tbl = value.partition(".")
                if not sep or not db or not tbl or source.count(".") != 1:
                    msg = f"debezium {key}={value!r}: expected table.<schema>.<table>=<db>.<table>"
                    raise ConfigError(msg)
                table_map[source] = (db, tbl)
            elif key not in OPTION_KEYS:
                msg = f"unknown debezium option {key!r}; accepted: {', '.join(OPTION_KEYS)}"
                raise ConfigError(msg)
        try:
            batch = int(options.get("snapshot-batch-rows", "10000"))
        except ValueError:
            msg = "snapshot-batch-rows: not an integer"
            raise ConfigError(msg) from None
        txn_id = options.get("txn-id", "postgres")
        if txn_id not in ("postgres", "exact"):
            msg = f"txn-id: {txn_id!r} is not postgres or exact"
            raise ConfigError(msg)
        return cls(
            transaction_topic=options.get("transaction-topic", ""),
            database=options.get("database", ""),
            table_map=table_map,
            txn_id="exact" if txn_id == "exact" else "postgres",
            snapshot_batch_rows=batch,
            heartbeat_topic_prefix=options.get("heartbeat-topic-prefix", "__debezium-heartbeat"),
            policies={
                v: _parse_policy(f"on-error.{v}", options[f"on-error.{v}"])
                for v in EXTRA_VIOLATIONS
                if f"on-error.{v}" in options
            },
            core=core or AssemblerSettings(),
        )


class DebeziumAssemblyFailed(AssemblerError, Terminal):  # noqa: N818 - mirrors AssemblyFailed
    """A violation whose policy is ``fail``; names topic, partition, offset, transaction."""

    def __init__(
        self, violation: str, topic: str, partition: int, offset: int, txn: str | None, detail: str
    ) -> None:
        self.violation = violation
        self.topic, self.partition, self.offset, self.txn = topic, partition, offset, txn
        self.detail = detail
        super().__init__(
            f"{violation} at topic={topic} partition={partition} offset={offset} "
            f"txn={txn if txn is not None else '-'}: {detail}. The policy on-error.{violation} "
            "is 'fail', so the query stops here. Fix the source or set "
            f"on-error.{violation}=reject to send such transactions to the reject output, then "
            "restart: the query resumes from its checkpoint and re-reads this record."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.violation, self.topic, self.partition, self.offset, self.txn, self.detail),
        )


@dataclass(frozen=True)
class DebeziumStep:
    """Result of a call: outputs in emission order, the new state, the next timeout."""

    outputs: list[OutputRow]
    state: tuple[Any, ...]
    timeout_at_ms: int | None
    # A STATUS row per topic partition the source has read: open while it holds events of a
    # transaction not yet emitted (for the metrics; assembler.output.status_row).
    status: list[OutputRow] = field(default_factory=list)


# A buffered data event: [topic, partition, offset, collection, op, database, table, row,
# ts_ms, bad, lsn] where bad is None or [violation, detail] and lsn is the event's own position
# (the LSN part of its Postgres transaction id; None otherwise, and absent from rows that
# state written before it holds). A transaction Debezium resumed inside is keyed by LSN, and
# each of its rows has one more item: the total_order values it was read under (one per write).
_Row = list[Any]


class _Decoded:
    """What one record is, after decoding (kind: skip | data | snapshot | begin | end)."""

    __slots__ = (
        "bad",
        "collection",
        "counts",
        "kind",
        "lsn",
        "op",
        "order",
        "row",
        "target",
        "ts",
        "txn",
    )

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.txn: str | None = None
        self.order = 0
        self.lsn: int | None = None
        self.collection = ""
        self.op = ""
        self.target: tuple[str, str] | None = None
        self.row: str | None = None
        self.ts: int | None = None
        self.counts: dict[str, int] = {}
        self.bad: list[str] | None = None


def _counts(rows: Iterable[_Row]) -> dict[str, int]:
    """Data events per source table (``data_collection``)."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[3]] = counts.get(row[3], 0) + 1
    return counts


def _same_change(a: _Row, b: _Row) -> bool:
    """One change read twice: the same LSN, table, op and row image.

    The LSN alone does not name a change: a multi-row insert such as COPY gives its rows one.
    """
    return bool(a[10] == b[10] and a[3] == b[3] and a[4] == b[4] and a[7] == b[7])


def _one_change_twice(rows: dict[str, _Row]) -> bool:
    """Whether one change was read under two ``total_order`` numbers (Debezium resumed)."""
    seen = {(r[10], r[3], r[4], r[7]) for r in rows.values()}
    return len(seen) < len(rows)


def _begins(begin: list[Any]) -> int:
    """BEGINs read of a transaction (state written before they were counted: one)."""
    return int(begin[3]) if len(begin) > 3 else 1


class _Undecodable(Exception):  # noqa: N818 - internal control flow only
    pass


def _payload(value: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as e:
        msg = f"not JSON: {e}"
        raise _Undecodable(msg) from None
    return _unwrap(doc)


def _exact_image(value: bytes, field: str) -> dict[str, Any]:
    """The ``before``/``after`` object of a record that :func:`_payload` read, numbers exact."""
    image: dict[str, Any] = _unwrap(exact_loads(value))[field]
    return image


def _unwrap(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        msg = "not a JSON object"
        raise _Undecodable(msg)
    # JsonConverter with schemas.enable=true wraps every value as {schema, payload}.
    if set(doc) == {"schema", "payload"}:
        inner = doc["payload"]
        if inner is None:
            return {}
        if not isinstance(inner, dict):
            msg = "payload is not a JSON object"
            raise _Undecodable(msg)
        return inner
    return doc


def _key_fields(key: bytes | None) -> list[str] | None:
    if key is None:
        return None
    try:
        doc = _payload(key)
    except _Undecodable:
        return None
    return list(doc) or None


class DebeziumAssembler:
    """Assembles Debezium transactions of one source (all its topics); see the module doc.

    Stateless between calls (everything is in the state tuple); picklable.
    """

    def __init__(self, settings: DebeziumSettings) -> None:
        self._settings = settings

    @property
    def settings(self) -> DebeziumSettings:
        """The settings this assembler applies."""
        return self._settings

    def process(
        self, state: tuple[Any, ...] | None, records: Iterable[SourceRecord], now_ms: int
    ) -> DebeziumStep:
        """Apply a call's records (any topics of the source, any order).

        Raises:
            DebeziumAssemblyFailed: a violation under policy ``fail`` (the state handed in
                stays valid: the query restarts from its checkpoint).
        """
        run = _Run(self._settings, _load(state), now_ms)
        run.apply(records)
        run.check_timeouts()
        return run.finish()

    def expire(self, state: tuple[Any, ...], now_ms: int) -> DebeziumStep:
        """The processing-time timeout: reject what waited ``txn-timeout`` or longer."""
        run = _Run(self._settings, _load(state), now_ms)
        run.check_timeouts()
        return run.finish()


def _load(state: tuple[Any, ...] | None) -> dict[str, Any]:
    if state is None:
        return {
            "offsets": {},
            "seq": 0,
            "wm": -1,
            "begins": {},
            "pending": {},
            "ends": [],
            "rejected": {},
            "dropping": {},
            "rebuilt": {},
        }
    version, blob = state
    if version == 1:
        loaded: dict[str, Any] = orjson.loads(blob)
        return loaded
    if version not in (2, DEBEZIUM_STATE_VERSION):
        msg = (
            f"Debezium assembler state version {version} is not one this release reads "
            f"(1 to {DEBEZIUM_STATE_VERSION}): the checkpoint was written by a newer release"
        )
        raise AssemblerError(msg)
    view = memoryview(blob)
    (size,) = _HEADER_LENGTH.unpack_from(view)
    header: dict[str, Any] = orjson.loads(view[_HEADER_LENGTH.size : _HEADER_LENGTH.size + size])
    at = _HEADER_LENGTH.size + size
    # The rows follow in the header's order of the waiting transactions, left unparsed.
    for entry in header["pending"].values():
        length = entry.pop("size")
        entry["rows"] = view[at : at + length]
        at += length
    if at != len(view):
        msg = f"Debezium assembler state is {len(view)} bytes, its header accounts for {at}"
        raise AssemblerError(msg)
    return header


def _dump(st: dict[str, Any]) -> bytes:
    """Version 2 of the state: rows no call touched are copied as they were read."""
    pending: dict[str, dict[str, Any]] = {}
    texts: list[bytes | memoryview] = []
    for key, entry in st["pending"].items():
        rows = entry["rows"]
        text = orjson.dumps(rows) if isinstance(rows, dict) else rows
        texts.append(text)
        pending[key] = {"since": entry["since"], "size": len(text)}
        for name in ("firsts", "by_lsn"):
            if name in entry:
                pending[key][name] = entry[name]
    header = orjson.dumps({**st, "pending": pending})
    return b"".join([_HEADER_LENGTH.pack(len(header)), header, *texts])


class _Run:
    def __init__(self, settings: DebeziumSettings, st: dict[str, Any], now_ms: int) -> None:
        self.s = settings
        self.st = st
        self.now = now_ms
        self.out: list[OutputRow] = []
        self.snapshot: list[_Row] = []
        self.current_key: bytes | None = None
        # The queue of applied ENDs, in commit order, and the keys in it: a backlog can queue
        # thousands, and each END and each pending transaction asks whether its key is queued.
        # It leaves ``st`` for the call, so that there is one copy; ``finish`` puts it back.
        self.ends: deque[dict[str, Any]] = deque(st.pop("ends"))
        self.queued: set[str] = {e["key"] for e in self.ends}
        self.routes: dict[tuple[str, str], tuple[tuple[str, str] | None, str | None]] = {}
        self.tp = ""  # the topic-partition of the record being applied
        # txn-id=exact: ids of the latest transactions that left the queue (EXACT_IDS_KEPT)
        self.done: deque[str] = deque(st.pop("done", []), maxlen=EXACT_IDS_KEPT)
        self.done_keys = set(self.done)
        st.setdefault("rebuilt", {})  # absent from state written before rebuilds
        # Snapshot rows held behind waiting transactions: [row, keys of the transactions]
        st.setdefault("held", [])
        self.held_at = {f"{h[0][0]}\x00{h[0][1]}" for h in st["held"]}
        if "open" not in st:  # state version 1 or 2: index what waits
            st["open"] = {}
            for key in list(st["pending"]):
                for row in self.rows(key).values():
                    st["open"].setdefault(f"{row[0]}\x00{row[1]}", {}).setdefault(key, row[2])

    # -- decoding -------------------------------------------------------------------------

    def txn_key(self, txn_id: str) -> str:
        if self.s.txn_id == "postgres":
            return txn_id.split(":", 1)[0]
        return txn_id

    def id_lsn(self, txn_id: str) -> int | None:
        """The LSN part of a Postgres transaction id: the record's own (an END's: its commit)."""
        if self.s.txn_id != "postgres":
            return None
        _, sep, lsn = txn_id.partition(":")
        return int(lsn) if sep and lsn.isdigit() else None

    def decode(self, rec: SourceRecord) -> _Decoded:
        if rec.topic.startswith(self.s.heartbeat_topic_prefix):
            return _Decoded("skip")
        if rec.value is None:
            return _Decoded("skip")  # tombstone after a delete (log compaction)
        doc = _payload(rec.value)
        if rec.topic == self.s.transaction_topic:
            return self.decode_marker(doc)
        if "op" not in doc:
            # Heartbeat ({ts_ms}) or a schema-change record ({ddl, ...}): no row change.
            return _Decoded("skip")
        op = doc["op"]
        if op in _SKIPPED_OPS:
            return _Decoded("skip")
        source = doc.get("source")
        if not isinstance(source, dict) or not isinstance(op, str):
            msg = "data event without a source block or op"
            raise _Undecodable(msg)
        schema, table = source.get("schema"), source.get("table")
        if not isinstance(schema, str) or not isinstance(table, str):
            msg = "data event without source.schema/source.table"
            raise _Undecodable(msg)
        ev = _Decoded("data")
        ev.collection = f"{schema}.{table}"
        ev.ts = source.get("ts_ms") if isinstance(source.get("ts_ms"), int) else None
        txn = doc.get("transaction")
        if isinstance(txn, dict):
            tid, order = txn.get("id"), txn.get("total_order")
            if not isinstance(tid, str) or not tid or not isinstance(order, int):
                msg = "transaction block without id/total_order"
                raise _Undecodable(msg)
            ev.txn, ev.order, ev.lsn = self.txn_key(tid), order, self.id_lsn(tid)
        elif txn is not None:
            msg = "transaction is not an object"
            raise _Undecodable(msg)
        elif op == "r":
            ev.kind = "snapshot"
        else:
            ev.kind = "orphan"
            return ev
        ev.target, problem = self.route(schema, table)
        if problem is not None:
            ev.bad = [UNKNOWN_TABLE, problem]
            return ev
        if op in _UPSERT_OPS:
            after = doc.get("after")
            if not isinstance(after, dict):
                msg = f"op {op!r} without an 'after' object"
                raise _Undecodable(msg)
            toast = _placeholder_columns(after, rec.value)
            if toast:
                ev.bad = [
                    UNAVAILABLE,
                    f"column(s) {', '.join(toast)} of {schema}.{table} carry Debezium's "
                    f"unchanged-TOAST placeholder; applying it would overwrite a real value. "
                    f"ALTER TABLE {schema}.{table} REPLICA IDENTITY FULL gives Debezium the value",
                ]
            value = rec.value
            # A NUMERIC sent as a JSON number (decimal.format=NUMERIC) keeps its digits.
            ev.op, ev.row = "UPSERT", exact_text(after, lambda: _exact_image(value, "after"))
        elif op == "d":
            before = doc.get("before")
            if not isinstance(before, dict):
                msg = "delete without a 'before' object"
                raise _Undecodable(msg)
            keys = _key_fields(self.current_key) or [k for k, v in before.items() if v is not None]
            ev.op = "DELETE"
            value = rec.value

            def exact_key() -> dict[str, Any]:
                exact = _exact_image(value, "before")
                return {k: exact.get(k) for k in keys}

            ev.row = exact_text({k: before.get(k) for k in keys}, exact_key)
        else:
            msg = f"unsupported op {op!r} (only c, u, r, d are applied)"
            raise _Undecodable(msg)
        return ev

    def rows(self, key: str) -> dict[str, _Row]:
        """The buffered data events of a waiting transaction, parsed once.

        Keyed by ``total_order``, or by LSN once Debezium is known to have resumed inside it
        (:meth:`by_lsn`).
        """
        entry = self.st["pending"].get(key)
        if entry is None:
            return {}
        rows = entry["rows"]
        if isinstance(rows, dict):
            return rows
        parsed: dict[str, _Row] = orjson.loads(rows)
        entry["rows"] = parsed
        return parsed

    def firsts(self, key: str) -> int:
        """How many times a waiting transaction's first event (``total_order`` 1) was read."""
        entry = self.st["pending"].get(key)
        if entry is None or entry.get("by_lsn") or "1" not in self.rows(key):
            return 0
        return int(entry.get("firsts", 1))

    def by_lsn(self, key: str) -> bool:
        """Whether a waiting transaction's events are keyed by LSN (Debezium resumed inside it)."""
        entry = self.st["pending"].get(key)
        return bool(entry is not None and entry.get("by_lsn"))

    def key_by_lsn(self, key: str) -> bool:
        """Re-key a waiting transaction's events by LSN.

        False when one has no LSN (state written before events kept theirs, or
        ``txn-id=exact``), or when two changes share one (the rows of a multi-row insert such
        as COPY): then it cannot be rebuilt.
        """
        rows = self.rows(key)
        if any(len(r) < 11 or r[10] is None for r in rows.values()):
            return False
        by_lsn: dict[str, _Row] = {}
        for order in sorted(rows, key=int):
            row = rows[order]
            seen = by_lsn.get(str(row[10]))
            if seen is None:
                by_lsn[str(row[10])] = [*row[:11], [int(order)]]
            elif _same_change(seen, row):
                seen[11].append(int(order))  # one change, read in both writes
            else:
                return False  # rows of one multi-row insert (COPY) share its LSN
        entry = self.st["pending"][key]
        entry["rows"] = by_lsn
        entry["by_lsn"] = True
        entry.pop("firsts", None)
        return True

    def pop_rows(self, key: str) -> dict[str, _Row]:
        """Take a transaction out of the waiting ones, with its buffered data events."""
        rows = self.rows(key)
        self.st["pending"].pop(key, None)
        return rows

    def route(self, schema: str, table: str) -> tuple[tuple[str, str] | None, str | None]:
        """(target, why it may not be written) of a source table, worked out once per call."""
        found = self.routes.get((schema, table))
        if found is None:
            target = self.s.target(schema, table)
            targets = self.s.core.targets
            if target is None:
                found = (None, f"source table {schema}.{table} is not in the table map")
            elif targets is not None and (problem := targets.problem(*target)) is not None:
                found = (None, f"source table {schema}.{table}: {problem}")
            else:
                found = (target, None)
            self.routes[(schema, table)] = found
        return found

    def decode_marker(self, doc: dict[str, Any]) -> _Decoded:
        status, tid = doc.get("status"), doc.get("id")
        if status not in ("BEGIN", "END") or not isinstance(tid, str) or not tid:
            msg = "transaction marker without status BEGIN/END and id"
            raise _Undecodable(msg)
        ev = _Decoded("begin" if status == "BEGIN" else "end")
        ev.txn = tid
        ev.ts = doc.get("ts_ms") if isinstance(doc.get("ts_ms"), int) else None
        if status == "END":
            count, collections = doc.get("event_count"), doc.get("data_collections")
            if not isinstance(count, int) or not isinstance(collections, list):
                msg = "END without event_count/data_collections"
                raise _Undecodable(msg)
            ev.order = count
            for c in collections:
                if not isinstance(c, dict) or not isinstance(c.get("event_count"), int):
                    msg = "END with a malformed data_collections entry"
                    raise _Undecodable(msg)
                ev.counts[self.collection(str(c.get("data_collection")))] = int(c["event_count"])
        return ev

    def collection(self, name: str) -> str:
        """An END's ``data_collection`` as events are counted: ``schema.table``.

        Connectors with a stable id (``txn-id=exact``) may name the database too: SQL Server
        writes ``<db>.<schema>.<table>``. Postgres writes ``schema.table``, kept as it is.
        """
        if self.s.txn_id == "exact" and name.count(".") >= 2:
            return name.split(".", 1)[1]
        return name

    # -- applying -------------------------------------------------------------------------

    def apply(self, records: Iterable[SourceRecord]) -> None:
        offsets: dict[str, int] = self.st["offsets"]
        txn_topic = self.s.transaction_topic
        # Data topics first, then the transaction topic: an END then finds every data event
        # of this call already buffered. Within a topic-partition, offset order.
        ordered = sorted(
            records, key=lambda r: (r.topic == txn_topic, r.topic, r.partition, r.offset)
        )
        for rec in ordered:
            self.tp = tp = f"{rec.topic}\x00{rec.partition}"
            if rec.offset <= offsets.get(tp, -1):
                continue  # replay of an applied record
            self.current_key = rec.key
            try:
                ev = self.decode(rec)
            except _Undecodable as e:
                self.reject_alone("undecodable", rec, None, f"record cannot be used: {e}")
            else:
                self.on_event(rec, ev)
            offsets[tp] = rec.offset
        self.emit_snapshot(self.snapshot)
        self.snapshot = []
        self.release_held()
        self.drain()

    def on_event(self, rec: SourceRecord, ev: _Decoded) -> None:
        kind = ev.kind
        if kind == "skip":
            return
        if kind == "snapshot":
            if ev.bad is not None:
                self.reject_alone(ev.bad[0], rec, ev, ev.bad[1])
                return
            self.on_snapshot(self.row_of(rec, ev))
        elif kind == "orphan":
            self.reject_alone(
                MISSING_METADATA,
                rec,
                ev,
                f"{ev.collection} change at offset {rec.offset} has no transaction block: is "
                "provide.transaction.metadata=true on the connector?",
            )
        elif kind == "data":
            self.on_data(rec, ev)
        elif kind == "begin":
            assert ev.txn is not None
            key = self.txn_key(ev.txn)
            if key not in self.st["rejected"] and key not in self.st["dropping"]:
                # [offset, read at, ts_ms, BEGINs read]: Debezium writes a BEGIN again when it
                # starts over inside a transaction (see ``on_data``).
                begin = self.st["begins"].get(key)
                if begin is None:
                    self.st["begins"][key] = [rec.offset, self.now, ev.ts, 1]
                else:
                    begin[3:] = [_begins(begin) + 1]
        else:
            self.on_end(rec, ev)

    def row_of(self, rec: SourceRecord, ev: _Decoded) -> _Row:
        # An unknown table has no target: its reject row names the source table instead, and
        # keeps the record as Kafka had it (nothing of a rejected event may be lost).
        database, table = ev.target if ev.target is not None else (None, ev.collection)
        return [
            rec.topic,
            rec.partition,
            rec.offset,
            ev.collection,
            ev.op,
            database,
            table,
            ev.row if ev.row is not None else raw_value_text(rec.value),
            ev.ts,
            ev.bad,
            ev.lsn,
        ]

    def on_data(self, rec: SourceRecord, ev: _Decoded) -> None:
        assert ev.txn is not None
        key = ev.txn  # already the transaction key (decode)
        dropping = self.st["dropping"].get(key)
        if dropping is not None:
            dropping[0] -= 1  # a re-sent event of a transaction already emitted
            if dropping[0] <= 0:
                del self.st["dropping"][key]
            return
        rebuilt = self.st["rebuilt"].get(key)
        if rebuilt is not None and ev.lsn is not None and rebuilt[0] <= ev.lsn <= rebuilt[1]:
            return  # the first write's copy of a change a rebuilt transaction emitted
        rejected = self.st["rejected"].get(key)
        if rejected is not None:
            self.reject_follow_up(key, rejected, rec, ev)
            return
        entry = self.st["pending"].setdefault(key, {"since": self.now, "rows": {}})
        rows = self.rows(key)
        # A snapshot row read after this event in its partition waits for the transaction.
        self.st["open"].setdefault(self.tp, {}).setdefault(key, rec.offset)
        if not entry.get("by_lsn"):
            order = str(ev.order)
            earlier = rows.get(order)
            if earlier is None:
                rows[order] = self.row_of(rec, ev)
                self.check_added(key, rows, rec, ev)
                return
            seen = earlier[10] if len(earlier) > 10 else None
            if ev.lsn is None or seen is None or seen == ev.lsn:
                # Duplicate (Kafka Connect re-send): total_order is unique per transaction. Its
                # first event is counted once per BEGIN, so that a transaction Debezium wrote
                # twice waits until both writes agree (``drain``).
                if ev.order == 1:
                    entry["firsts"] = entry.get("firsts", 1) + 1
                return
            # Debezium resumed inside the transaction after a Connect crash and numbered the
            # rest from 1: from now on only the LSN names an event (``rebuild``).
            if not self.key_by_lsn(key):
                self.reject_restarted(
                    key,
                    rec,
                    ev,
                    f"Debezium restarted inside transaction {key}: total_order {ev.order} at "
                    f"{rec.topic}:{rec.partition}:{rec.offset} is the change at LSN {ev.lsn}, "
                    f"and was another change at {earlier[0]}:{earlier[1]}:{earlier[2]}; its "
                    "changes cannot all be told apart by LSN (one read without it, or rows of a "
                    "multi-row insert such as COPY sharing one), so it cannot be rebuilt",
                )
                return
            rows = self.rows(key)
        if ev.lsn is None:
            self.reject_restarted(
                key,
                rec,
                ev,
                f"Debezium restarted inside transaction {key}, and its event at "
                f"{rec.topic}:{rec.partition}:{rec.offset} has no LSN in its transaction id, so "
                "the transaction cannot be rebuilt",
            )
            return
        row = [*self.row_of(rec, ev), [ev.order]]
        seen_at = rows.get(str(ev.lsn))
        if seen_at is not None and _same_change(seen_at, row):
            if ev.order not in seen_at[11]:
                seen_at[11].append(ev.order)  # the same change under the other write's number
            return
        if seen_at is not None:
            self.reject_restarted(
                key,
                rec,
                ev,
                f"Debezium restarted inside transaction {key}, and its change at "
                f"{rec.topic}:{rec.partition}:{rec.offset} shares LSN {ev.lsn} with another "
                f"(at {seen_at[0]}:{seen_at[1]}:{seen_at[2]}; rows of a multi-row insert such "
                "as COPY), so its changes cannot be told apart and it cannot be rebuilt",
            )
            return
        rows[str(ev.lsn)] = row
        self.check_added(key, rows, rec, ev)

    def reject_restarted(self, key: str, rec: SourceRecord, ev: _Decoded, detail: str) -> None:
        """Reject a transaction Debezium resumed inside that cannot be rebuilt, this event too."""
        self.reject_txn(key, RESTARTED, rec, detail + _DEAD_LETTERED)
        self.reject_follow_up(key, self.st["rejected"][key], rec, ev)

    def check_added(self, key: str, rows: dict[str, _Row], rec: SourceRecord, ev: _Decoded) -> None:
        """Reject a transaction at once for its new event's problem or its size."""
        if ev.bad is not None:
            # Unknown table or TOAST placeholder: the whole transaction goes, now.
            self.reject_txn(key, ev.bad[0], rec, ev.bad[1])
        elif len(rows) > self.s.core.max_txn_rows:
            self.reject_txn(
                key,
                Violation.TXN_TOO_LARGE.value,
                rec,
                f"transaction {key} reached {len(rows)} data events at {rec.topic}:{rec.offset} "
                f"(max-txn-rows={self.s.core.max_txn_rows}); rejected now to bound memory",
            )

    def on_end(self, rec: SourceRecord, ev: _Decoded) -> None:
        assert ev.txn is not None
        key = self.txn_key(ev.txn)
        lsn = self.id_lsn(ev.txn)
        if lsn <= self.st["wm"] if lsn is not None else key in self.done_keys:
            # Re-sent END of a transaction already emitted: drop it and its data events.
            buffered = len(self.pop_rows(key))
            self.st["begins"].pop(key, None)
            if ev.order - buffered > 0:
                self.st["dropping"][key] = [ev.order - buffered, self.now]
            return
        if key in self.queued:
            # A re-sent END of a transaction still waiting for its data: its BEGIN was too.
            self.st["begins"].pop(key, None)
            return
        rejected = self.st["rejected"].get(key)
        if rejected is not None:
            self.reject_follow_up(key, rejected, rec, ev)
            if rejected[0].startswith(RESTARTED):
                return  # its END counts only the rest: later events are rejected until expiry
            rejected[1] = ev.order - rejected[5]  # data events still to come
            if rejected[1] <= 0:
                del self.st["rejected"][key]
            return
        begin = self.st["begins"].pop(key, None)
        entry = {
            "begins": _begins(begin) if begin is not None else 1,
            "key": key,
            "id": ev.txn,
            "topic": rec.topic,
            "partition": rec.partition,
            "offset": rec.offset,
            "count": ev.order,
            "counts": ev.counts,
            "at": self.now,
            "ts": ev.ts,
            "begin": begin[0] if begin else None,
            "lsn": lsn,
        }
        self.ends.append(entry)
        self.queued.add(key)
        if begin is None:
            self.violate(
                Violation.NO_BEGIN.value,
                rec,
                key,
                f"END of transaction {ev.txn!r} at offset {rec.offset} without a BEGIN",
            )
            entry["bad"] = [Violation.NO_BEGIN.value, "END without a BEGIN"]

    # -- emission -------------------------------------------------------------------------

    def on_snapshot(self, row: _Row) -> None:
        """Emit a snapshot row with the call's, or hold it behind waiting transactions.

        An incremental snapshot's rows come in the middle of the stream: one read after a
        transaction's event in its partition holds a later state of the row than that event
        wrote, so it must not be applied first. The initial snapshot precedes every change of
        its topics, so nothing holds it. Rows of a partition leave in the order they came.
        """
        pending = self.st["pending"]
        waiting = self.st["open"].get(self.tp, {})
        keys = [k for k in waiting if k in pending]
        if keys or self.tp in self.held_at:
            self.st["held"].append([row, keys])
            self.held_at.add(self.tp)
        else:
            self.snapshot.append(row)

    def release_held(self) -> None:
        """Emit the held snapshot rows whose transactions have all left the waiting ones."""
        held = self.st["held"]
        if not held:
            return
        pending = self.st["pending"]
        blocked: set[str] = set()
        free: list[_Row] = []
        kept: list[list[Any]] = []
        for entry in held:
            row, keys = entry
            where = f"{row[0]}\x00{row[1]}"
            if where in blocked or any(k in pending for k in keys):
                blocked.add(where)  # rows of a partition keep their order
                kept.append(entry)
            else:
                free.append(row)
        self.st["held"] = kept
        self.held_at = blocked
        self.emit_snapshot(free)

    def emit_snapshot(self, rows: list[_Row]) -> None:
        n = self.s.snapshot_batch_rows
        for start in range(0, len(rows), n):
            chunk = rows[start : start + n]
            first = chunk[0]
            self.emit_rows(
                f"snapshot:{first[0]}:{first[1]}:{first[2]}",
                chunk,
                first[0],
                first[1],
                first[2],
                chunk[-1][2],
                chunk[-1][8],
            )

    def drain(self) -> None:
        ends = self.ends
        while ends:
            head = ends[0]
            key = head["key"]
            checked: tuple[list[_Row], list[str] | None] | None = None
            if not self.by_lsn(key):
                checked = self.by_numbers(head, self.rows(key))
                if checked is None:
                    return  # not complete yet: everything behind it waits (commit order)
            if self.by_lsn(key):  # or by_numbers found one change under two numbers
                checked = self.rebuild(head, self.rows(key))
                if checked is None:
                    return
            assert checked is not None
            ordered, bad = checked
            bad = bad or head.get("bad")
            ends.popleft()
            self.queued.discard(key)
            rebuilt = self.by_lsn(key)
            self.st["pending"].pop(key, None)
            if head["lsn"] is not None:
                self.st["wm"] = max(self.st["wm"], head["lsn"])
            else:
                self.left_queue(key)
            if bad is not None:
                if bad is not head.get("bad"):  # the END's own was raised when it was read
                    self.violate_at(
                        bad[0], head["topic"], head["partition"], head["offset"], key, bad[1]
                    )
                self.reject_rows(key, ordered, head, f"{bad[0]}: {bad[1]}")
                self.release_held()
                continue
            if rebuilt:
                # Later copies from the first write are dropped by LSN, as re-sends are.
                self.st["rebuilt"][key] = [ordered[0][10], ordered[-1][10], self.now]
            self.emit_rows(
                key,
                ordered,
                head["topic"],
                head["partition"],
                head["begin"] if head["begin"] is not None else head["offset"],
                head["offset"],
                head["ts"],
            )
            self.release_held()

    def left_queue(self, key: str) -> None:
        """Note a ``txn-id=exact`` transaction applied or rejected: its next END is a re-send."""
        if self.s.txn_id != "exact":
            return
        if len(self.done) == EXACT_IDS_KEPT:
            self.done_keys.discard(self.done[0])
        self.done.append(key)
        self.done_keys.add(key)

    def by_numbers(
        self, head: dict[str, Any], rows: dict[str, _Row]
    ) -> tuple[list[_Row], list[str] | None] | None:
        """A transaction keyed by ``total_order``, checked against its END.

        Returns ``None`` while it waits, else its rows in order and ``None`` or why they are
        rejected. When one change (LSN) was read under two numbers, Debezium resumed inside
        it: the transaction is keyed by LSN instead, for :meth:`rebuild`.
        """
        key = head["key"]
        counts = _counts(rows.values())
        want = {c: n for c, n in head["counts"].items() if n}
        over = any(n > want.get(c, 0) for c, n in counts.items())
        if len(rows) < head["count"] and not over:
            return None
        # The first write finished (its END counts the whole) and the second repeated its tail
        # under other numbers: a mix of both can fill every number, but not with distinct LSNs.
        lsns = {r[10] if len(r) > 10 else None for r in rows.values()}
        if None not in lsns and len(lsns) < len(rows) and _one_change_twice(rows):
            if self.key_by_lsn(key):
                return [], None
            return [rows[k] for k in sorted(rows, key=int)], [
                RESTARTED,
                f"Debezium restarted inside transaction {head['id']!r} (END at "
                f"{head['topic']}:{head['partition']}:{head['offset']}): one change was read "
                "under two numbers, and rows of a multi-row insert such as COPY share an LSN, "
                "so it cannot be rebuilt" + _DEAD_LETTERED,
            ]
        begins = head.get("begins", 1)
        if begins > 1 and not over and begins > self.firsts(key):
            # Debezium began it more than once (a Connect crash inside it): complete only when
            # each write's first event is read, at one LSN. A write that resumed in the middle
            # numbers its first event 1 too, at another LSN, and on_data keys the transaction
            # by LSN. Its BEGINs carry one id (tests/integration/debezium/
            # test_connect_crash_inside_transaction.py), so they cannot tell a write started
            # over from its first change from one resumed inside.
            return None
        ordered = [rows[k] for k in sorted(rows, key=int)]
        if len(rows) != head["count"] or counts != want:
            return ordered, [
                Violation.EVENT_COUNT_MISMATCH.value,
                f"END of transaction {head['id']!r} at offset {head['offset']} says "
                f"event_count={head['count']} {want}, received {len(rows)} {counts}",
            ]
        return ordered, None

    def rebuild(
        self, head: dict[str, Any], rows: dict[str, _Row]
    ) -> tuple[list[_Row], list[str] | None] | None:
        """A transaction Debezium resumed inside, made whole from its two writes by LSN.

        The first write numbers the transaction from its first change; the second, from the
        change after the last flushed offset. Both write that change: the second as its event
        1, the first under its place ``j`` in the transaction. When the second BEGIN came
        before the END, the END is the second write's and counts the changes from there on:
        then the first write's changes before it must be read, each under its number (1 to
        ``j - 1``). When the END came first, the first write had finished: its END counts the
        whole transaction. Returns ``None`` while that cannot be told yet, else the rows in
        LSN order and ``None`` or why they are rejected.
        """
        lsns = sorted(rows, key=int)
        ordered = [rows[k] for k in lsns]
        begins = head.get("begins", 1)
        starts = [int(k) for k in lsns if 1 in rows[k][11]]
        where = (
            f"transaction {head['id']!r} (END at {head['topic']}:{head['partition']}:"
            f"{head['offset']})"
        )
        if begins > 2 or len(starts) > 2:
            return ordered, [
                RESTARTED,
                f"Debezium restarted inside {where} more than once ({begins} BEGINs, first "
                f"events at LSNs {starts}); only one restart can be rebuilt" + _DEAD_LETTERED,
            ]
        want = {c: n for c, n in head["counts"].items() if n}
        if begins < 2:
            counted = lsns
            first: list[str] = []
        else:
            if len(starts) < 2:
                return None  # one write's event 1 is still to come
            places = [n for n in rows[str(starts[1])][11] if n != 1]
            if not places:
                return None  # the first write's copy of where the second resumed: to come
            first = [k for k in lsns if int(k) < starts[1]]
            counted = lsns[len(first) :]
            if len(first) < places[0] - 1:
                return None
        counts = _counts(rows[k] for k in counted)
        over = any(n > want.get(c, 0) for c, n in counts.items())
        if len(counted) < head["count"] and not over:
            return None
        # Each change must sit where both writes put it: the first write's n-th change under
        # n, and under n - (j - 1) in the second write when that had it too.
        shifts = {n - o for n, k in enumerate(lsns, 1) for o in rows[k][11] if o != n}
        fits = (
            len(shifts) <= 1
            and all(d > 0 for d in shifts)
            and all(rows[k][11] == [n] for n, k in enumerate(first, 1))
            and (not first or shifts == {len(first)})
        )
        if not fits or over or len(counted) != head["count"] or counts != want:
            return ordered, [
                RESTARTED,
                f"Debezium restarted inside {where}, and its two writes do not fit together: "
                f"{len(lsns)} changes read, the second write from LSN "
                f"{starts[1] if len(starts) > 1 else '?'} on, numbered "
                f"{[rows[k][11] for k in lsns[:8]]}..., {len(counted)} counted {counts}, the "
                f"END counts {head['count']} {want}" + _DEAD_LETTERED,
            ]
        return ordered, None

    def emit_rows(
        self,
        txn: str,
        rows: list[_Row],
        topic: str,
        partition: int,
        first: int,
        last: int,
        ts: int | None,
    ) -> None:
        if not rows:
            return  # an empty transaction consumes no txn_seq
        self.st["seq"] += 1
        seq = self.st["seq"]
        end = len(rows) - 1
        self.out.extend(
            OutputRow(
                KIND_ROW,
                topic,
                partition,
                txn,
                seq,
                i,
                r[5],
                r[6],
                r[4],
                r[7],
                i == end,
                first,
                last,
                ts,
                None,
            )
            for i, r in enumerate(rows)
        )

    # -- violations -----------------------------------------------------------------------

    def violate_at(
        self, v: str, topic: str, partition: int, offset: int, txn: str | None, detail: str
    ) -> None:
        if self.s.policy(v) is Policy.FAIL:
            raise DebeziumAssemblyFailed(v, topic, partition, offset, txn, detail)

    def violate(self, v: str, rec: SourceRecord, txn: str | None, detail: str) -> None:
        self.violate_at(v, rec.topic, rec.partition, rec.offset, txn, detail)

    def reject_alone(self, v: str, rec: SourceRecord, ev: _Decoded | None, detail: str) -> None:
        txn = ev.txn if ev is not None else None
        self.violate(v, rec, txn, detail)
        self.out.append(
            OutputRow(
                KIND_REJECT,
                rec.topic,
                rec.partition,
                txn,
                None,
                0,
                None,
                None,
                None,
                raw_value_text(rec.value),
                False,
                rec.offset,
                rec.offset,
                None,
                f"{v}: {detail} (topic={rec.topic} partition={rec.partition} offset={rec.offset})",
            )
        )

    def reject_txn(self, key: str, v: str, rec: SourceRecord, detail: str) -> None:
        """Reject a transaction now: its rows, its END if read, later events as they arrive."""
        self.violate(v, rec, key, detail)
        reason = f"{v}: {detail}"
        pending = self.pop_rows(key)
        ordered = [pending[k] for k in sorted(pending, key=int)]
        self.st["begins"].pop(key, None)
        end = self.unqueue(key)
        self.reject_rows(key, ordered, end, reason)
        # [reason, data events still expected (-1 = unknown until END), since, first offset,
        #  next row_seq, data events rejected]
        expected = -1
        if end is not None and v != RESTARTED:
            expected = end["count"] - len(ordered)
            if expected <= 0:
                return  # all its events are rejected
        self.st["rejected"][key] = [
            reason,
            expected,
            self.now,
            rec.offset,
            len(ordered) + (end is not None),
            len(ordered),
        ]

    def unqueue(self, key: str) -> dict[str, Any] | None:
        """Take a transaction's END out of the queue, if it is there."""
        if key not in self.queued:
            return None
        self.queued.discard(key)
        for i, entry in enumerate(self.ends):
            if entry["key"] == key:
                del self.ends[i]
                return entry
        return None

    def reject_rows(
        self, key: str, rows: list[_Row], end: dict[str, Any] | None, reason: str
    ) -> None:
        # A transaction spans topics, so its first offset is not a key: each reject row is
        # keyed by its own record (topic, partition, offset), unique in the dead-letter table.
        for i, r in enumerate(rows):
            self.out.append(
                OutputRow(
                    KIND_REJECT,
                    r[0],
                    r[1],
                    key,
                    None,
                    i,
                    r[5],
                    r[6],
                    r[4],
                    r[7],
                    False,
                    r[2],
                    r[2],
                    r[8],
                    reason,
                )
            )
        if end is not None:
            self.out.append(
                OutputRow(
                    KIND_REJECT,
                    end["topic"],
                    end["partition"],
                    key,
                    None,
                    len(rows),
                    None,
                    None,
                    None,
                    json.dumps({"status": "END", "id": end["id"]}),
                    True,
                    end["offset"],
                    end["offset"],
                    end["ts"],
                    reason,
                )
            )

    def reject_follow_up(
        self, key: str, rejected: list[Any], rec: SourceRecord, ev: _Decoded
    ) -> None:
        reason = f"{rejected[0]} (later event of rejected transaction {key})"
        is_end = ev.kind == "end"
        self.out.append(
            OutputRow(
                KIND_REJECT,
                rec.topic,
                rec.partition,
                key,
                None,
                rejected[4],
                ev.target[0] if ev.target else None,
                ev.target[1] if ev.target else None,
                ev.op or None,
                ev.row if ev.row is not None else raw_value_text(rec.value),
                is_end,
                rec.offset,
                rec.offset,
                ev.ts,
                reason,
            )
        )
        rejected[4] += 1
        if not is_end:
            rejected[5] += 1
            if rejected[1] > 0:
                rejected[1] -= 1
                if rejected[1] == 0:
                    del self.st["rejected"][key]

    # -- timeouts -------------------------------------------------------------------------

    def check_timeouts(self) -> None:
        limit = self.s.core.txn_timeout_ms
        ends = self.ends
        while ends and self.now - ends[0]["at"] >= limit:
            head = ends.popleft()
            key = head["key"]
            self.queued.discard(key)
            self.left_queue(key)
            restarted = self.by_lsn(key)
            pending = self.pop_rows(key)
            where = (
                f"transaction {head['id']!r} (END at {head['topic']}:{head['partition']}:"
                f"{head['offset']})"
            )
            if restarted:
                # Its END counts only the second write: what is missing is not known.
                v, missing = RESTARTED, -1
                detail = (
                    f"Debezium restarted inside {where}, and in "
                    f"{self.now - head['at']} ms (txn-timeout is "
                    f"{limit} ms) no change was read in both of its writes, so nothing tells "
                    "whether the first write's last changes have all been read: it cannot be "
                    f"rebuilt ({len(pending)} changes read)" + _DEAD_LETTERED
                )
            else:
                v, missing = Violation.TXN_TIMEOUT.value, head["count"] - len(pending)
                detail = (
                    f"END of transaction {head['id']!r} at {head['topic']}:{head['partition']}:"
                    f"{head['offset']} waited {self.now - head['at']} ms for its data events "
                    f"(event_count={head['count']}, received {len(pending)}); txn-timeout is "
                    f"{limit} ms"
                )
            self.violate_at(v, head["topic"], head["partition"], head["offset"], key, detail)
            ordered = [pending[k] for k in sorted(pending, key=int)]
            self.reject_rows(key, ordered, head, f"{v}: {detail}")
            if missing != 0:
                self.st["rejected"][key] = [
                    f"{v}: {detail}",
                    missing,
                    self.now,
                    head["offset"],
                    len(ordered) + 1,
                    len(ordered),
                ]
            # Those behind it waited only for commit order: the complete ones go out now, and
            # only an incomplete one that waited as long is rejected (the loop's next turn).
            self.release_held()
            self.drain()
        for key in [k for k, p in self.st["pending"].items() if self.now - p["since"] >= limit]:
            if key in self.queued:
                continue  # its END is queued: the END's own clock decides
            rows = self.rows(key)
            first = rows[min(rows, key=int)]
            detail = (
                f"data events of transaction {key} waited "
                f"{self.now - self.st['pending'][key]['since']} ms without an END on "
                f"{self.s.transaction_topic}; txn-timeout is {limit} ms"
            )
            self.violate_at(Violation.TXN_TIMEOUT.value, first[0], first[1], first[2], key, detail)
            ordered = [rows[k] for k in sorted(rows, key=int)]
            del self.st["pending"][key]
            self.st["begins"].pop(key, None)
            self.reject_rows(key, ordered, None, f"txn-timeout: {detail}")
            self.st["rejected"][key] = [
                f"txn-timeout: {detail}",
                -1,
                self.now,
                first[2],
                len(ordered),
                len(ordered),
            ]
        self.release_held()
        # Bookkeeping of rejected / dropped transactions is bounded by the same clock.
        for name in ("rejected", "dropping", "rebuilt"):
            table = self.st[name]
            since = {"rejected": 2, "dropping": 1, "rebuilt": 2}[name]
            for key in [k for k, v in table.items() if self.now - v[since] >= 2 * limit]:
                del table[key]

    # -- result ---------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        limit = self.s.core.txn_timeout_ms
        times = [self.ends[0]["at"]] if self.ends else []
        times += [p["since"] for p in self.st["pending"].values()]
        times += [v[2] for v in self.st["rejected"].values()]
        times += [v[1] for v in self.st["dropping"].values()]
        times += [v[2] for v in self.st["rebuilt"].values()]
        if not times:
            return None
        return int(min(times)) + limit

    def finish(self) -> DebeziumStep:
        self.st["ends"] = list(self.ends)
        if self.done:
            self.st["done"] = list(self.done)
        pending = self.st["pending"]
        self.st["open"] = {
            tp: kept
            for tp, keys in self.st["open"].items()
            if (kept := {k: at for k, at in keys.items() if k in pending})
        }
        state = (DEBEZIUM_STATE_VERSION, _dump(self.st))
        return DebeziumStep(self.out, state, self.next_deadline(), self.status())

    def status(self) -> list[OutputRow]:
        """A STATUS row per topic partition read: the oldest transaction it holds events of."""
        rows = []
        for tp in self.st["offsets"]:
            topic, _, partition = tp.rpartition("\x00")
            waiting = self.st["open"].get(tp)
            if not waiting:
                rows.append(status_row(topic, int(partition), None, NONE_OPEN, None))
                continue
            key = min(waiting, key=waiting.__getitem__)
            since = min(self.st["pending"][k]["since"] for k in waiting)
            rows.append(status_row(topic, int(partition), key, waiting[key], since))
        return rows
