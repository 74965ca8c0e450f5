"""Truth comparison, verdict, truth file, DDL splitting and the row JSON, without a database."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from demo.ddl import ORDERS_DDL, render, split_statements
from demo.errors import DemoConfigError, TruthFileError
from demo.invariants import InvariantReport, ViolationKind
from demo.model import ORDER_ITEMS, ORDERS, decode_row, encode_row, to_decimal
from demo.truth import GroundTruth
from demo.verify import (
    ComparisonReport,
    Verdict,
    WatchReport,
    compare_table,
    invariant_query,
)
from demo.workload import Workload, WorkloadConfig

pytestmark = pytest.mark.unit


def truth_rows() -> list[dict[str, object]]:
    return [
        {
            "item_id": 1,
            "order_id": 1,
            "quantity": 2,
            "price": "1.50",
            "amount": "3.00",
            "version": 2,
        },
        {
            "item_id": 2,
            "order_id": 1,
            "quantity": 1,
            "price": "4.00",
            "amount": "4.00",
            "version": 2,
        },
        {
            "item_id": 3,
            "order_id": 2,
            "quantity": 1,
            "price": "4.00",
            "amount": "4.00",
            "version": 1,
        },
    ]


def test_identical_tables_compare_ok() -> None:
    actual = [
        {**r, "price": Decimal(str(r["price"])), "amount": float(str(r["amount"]))}
        for r in truth_rows()
    ]
    result = compare_table(ORDER_ITEMS, truth_rows(), actual)
    assert result.ok
    assert (result.expected, result.actual) == (3, 3)


def test_missing_extra_wrong_version_wrong_value_counted() -> None:
    actual = [dict(r) for r in truth_rows()]
    del actual[0]  # missing item 1
    actual[0]["version"] = 1  # item 2: stale version
    actual[1]["quantity"] = 9  # item 3: right version, wrong value
    actual.append({**truth_rows()[0], "item_id": 77})  # extra
    result = compare_table(ORDER_ITEMS, truth_rows(), actual)
    assert (result.missing, result.extra, result.wrong_version, result.wrong_value) == (1, 1, 1, 1)
    assert not result.ok
    assert "missing item_id=1" in result.examples
    assert "extra item_id=77" in result.examples


def test_orders_keyed_by_order_id() -> None:
    want = [
        {"order_id": 1, "customer_id": 5, "item_count": 2, "total_amount": "7.00", "version": 2}
    ]
    have = [{"order_id": 1, "customer_id": 5, "item_count": 2, "total_amount": 7, "version": 3}]
    result = compare_table(ORDERS, want, have)
    assert result.wrong_version == 1
    assert result.missing == result.extra == 0


def test_verdict_pass_and_fail() -> None:
    ok = InvariantReport(orders=1, items=1)
    bad = InvariantReport(orders=1, items=0, counts={ViolationKind.ITEM_COUNT: 1})
    assert Verdict("demo", ok).passed
    assert not Verdict("demo", bad).passed
    watch_bad = WatchReport(
        checks=10,
        checks_with_violations=1,
        violations={ViolationKind.TOTAL: 1},
        failed_checks=0,
        elapsed_s=1.0,
    )
    assert not Verdict("demo", ok, watch=watch_bad).passed
    no_checks = WatchReport(0, 0, {}, failed_checks=5, elapsed_s=1.0)
    assert not Verdict("demo", ok, watch=no_checks).passed
    cmp_bad = ComparisonReport((compare_table(ORDER_ITEMS, truth_rows(), []),))
    verdict = Verdict("demo", ok, watch=None, comparison=cmp_bad)
    assert not verdict.passed
    text = verdict.render()
    assert "VERDICT: FAIL" in text
    assert "order_items" in text
    summary = json.loads(json.dumps(verdict.to_dict()))
    assert summary["passed"] is False
    assert summary["truth"]["tables"]["order_items"]["missing"] == 3
    assert "VERDICT: PASS" in Verdict("demo", ok).render()


def test_invariant_query_is_one_statement_over_both_tables() -> None:
    sql = invariant_query("shop_1")
    assert ";" not in sql
    assert sql.count("SELECT") == 2
    assert "UNION ALL" in sql
    assert "`shop_1`.`orders`" in sql
    assert "`shop_1`.`order_items`" in sql
    with pytest.raises(DemoConfigError):
        invariant_query("x`; DROP TABLE y")


def test_truth_round_trip(tmp_path: Path) -> None:
    workload = Workload(WorkloadConfig(orders=10, seed=4), clock=lambda: 1)
    for _ in workload.transactions():
        pass
    truth = GroundTruth("demo", workload.final_rows(), workload.counts().to_dict(), {"seed": 4})
    path = tmp_path / "truth.json"
    truth.write(path)
    back = GroundTruth.read(path)
    assert back.meta == {"seed": 4}
    assert back.counts == workload.counts().to_dict()
    items = back.tables[ORDER_ITEMS]
    assert isinstance(items[0]["price"], str)  # decimals as exact strings
    for table in (ORDERS, ORDER_ITEMS):
        assert compare_table(table, back.tables[table], workload.final_rows()[table]).ok


def test_truth_rejects_foreign_files(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"format": "something-else"}')
    with pytest.raises(TruthFileError):
        GroundTruth.read(path)
    with pytest.raises(TruthFileError):
        GroundTruth.read(tmp_path / "missing.json")


def test_ddl_file_splits_into_three_idempotent_statements() -> None:
    statements = split_statements(ORDERS_DDL.read_text())
    assert len(statements) == 3
    assert statements[0] == "CREATE DATABASE IF NOT EXISTS `demo`"
    assert all("IF NOT EXISTS" in s for s in statements)
    assert all("PRIMARY KEY" in s and "DISTRIBUTED BY HASH" in s for s in statements[1:])
    renamed = split_statements(render(ORDERS_DDL.read_text(), "t_123"))
    assert "`demo`" not in " ".join(renamed)
    assert "`t_123`.`order_items`" in renamed[2]
    with pytest.raises(DemoConfigError):
        render("", "bad name")


def test_split_ignores_comment_lines() -> None:
    sql = "-- a; comment\nCREATE DATABASE x;\n  -- another;\n\nSELECT 1;"
    assert split_statements(sql) == ["CREATE DATABASE x", "SELECT 1"]


def test_row_json_keeps_decimals_exact() -> None:
    row = {"id": 1, "price": Decimal("12.30"), "name": 'a "b"', "none": None}
    text = encode_row(row)
    assert text == '{"id":1,"price":12.30,"name":"a \\"b\\"","none":null}'
    assert decode_row(text) == row
    assert json.loads(text)["price"] == 12.3


@pytest.mark.parametrize(
    ("value", "expected"),
    [(Decimal("1.10"), "1.10"), ("2.5", "2.5"), (3, "3"), (0.1, "0.1"), (b"4.20", "4.20")],
)
def test_to_decimal(value: object, expected: str) -> None:
    assert to_decimal(value) == Decimal(expected)


def test_to_decimal_rejects_garbage() -> None:
    with pytest.raises(TypeError):
        to_decimal("abc")
    with pytest.raises(TypeError):
        to_decimal(True)


def test_verify_cli_rejects_bad_database_before_connecting() -> None:
    from demo import verify

    assert verify.main(["--port", "1", "--database", "no such db"]) == 2


def test_generate_cli_rejects_bad_ratios() -> None:
    from demo import generate

    args = ["--bootstrap", "127.0.0.1:1", "--topic", "t", "--partitions", "1", "--orders", "1"]
    assert generate.main([*args, "--update-ratio", "0.9", "--delete-ratio", "0.2"]) == 2


def test_render_names_the_rows_of_each_violation() -> None:
    from demo.invariants import Violation

    violation = Violation(ViolationKind.ORPHAN_ITEM, 7, 70, "item without its order")
    report = InvariantReport(1, 1, {ViolationKind.ORPHAN_ITEM: 1}, (violation,))
    text = Verdict("demo", report).render()
    assert "final orphan_item: order_id=7 item_id=70: item without its order" in text
    assert "VERDICT: FAIL" in text
