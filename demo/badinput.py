"""Bad source transactions for fault injection: one kind per producer-caused violation.

Each :class:`BadInputKind` builds source transactions that the assembler (``assembler/``,
``docs/assembler.md``) must reject under the ``reject`` policy, for one named reason, and
nothing else. The shapes are chosen so that the assembler's state is IDLE again right after
each bad transaction, whatever good transaction follows on the partition:

================== ========================================================= ===========
kind               records (in one partition, contiguous)                    rejected
================== ========================================================= ===========
undecodable        BEGIN, DATA x a, <bytes no codec decodes>, DATA x b, END  all
unknown-type       BEGIN, DATA x a, <type TXN_COMMIT>, DATA x b, END         all
no-begin           DATA x a (a >= 1), END                                    all
txn-id-mismatch    BEGIN(X), DATA(X) x a, DATA(Y), DATA(X) x b, END(X)       all
begin-while-open   BEGIN(X), DATA(X) x a, BEGIN(Z), END(Z, event_count=0)    BEGIN(X) + a
event-count-mis.   BEGIN, DATA x a, END(event_count = a + 1)                 all
txn-too-large      BEGIN, DATA x (max-txn-rows + 1 + c), END                 all
txn-timeout        BEGIN, DATA x a, and never an END (the partition's last)  all
unknown-table      BEGIN, DATA x a, DELETE from _cdc_dead_letter, DATA x b,  all
                   END (an event may not touch the sink's own tables)
================== ========================================================= ===========

``begin-while-open``: the assembler rejects the open transaction X and starts Z normally; Z is
an empty transaction (BEGIN, END), which emits nothing and consumes no ``txn_seq``, so the
second BEGIN is accepted without making any row visible. Every rejected transaction is one
group of dead-letter rows with the same ``(topic, partition, first_offset)``, where the first
offset is that of the transaction's first record (BEGIN, or the first DATA for ``no-begin``).

Bad transactions change orders and items in their own id range (:data:`BAD_ID_BASE` and up),
disjoint from the workload's, and draw from their own random stream, so the good transactions
and the ground truth are the same with or without injection.

``txn-timeout`` transactions never end, so the assembler rejects them once the pipeline's
``txn-timeout`` (processing time) has passed since their BEGIN was applied; the partition then
stays REJECTING for that txn id. They come after everything else, at most one per partition
(any later BEGIN on the partition would make it a ``begin-while-open`` instead). An END sent
late would not do: a pipeline that was down during the gap reads BEGIN and END in one batch
and commits the transaction.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any, Final

from assembler.codecs import Encoding, encode_event
from assembler.events import Event, EventType
from demo.errors import DemoConfigError
from demo.model import CENT, ORDER_ITEMS, ORDERS, Row, encode_row
from demo.workload import Transaction, key_for, partition_for

#: First order id and item id of bad transactions; the workload counts from 1 and never
#: gets near it.
BAD_ID_BASE: Final = 9_000_000_000_000

#: A record value that neither JSON (invalid UTF-8), plain Avro (a string length beyond the
#: value) nor the Confluent frame (magic byte not 0) decodes.
UNDECODABLE_VALUE: Final = b"\xff\xfe\xfd not a CDC event"

#: The position (see :func:`build`) of transactions sent after every good one.
AFTER_ALL: Final = 2**63 - 1

#: The ``type`` of the ``unknown-type`` record.
UNKNOWN_TYPE: Final = "TXN_COMMIT"

_BEGIN = EventType.TXN_BEGIN.value
_DATA = EventType.DATA.value
_END = EventType.TXN_END.value


class BadInputKind(StrEnum):
    """Kinds of bad source transactions; values are the assembler's violation names."""

    UNDECODABLE = "undecodable"
    UNKNOWN_TYPE = "unknown-type"
    NO_BEGIN = "no-begin"
    TXN_ID_MISMATCH = "txn-id-mismatch"
    BEGIN_WHILE_OPEN = "begin-while-open"
    EVENT_COUNT_MISMATCH = "event-count-mismatch"
    TXN_TOO_LARGE = "txn-too-large"
    TXN_TIMEOUT = "txn-timeout"
    UNKNOWN_TABLE = "unknown-table"


Record = Event | bytes
"""A record to send: an event to encode, or raw bytes sent as they are."""


@dataclass(frozen=True)
class BadTransaction:
    """One bad source transaction and what the assembler must dead-letter of it.

    Attributes:
        kind: the violation it causes.
        txn_id: the rejected transaction's id (the ``txn_id`` of its dead-letter rows).
        seq: 1, 2, ... over all bad transactions of a run.
        partition: where every record goes; ``key`` is the order id text, and
            ``partition == partition_for(order_id, partitions)`` as for good transactions.
        records: in send order.
        rejected_records: how many records (from the first) become dead-letter rows.
    """

    kind: BadInputKind
    txn_id: str
    seq: int
    order_id: int
    partition: int
    key: bytes
    records: tuple[Record, ...]
    rejected_records: int


def encode_record(record: Record, encoding: Encoding, *, schema_id: int = 1) -> bytes:
    """The Kafka value of ``record``: raw bytes as they are, events encoded."""
    if isinstance(record, bytes):
        return record
    return encode_event(record, encoding, schema_id=schema_id)


def parse_bad_input(spec: str) -> tuple[BadInputKind, int]:
    """Parse ``KIND[:N]`` (N defaults to 1), as given to ``--bad-input``.

    Raises:
        DemoConfigError: an unknown kind or a count that is not a positive integer.
    """
    name, _, count = spec.partition(":")
    try:
        kind = BadInputKind(name.strip().lower())
    except ValueError:
        msg = (
            f"--bad-input {spec!r}: unknown kind {name!r}; "
            f"expected one of {', '.join(k.value for k in BadInputKind)}"
        )
        raise DemoConfigError(msg) from None
    try:
        n = int(count) if count else 1
    except ValueError:
        n = 0
    if n < 1:
        msg = f"--bad-input {spec!r}: the count after ':' must be a positive integer"
        raise DemoConfigError(msg)
    return kind, n


def max_good_txn_rows(max_items: int) -> int:
    """An upper bound of the DATA events of one good workload transaction.

    An update rewrites the order and at most ``max_items`` items and deletes at most
    ``max_items - 1``; a create or delete touches fewer.
    """
    return 2 * max_items


@dataclass(frozen=True)
class BadInputPlan:
    """Which bad transactions to build and where they go.

    Attributes:
        counts: kind -> number of bad transactions.
        partitions: partitions to spread them over (the workload's).
        seed: the run's seed (bad transactions draw from their own stream of it).
        slots: the number of good transactions they are interleaved with (positions are
            drawn from ``0..slots``; a position past the last good transaction means after it).
        database: the ``database`` of DATA events.
        max_txn_rows: the pipeline's ``max-txn-rows``; required for ``txn-too-large``.
        txn_prefix: bad txn ids are ``{txn_prefix}{seed}-bad-{seq}-{kind}``.
    """

    counts: Mapping[BadInputKind, int]
    partitions: int
    seed: int = 0
    slots: int = 0
    database: str = "demo"
    max_txn_rows: int | None = None
    max_items: int = 5
    txn_prefix: str = "demo-s"

    def __post_init__(self) -> None:
        """Fail fast, naming the option."""
        for kind, n in self.counts.items():
            if n < 0:
                msg = f"bad-input count of {kind.value} must be >= 0, got {n}"
                raise DemoConfigError(msg)
        timeouts = self.counts.get(BadInputKind.TXN_TIMEOUT, 0)
        if timeouts > self.partitions:
            msg = (
                f"--bad-input txn-timeout:{timeouts}: at most one per partition "
                f"({self.partitions}), since each must be its partition's last transaction"
            )
            raise DemoConfigError(msg)
        if self.counts.get(BadInputKind.TXN_TOO_LARGE, 0) > 0:
            if self.max_txn_rows is None:
                msg = "--bad-input txn-too-large needs --max-txn-rows (the pipeline's limit)"
                raise DemoConfigError(msg)
            bound = max_good_txn_rows(self.max_items)
            if self.max_txn_rows < bound:
                msg = (
                    f"--max-txn-rows {self.max_txn_rows} is below {bound}, the size a good "
                    f"transaction can reach with --max-items {self.max_items}: good "
                    "transactions would be rejected too"
                )
                raise DemoConfigError(msg)

    @property
    def total(self) -> int:
        """Number of bad transactions."""
        return sum(self.counts.values())


def build(plan: BadInputPlan, ts_ms: int = 0) -> list[tuple[int, BadTransaction]]:
    """Build the bad transactions of ``plan``, each with its position among good ones.

    Returns ``(position, transaction)`` pairs sorted by position (stable): position ``i`` means
    "sent right before the i-th good transaction (0-based)", or after all of them when there
    are not that many (:data:`AFTER_ALL` always means after all).
    Deterministic for the plan; ``ts_ms`` is every event's ``source_ts_ms``.
    """
    rng = random.Random(f"bad-input/{plan.seed}")  # noqa: S311 -- reproducible test data
    timeout = BadInputKind.TXN_TIMEOUT
    kinds = [k for k in BadInputKind if k is not timeout for _ in range(plan.counts.get(k, 0))]
    rng.shuffle(kinds)
    builder = _Builder(plan, rng, ts_ms)
    placed = [(rng.randint(0, plan.slots), builder.make(kind)) for kind in kinds]
    placed.sort(key=lambda p: p[0])
    # Never-ending transactions last, each on a partition of its own (see the module doc).
    quiet = rng.sample(range(plan.partitions), plan.counts.get(timeout, 0))
    placed += [(AFTER_ALL, builder.make(timeout, partition)) for partition in quiet]
    return placed


class _Builder:
    def __init__(self, plan: BadInputPlan, rng: random.Random, ts_ms: int) -> None:
        self.plan = plan
        self.rng = rng
        self.ts = ts_ms
        self.seq = 0
        self.next_id = BAD_ID_BASE
        self.next_item_id = BAD_ID_BASE

    def make(self, kind: BadInputKind, partition: int | None = None) -> BadTransaction:
        plan, rng = self.plan, self.rng
        self.seq += 1
        if partition is None:
            partition = rng.randrange(plan.partitions)
        order_id = self._order_id(partition)
        txn_id = f"{plan.txn_prefix}{plan.seed}-bad-{self.seq:06d}-{kind.value}"
        a, b = rng.randint(1, 3), rng.randint(0, 2)
        data = self._data(txn_id, order_id, a + b)
        begin, end = self._marker(txn_id, _BEGIN), self._marker(txn_id, _END, len(data))
        records: list[Record]
        rejected: int | None = None
        if kind is BadInputKind.UNDECODABLE:
            records = [begin, *data[:a], UNDECODABLE_VALUE, *data[a:], end]
        elif kind is BadInputKind.UNKNOWN_TYPE:
            odd = Event(txn_id=txn_id, type=UNKNOWN_TYPE, source_ts_ms=self.ts)
            records = [begin, *data[:a], odd, *data[a:], end]
        elif kind is BadInputKind.NO_BEGIN:
            records = [*data, end]
        elif kind is BadInputKind.TXN_ID_MISMATCH:
            other = self._data(f"{txn_id}-other", order_id, 1)
            records = [begin, *data[:a], *other, *data[a:], end]
        elif kind is BadInputKind.BEGIN_WHILE_OPEN:
            next_id = f"{txn_id}-next"
            records = [
                begin,
                *data,
                self._marker(next_id, _BEGIN),
                self._marker(next_id, _END, 0),
            ]
            rejected = 1 + len(data)
        elif kind is BadInputKind.EVENT_COUNT_MISMATCH:
            records = [begin, *data, self._marker(txn_id, _END, len(data) + 1)]
        elif kind is BadInputKind.TXN_TIMEOUT:
            records = [begin, *data]
        elif kind is BadInputKind.UNKNOWN_TABLE:
            # An event that would delete dead letters: only the pipeline may write that table.
            stray = Event(
                txn_id=txn_id,
                type=_DATA,
                database=plan.database,
                table="_cdc_dead_letter",
                op="DELETE",
                row=encode_row({"topic": "orders", "kafka_partition": 0, "first_offset": 0}),
                source_ts_ms=self.ts,
            )
            end = self._marker(txn_id, _END, len(data) + 1)
            records = [begin, *data[:a], stray, *data[a:], end]
        else:
            assert plan.max_txn_rows is not None  # checked by BadInputPlan
            large = self._data(txn_id, order_id, plan.max_txn_rows + 1 + b)
            records = [begin, *large, self._marker(txn_id, _END, len(large))]
        return BadTransaction(
            kind=kind,
            txn_id=txn_id,
            seq=self.seq,
            order_id=order_id,
            partition=partition,
            key=key_for(order_id),
            records=tuple(records),
            rejected_records=len(records) if rejected is None else rejected,
        )

    def _order_id(self, partition: int) -> int:
        """The next unused bad order id whose partition is ``partition``."""
        while partition_for(self.next_id, self.plan.partitions) != partition:
            self.next_id += 1
        order_id = self.next_id
        self.next_id += 1
        return order_id

    def _marker(self, txn_id: str, type_: str, event_count: int | None = None) -> Event:
        return Event(txn_id=txn_id, type=type_, source_ts_ms=self.ts, event_count=event_count)

    def _data(self, txn_id: str, order_id: int, n: int) -> list[Event]:
        """``n`` DATA events: the order, then items; consistent rows, never meant to land."""
        items: list[Row] = []
        count = max(n - 1, 0)
        for i in range(count):
            price = (Decimal(self.rng.randint(50, 50_000)) * CENT).quantize(CENT)
            quantity = self.rng.randint(1, 10)
            items.append(
                {
                    "item_id": self.next_item_id + i,
                    "order_id": order_id,
                    "product_name": "bad input",
                    "quantity": quantity,
                    "price": price,
                    "amount": quantity * price,
                    "version": 1,
                }
            )
        self.next_item_id += count
        order: Row = {
            "order_id": order_id,
            "customer_id": 0,
            "item_count": len(items),
            "total_amount": sum((i["amount"] for i in items), Decimal("0.00")),
            "version": 1,
            "order_status": "BAD",
            "updated_ts_ms": self.ts,
        }
        changes = [(ORDERS, order), *((ORDER_ITEMS, item) for item in items)][:n]
        return [
            Event(
                txn_id=txn_id,
                type=_DATA,
                database=self.plan.database,
                table=table,
                op="UPSERT",
                row=encode_row(row),
                source_ts_ms=self.ts,
            )
            for table, row in changes
        ]


def expected_summary(txns: Iterable[BadTransaction]) -> dict[str, Any]:
    """Per kind: bad transactions and rejected records (the truth's ``expected`` part)."""
    out: dict[str, Any] = {k.value: {"transactions": 0, "records": 0} for k in BadInputKind}
    for t in txns:
        out[t.kind.value]["transactions"] += 1
        out[t.kind.value]["records"] += t.rejected_records
    return out


def interleave(
    good: Iterable[Transaction], bad: Sequence[tuple[int, BadTransaction]]
) -> Iterator[Transaction | BadTransaction]:
    """Good transactions in order, each bad one right before the good one at its position.

    ``bad`` as returned by :func:`build` (sorted by position); those whose position is past the
    last good transaction come at the end. The generator sends exactly this sequence.
    """
    i = 0
    index = -1
    for index, txn in enumerate(good):
        while i < len(bad) and bad[i][0] <= index:
            yield bad[i][1]
            i += 1
        yield txn
    for _, b in bad[i:]:
        yield b
