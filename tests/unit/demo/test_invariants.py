"""The verifier's pure invariant logic detects each violation kind on hand-made rows."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from demo.invariants import InvariantRow, ViolationKind, evaluate, rows_from_tables
from demo.model import ORDER_ITEMS, ORDERS, Tables

pytestmark = pytest.mark.unit


def order(
    order_id: int, count: int, total: object, version: int
) -> tuple[bool, Any, Any, Any, Any]:
    return (False, order_id, count, total, version)


def consistent_rows() -> list[InvariantRow]:
    return [
        InvariantRow(*order(1, 2, Decimal("30.50"), 3), 10, Decimal("10.25"), 3),
        InvariantRow(*order(1, 2, Decimal("30.50"), 3), 11, Decimal("20.25"), 3),
        InvariantRow(*order(2, 1, Decimal("5.00"), 1), 12, Decimal("5.00"), 1),
    ]


def test_consistent_snapshot_passes() -> None:
    report = evaluate(consistent_rows())
    assert report.ok
    assert (report.orders, report.items, report.violations) == (2, 3, 0)


def test_empty_snapshot_passes() -> None:
    assert evaluate([]).ok


def test_missing_item_is_count_and_total_violation() -> None:
    rows = consistent_rows()[1:]  # item 10 not visible yet
    report = evaluate(rows)
    assert report.count(ViolationKind.ITEM_COUNT) == 1
    assert report.count(ViolationKind.TOTAL) == 1
    assert report.count(ViolationKind.VERSION) == 0
    assert report.violations == 2
    assert {v.order_id for v in report.examples} == {1}


def test_total_mismatch_alone() -> None:
    rows = consistent_rows()
    rows[0] = rows[0]._replace(amount=Decimal("10.26"))
    report = evaluate(rows)
    assert report.counts == {ViolationKind.TOTAL: 1}


def test_total_is_exact_not_float() -> None:
    # 0.1 + 0.2 != 0.3 in binary floats; the check must use Decimal arithmetic.
    rows = [
        InvariantRow(*order(1, 2, "0.30", 1), 1, 0.1, 1),
        InvariantRow(*order(1, 2, "0.30", 1), 2, 0.2, 1),
    ]
    assert evaluate(rows).ok


def test_version_mismatch_counted_once_per_order() -> None:
    rows = consistent_rows()
    rows[0] = rows[0]._replace(item_version=2)
    rows[1] = rows[1]._replace(item_version=2)
    report = evaluate(rows)
    assert report.counts == {ViolationKind.VERSION: 1}
    assert report.examples[0].item_id == 10


def test_orphan_items_counted_per_item() -> None:
    rows = [
        *consistent_rows(),
        InvariantRow(True, 7, None, None, None, 20, Decimal("1.00"), 4),
        InvariantRow(True, 7, None, None, None, 21, Decimal("2.00"), 4),
    ]
    report = evaluate(rows)
    assert report.counts == {ViolationKind.ORPHAN_ITEM: 2}
    assert report.items == 5


def test_order_without_items_row() -> None:
    # LEFT JOIN gives one row with NULL item columns.
    rows = [InvariantRow(*order(5, 2, Decimal("3.00"), 1), None, None, None)]
    report = evaluate(rows)
    assert report.count(ViolationKind.ITEM_COUNT) == 1
    assert report.count(ViolationKind.TOTAL) == 1
    assert evaluate([InvariantRow(*order(5, 0, Decimal("0.00"), 1), None, None, None)]).ok


def test_values_as_driver_types() -> None:
    """Drivers may hand back str, float or Decimal; the verdict must not depend on it."""
    rows = [
        InvariantRow(0, "1", "2", "30.5", "3", "10", "10.25", "3"),  # type: ignore[arg-type]
        InvariantRow(0, 1, 2, 30.5, 3, 11, 20.25, 3),  # type: ignore[arg-type]
    ]
    assert evaluate(rows).ok


def test_every_kind_at_once_and_to_dict() -> None:
    rows = [
        InvariantRow(*order(1, 3, Decimal("9.00"), 2), 1, Decimal("4.00"), 1),
        InvariantRow(True, 9, None, None, None, 99, Decimal("1.00"), 1),
    ]
    report = evaluate(rows)
    assert {k: report.count(k) for k in ViolationKind} == {
        ViolationKind.ITEM_COUNT: 1,
        ViolationKind.TOTAL: 1,
        ViolationKind.VERSION: 1,
        ViolationKind.ORPHAN_ITEM: 1,
    }
    summary = report.to_dict()
    assert summary["ok"] is False
    assert summary["violations"] == {"item_count": 1, "total": 1, "version": 1, "orphan_item": 1}


def test_rows_from_tables_matches_query_shape() -> None:
    tables = Tables.from_rows(
        {
            ORDERS: [
                {"order_id": 1, "item_count": 1, "total_amount": Decimal("2.00"), "version": 1},
                {"order_id": 2, "item_count": 0, "total_amount": Decimal("0.00"), "version": 1},
            ],
            ORDER_ITEMS: [
                {"item_id": 5, "order_id": 1, "amount": Decimal("2.00"), "version": 1},
                {"item_id": 6, "order_id": 3, "amount": Decimal("2.00"), "version": 1},
            ],
        }
    )
    rows = sorted(rows_from_tables(tables), key=lambda r: (r.orphan, r.order_id))
    assert rows == [
        InvariantRow(False, 1, 1, Decimal("2.00"), 1, 5, Decimal("2.00"), 1),
        InvariantRow(False, 2, 0, Decimal("0.00"), 1, None, None, None),
        InvariantRow(True, 3, None, None, None, 6, Decimal("2.00"), 1),
    ]
    assert evaluate(rows).counts == {ViolationKind.ORPHAN_ITEM: 1}
