"""The orders workload as pure data: a deterministic sequence of CDC transactions.

No Kafka here: :class:`Workload` yields :class:`Transaction` objects (events plus the partition
they go to) and keeps the source database's state, from which the ground truth is taken.
:mod:`demo.generate` sends them.

Guarantees, at every transaction boundary (tested by replaying the events):

- an order's ``item_count`` is the number of its items, ``total_amount`` is the exact Decimal
  sum of their ``amount`` (``quantity * price``), and every item has the order's ``version``;
- no item exists without its order;
- an order and all its items are changed by one transaction, in one partition:
  :func:`partition_for` of the order id, because ordering holds only within a partition.

For a given :class:`WorkloadConfig` the sequence is the same on every run and every machine,
except the timestamps, which come from the injected clock.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

from assembler.events import Event, EventType
from demo.errors import DemoConfigError
from demo.model import CENT, ORDER_ITEMS, ORDERS, TABLES, Row, check_identifier, encode_row

Clock = Callable[[], int]

_PRODUCTS = (
    "anchor bolt",
    "bearing",
    "cable tie",
    "drill bit",
    "end mill",
    "fuse",
    "gasket",
    "hinge",
    "insulator",
    "jack screw",
    "knurled nut",
    "lock washer",
)
_STATUSES = ("PAID", "PACKED", "SHIPPED", "DELIVERED", "RETURNED")


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the events' ``source_ts_ms`` (visibility latency)."""
    return time.time_ns() // 1_000_000


def partition_for(order_id: int, partitions: int) -> int:
    """The partition of every event about ``order_id``.

    CRC-32 of the decimal key text: stable across processes and Python versions (unlike
    ``hash()`` of a str) and cheap. The Kafka key is the same text, so a consumer can recompute it.
    """
    return zlib.crc32(str(order_id).encode()) % partitions


def key_for(order_id: int) -> bytes:
    """The Kafka record key of every event about ``order_id``."""
    return str(order_id).encode()


class TxnKind(StrEnum):
    """What a transaction does to one order."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True)
class WorkloadConfig:
    """What to generate.

    Attributes:
        orders: number of orders created; updates and deletes are interleaved on top.
        partitions: Kafka partitions the transactions are spread over.
        seed: the random seed; the same seed gives the same transactions.
        max_items: items per order, 1..max_items.
        update_ratio: probability that a step updates a live order (new version).
        delete_ratio: probability that a step deletes a live order with its items.
        database: the ``database`` of every DATA event.
        txn_prefix: txn ids are ``{txn_prefix}{seed}-{sequence}``.
    """

    orders: int
    partitions: int = 1
    seed: int = 0
    max_items: int = 5
    update_ratio: float = 0.3
    delete_ratio: float = 0.1
    database: str = "demo"
    txn_prefix: str = "demo-s"

    def __post_init__(self) -> None:
        """Fail fast, naming the option."""
        if self.orders < 0:
            msg = f"orders must be >= 0, got {self.orders}"
            raise DemoConfigError(msg)
        if self.partitions < 1:
            msg = f"partitions must be >= 1, got {self.partitions}"
            raise DemoConfigError(msg)
        if self.max_items < 1:
            msg = f"max-items must be >= 1, got {self.max_items}"
            raise DemoConfigError(msg)
        if not (0 <= self.update_ratio <= 1 and 0 <= self.delete_ratio <= 1):
            msg = "update-ratio and delete-ratio must be within [0, 1]"
            raise DemoConfigError(msg)
        if self.update_ratio + self.delete_ratio >= 1:
            msg = (
                f"update-ratio + delete-ratio must be < 1 (got {self.update_ratio} + "
                f"{self.delete_ratio}), or no order would ever be created"
            )
            raise DemoConfigError(msg)
        check_identifier(self.database)


@dataclass(frozen=True)
class Transaction:
    """One source transaction: its events in order and where they go."""

    txn_id: str
    seq: int
    kind: TxnKind
    order_id: int
    partition: int
    key: bytes
    source_ts_ms: int
    events: tuple[Event, ...]

    @property
    def data_events(self) -> int:
        """Number of DATA events (the TXN_END ``event_count``)."""
        return len(self.events) - 2


@dataclass
class _Item:
    item_id: int
    product_name: str
    quantity: int
    price: Decimal


@dataclass
class _Order:
    order_id: int
    customer_id: int
    status: str
    version: int
    updated_ts_ms: int
    items: dict[int, _Item] = field(default_factory=dict)

    def row(self) -> Row:
        items = self.items.values()
        return {
            "order_id": self.order_id,
            "customer_id": self.customer_id,
            "item_count": len(self.items),
            "total_amount": sum((i.quantity * i.price for i in items), Decimal("0.00")),
            "version": self.version,
            "order_status": self.status,
            "updated_ts_ms": self.updated_ts_ms,
        }

    def item_row(self, item: _Item) -> Row:
        return {
            "item_id": item.item_id,
            "order_id": self.order_id,
            "product_name": item.product_name,
            "quantity": item.quantity,
            "price": item.price,
            "amount": item.quantity * item.price,
            "version": self.version,
        }


@dataclass(frozen=True)
class WorkloadCounts:
    """What a workload produced so far (the counts part of the ground truth)."""

    transactions: int
    events: int
    txns_by_kind: Mapping[str, int]
    data_events: Mapping[str, Mapping[str, int]]
    rows: Mapping[str, int]

    @property
    def data_rows(self) -> int:
        """DATA events of every table and op: the rows a sink loads, each exactly once."""
        return sum(sum(ops.values()) for ops in self.data_events.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "transactions": self.transactions,
            "events": self.events,
            "txns_by_kind": dict(self.txns_by_kind),
            "data_events": {t: dict(ops) for t, ops in self.data_events.items()},
            "rows": dict(self.rows),
        }


class Workload:
    """A deterministic stream of order transactions over an in-memory source database.

    Iterate :meth:`transactions` once; the state (:meth:`final_rows`, :meth:`counts`) reflects
    every transaction yielded so far, so it is the ground truth once iteration ends.
    """

    def __init__(self, config: WorkloadConfig, clock: Clock = wall_clock_ms) -> None:
        self.config = config
        self._clock = clock
        self._rng = random.Random(config.seed)  # noqa: S311 -- reproducible test data, not secrets
        self._orders: dict[int, _Order] = {}
        # Live order ids in a list, so a random pick is deterministic and O(1).
        self._live: list[int] = []
        self._live_pos: dict[int, int] = {}
        self._next_item_id = 1
        self._seq = 0
        self._events = 0
        self._by_kind: dict[str, int] = {k.value: 0 for k in TxnKind}
        self._data: dict[str, dict[str, int]] = {t: {"UPSERT": 0, "DELETE": 0} for t in TABLES}

    def transactions(self) -> Iterator[Transaction]:
        """Yield transactions until ``config.orders`` orders have been created.

        Each step deletes a live order with probability ``delete_ratio``, updates one with
        ``update_ratio``, and creates a new order otherwise (always, while none is live).
        """
        created = 0
        cfg = self.config
        while created < cfg.orders:
            draw = self._rng.random()
            if self._live and draw < cfg.delete_ratio:
                yield self._delete(self._pick())
            elif self._live and draw < cfg.delete_ratio + cfg.update_ratio:
                yield self._update(self._pick())
            else:
                created += 1
                yield self._create(created)

    def final_rows(self) -> dict[str, list[Row]]:
        """Every live row of both tables, sorted by key: the state a correct sink ends in."""
        orders = [self._orders[i] for i in sorted(self._orders)]
        items = sorted(
            (o.item_row(item) for o in orders for item in o.items.values()),
            key=lambda r: int(r["item_id"]),
        )
        return {ORDERS: [o.row() for o in orders], ORDER_ITEMS: items}

    def counts(self) -> WorkloadCounts:
        """Counts of transactions, events and live rows so far."""
        return WorkloadCounts(
            transactions=self._seq,
            events=self._events,
            txns_by_kind=dict(self._by_kind),
            data_events={t: dict(ops) for t, ops in self._data.items()},
            rows={
                ORDERS: len(self._orders),
                ORDER_ITEMS: sum(len(o.items) for o in self._orders.values()),
            },
        )

    # -- steps ------------------------------------------------------------------------------

    def _pick(self) -> _Order:
        return self._orders[self._live[self._rng.randrange(len(self._live))]]

    def _new_item(self) -> _Item:
        item = _Item(
            item_id=self._next_item_id,
            product_name=self._rng.choice(_PRODUCTS),
            quantity=self._rng.randint(1, 10),
            price=self._price(),
        )
        self._next_item_id += 1
        return item

    def _price(self) -> Decimal:
        return (Decimal(self._rng.randint(50, 50_000)) * CENT).quantize(CENT)

    def _create(self, order_id: int) -> Transaction:
        ts = self._clock()
        order = _Order(
            order_id=order_id,
            customer_id=self._rng.randint(1, 1_000),
            status="NEW",
            version=1,
            updated_ts_ms=ts,
        )
        for _ in range(self._rng.randint(1, self.config.max_items)):
            item = self._new_item()
            order.items[item.item_id] = item
        self._orders[order_id] = order
        self._live_pos[order_id] = len(self._live)
        self._live.append(order_id)
        changes = [(ORDERS, "UPSERT", order.row())]
        changes += [(ORDER_ITEMS, "UPSERT", order.item_row(i)) for i in order.items.values()]
        return self._transaction(TxnKind.CREATE, order, ts, changes)

    def _update(self, order: _Order) -> Transaction:
        ts = self._clock()
        rng = self._rng
        removed = [i for i in order.items.values() if rng.random() < 0.25]
        if len(removed) == len(order.items):
            removed = removed[1:]  # keep at least one item
        for item in removed:
            del order.items[item.item_id]
        for item in order.items.values():
            if rng.random() < 0.5:
                item.quantity = rng.randint(1, 10)
            if rng.random() < 0.5:
                item.price = self._price()
        for _ in range(rng.randint(0, self.config.max_items - len(order.items))):
            item = self._new_item()
            order.items[item.item_id] = item
        order.version += 1
        order.status = rng.choice(_STATUSES)
        order.updated_ts_ms = ts
        # Every remaining item is rewritten: it carries the order's new version.
        changes = [(ORDERS, "UPSERT", order.row())]
        changes += [(ORDER_ITEMS, "UPSERT", order.item_row(i)) for i in order.items.values()]
        changes += [(ORDER_ITEMS, "DELETE", {"item_id": i.item_id}) for i in removed]
        return self._transaction(TxnKind.UPDATE, order, ts, changes)

    def _delete(self, order: _Order) -> Transaction:
        ts = self._clock()
        del self._orders[order.order_id]
        pos = self._live_pos.pop(order.order_id)
        last = self._live.pop()
        if last != order.order_id:
            self._live[pos] = last
            self._live_pos[last] = pos
        # Children first, as a source database with a foreign key would log them.
        changes: list[tuple[str, str, Row]] = [
            (ORDER_ITEMS, "DELETE", {"item_id": i}) for i in order.items
        ]
        changes.append((ORDERS, "DELETE", {"order_id": order.order_id}))
        return self._transaction(TxnKind.DELETE, order, ts, changes)

    def _transaction(
        self, kind: TxnKind, order: _Order, ts: int, changes: list[tuple[str, str, Row]]
    ) -> Transaction:
        self._seq += 1
        txn_id = f"{self.config.txn_prefix}{self.config.seed}-{self._seq:08d}"
        db = self.config.database
        events = [_event(txn_id, EventType.TXN_BEGIN.value, ts)]
        for table, op, row in changes:
            events.append(
                Event(
                    txn_id=txn_id,
                    type=EventType.DATA.value,
                    database=db,
                    table=table,
                    op=op,
                    row=encode_row(row),
                    source_ts_ms=ts,
                    event_count=None,
                )
            )
            self._data[table][op] += 1
        events.append(_event(txn_id, EventType.TXN_END.value, ts, event_count=len(changes)))
        self._events += len(events)
        self._by_kind[kind.value] += 1
        return Transaction(
            txn_id=txn_id,
            seq=self._seq,
            kind=kind,
            order_id=order.order_id,
            partition=partition_for(order.order_id, self.config.partitions),
            key=key_for(order.order_id),
            source_ts_ms=ts,
            events=tuple(events),
        )


def _event(txn_id: str, type_: str, ts: int, event_count: int | None = None) -> Event:
    return Event(
        txn_id=txn_id,
        type=type_,
        database=None,
        table=None,
        op=None,
        row=None,
        source_ts_ms=ts,
        event_count=event_count,
    )
