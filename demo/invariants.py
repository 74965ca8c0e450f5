"""The demo invariants, evaluated in pure Python over the rows of one snapshot.

The verifier reads one result set per check (a single SELECT, so a single snapshot) and hands
its rows here; the unit tests build the same rows from in-memory tables. Keeping the logic free
of SQL means it is tested on hand-made rows, and the generator's own tests use exactly the code
that judges the sink.

Violation kinds, and what is counted once:

- ``item_count``: per order, the number of its items differs from ``item_count``;
- ``total``: per order, ``sum(amount)`` of its items differs from ``total_amount`` (exact
  Decimal arithmetic);
- ``version``: per order, at least one of its items has another ``version``;
- ``orphan_item``: per item whose order does not exist.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, NamedTuple

from demo.model import ORDER_ITEMS, ORDERS, Tables, to_decimal, to_int

#: How many example violations a report keeps (counts are always complete).
MAX_EXAMPLES = 20


class ViolationKind(StrEnum):
    """What a partial (or wrong) transaction left behind."""

    ITEM_COUNT = "item_count"
    TOTAL = "total"
    VERSION = "version"
    ORPHAN_ITEM = "orphan_item"


class InvariantRow(NamedTuple):
    """One row of the invariant query.

    ``orphan`` rows describe an item without an order (order columns are ``None``); the other
    rows are an order joined with one of its items, or with ``None`` item columns when the order
    has no items.
    """

    orphan: bool
    order_id: Any
    item_count: Any
    total_amount: Any
    version: Any
    item_id: Any
    amount: Any
    item_version: Any


@dataclass(frozen=True)
class Violation:
    """One broken invariant: which kind, where, and the values that disagree."""

    kind: ViolationKind
    order_id: int
    item_id: int | None
    detail: str

    def __str__(self) -> str:
        item = f" item_id={self.item_id}" if self.item_id is not None else ""
        return f"{self.kind.value}: order_id={self.order_id}{item}: {self.detail}"


@dataclass(frozen=True)
class InvariantReport:
    """The outcome of one invariant check over one snapshot."""

    orders: int
    items: int
    counts: Mapping[ViolationKind, int] = field(default_factory=dict)
    examples: tuple[Violation, ...] = ()

    @property
    def violations(self) -> int:
        """Total number of violations of every kind."""
        return sum(self.counts.values())

    @property
    def ok(self) -> bool:
        """True when no invariant is broken."""
        return self.violations == 0

    def count(self, kind: ViolationKind) -> int:
        """Number of violations of one kind."""
        return self.counts.get(kind, 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "ok": self.ok,
            "orders": self.orders,
            "items": self.items,
            "violations": {kind.value: self.count(kind) for kind in ViolationKind},
            "examples": [
                {
                    "kind": v.kind.value,
                    "order_id": v.order_id,
                    "item_id": v.item_id,
                    "detail": v.detail,
                }
                for v in self.examples
            ],
        }


@dataclass
class _OrderAgg:
    item_count: int
    total_amount: Decimal
    version: int
    items: dict[int, tuple[Decimal, int]] = field(default_factory=dict)


def evaluate(rows: Iterable[InvariantRow]) -> InvariantReport:
    """Check every invariant over the rows of one snapshot."""
    orders: dict[int, _OrderAgg] = {}
    violations: list[Violation] = []
    counts: Counter[ViolationKind] = Counter()
    items_seen: set[int] = set()

    def record(violation: Violation) -> None:
        counts[violation.kind] += 1
        if len(violations) < MAX_EXAMPLES:
            violations.append(violation)

    for row in rows:
        if row.orphan:
            item_id = to_int(row.item_id)
            items_seen.add(item_id)
            record(
                Violation(
                    ViolationKind.ORPHAN_ITEM,
                    to_int(row.order_id),
                    item_id,
                    "item without its order",
                )
            )
            continue
        order_id = to_int(row.order_id)
        agg = orders.get(order_id)
        if agg is None:
            agg = _OrderAgg(
                to_int(row.item_count), to_decimal(row.total_amount), to_int(row.version)
            )
            orders[order_id] = agg
        if row.item_id is not None:
            item_id = to_int(row.item_id)
            items_seen.add(item_id)
            agg.items[item_id] = (to_decimal(row.amount), to_int(row.item_version))

    for order_id in sorted(orders):
        agg = orders[order_id]
        if len(agg.items) != agg.item_count:
            record(
                Violation(
                    ViolationKind.ITEM_COUNT,
                    order_id,
                    None,
                    f"item_count={agg.item_count} but {len(agg.items)} items",
                )
            )
        total = sum((amount for amount, _ in agg.items.values()), Decimal(0))
        if total != agg.total_amount:
            record(
                Violation(
                    ViolationKind.TOTAL,
                    order_id,
                    None,
                    f"total_amount={agg.total_amount} but items sum to {total}",
                )
            )
        stale = sorted(i for i, (_, version) in agg.items.items() if version != agg.version)
        if stale:
            record(
                Violation(
                    ViolationKind.VERSION,
                    order_id,
                    stale[0],
                    f"order version={agg.version} but {len(stale)} item(s) differ "
                    f"(first item_id={stale[0]} version={agg.items[stale[0]][1]})",
                )
            )
    return InvariantReport(
        orders=len(orders), items=len(items_seen), counts=dict(counts), examples=tuple(violations)
    )


def rows_from_tables(tables: Tables) -> list[InvariantRow]:
    """The invariant query's result computed over in-memory tables (for tests and self-checks)."""
    orders = tables.rows[ORDERS]
    by_order: dict[int, list[dict[str, Any]]] = {}
    result: list[InvariantRow] = []
    for item in tables.rows[ORDER_ITEMS].values():
        order_id = to_int(item["order_id"])
        if order_id in orders:
            by_order.setdefault(order_id, []).append(item)
        else:
            result.append(
                InvariantRow(
                    True,
                    order_id,
                    None,
                    None,
                    None,
                    item["item_id"],
                    item["amount"],
                    item["version"],
                )
            )
    for order_id, order in orders.items():
        head = (False, order_id, order["item_count"], order["total_amount"], order["version"])
        items = by_order.get(order_id, [])
        if not items:
            result.append(InvariantRow(*head, None, None, None))
        for item in items:
            result.append(InvariantRow(*head, item["item_id"], item["amount"], item["version"]))
    return result
