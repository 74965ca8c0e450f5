"""The DDL and the verifier against the StarRocks emulator over the MySQL protocol.

Each test works in a database of its own (the DDL's `demo` renamed), so the session's emulator
is shared safely.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demo import ddl as ddl_cli
from demo import verify as verify_cli
from demo.db import ConnectionSettings, connect
from demo.ddl import ORDERS_DDL, apply_file
from demo.invariants import InvariantReport, ViolationKind
from demo.model import COLUMNS, ORDER_ITEMS, ORDERS, TABLES
from demo.truth import GroundTruth
from demo.verify import check_invariants, compare_with_truth, watch
from demo.workload import Workload, WorkloadConfig

pytestmark = pytest.mark.integration


def settings_of(emulator: Any) -> ConnectionSettings:
    return ConnectionSettings(
        host=emulator.host,
        port=emulator.query_port,
        user=emulator.user,
        password=emulator.password,
    )


@pytest.fixture
def database(starrocks_emulator: Any) -> str:
    name = f"demo_{uuid.uuid4().hex[:8]}"
    conn = connect(settings_of(starrocks_emulator))
    try:
        assert apply_file(conn, ORDERS_DDL, name) == 3
        assert apply_file(conn, ORDERS_DDL, name) == 3  # idempotent
    finally:
        conn.close()
    return name


@pytest.fixture
def conn(starrocks_emulator: Any) -> Iterator[Any]:
    c = connect(settings_of(starrocks_emulator))
    yield c
    c.close()


def make_truth(orders: int = 12, seed: int = 5) -> GroundTruth:
    workload = Workload(
        WorkloadConfig(orders=orders, seed=seed, update_ratio=0.3, delete_ratio=0.2),
        clock=lambda: 1_700_000_000_000,
    )
    for _ in workload.transactions():
        pass
    return GroundTruth("demo", workload.final_rows(), workload.counts().to_dict(), {})


def insert_state(conn: Any, database: str, truth: GroundTruth) -> None:
    with conn.cursor() as cur:
        for table in TABLES:
            columns = COLUMNS[table]
            sql = (
                f"INSERT INTO `{database}`.`{table}` ({', '.join(columns)}) "
                f"VALUES ({', '.join(['%s'] * len(columns))})"
            )
            for row in truth.tables[table]:
                cur.execute(sql, [row[c] for c in columns])


def execute(conn: Any, sql: str) -> None:
    with conn.cursor() as cur:
        cur.execute(sql)


def test_consistent_state_passes(conn: Any, database: str, tmp_path: Path) -> None:
    truth = make_truth()
    insert_state(conn, database, truth)
    report = check_invariants(conn, database)
    assert report.ok, report.examples
    assert report.orders == len(truth.tables[ORDERS])
    assert report.items == len(truth.tables[ORDER_ITEMS])
    assert compare_with_truth(conn, truth, database).ok

    truth_path = tmp_path / "truth.json"
    truth.write(truth_path)
    code = verify_cli.main([*cli_args(conn, database), "--truth", str(truth_path)])
    assert code == 0


def cli_args(conn: Any, database: str) -> list[str]:
    return [
        "--host",
        conn.host,
        "--port",
        str(conn.port),
        "--user",
        conn.user.decode() if isinstance(conn.user, bytes) else conn.user,
        "--password",
        conn.password.decode() if isinstance(conn.password, bytes) else conn.password,
        "--database",
        database,
    ]


def test_broken_states_are_counted(
    conn: Any, database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = make_truth()
    insert_state(conn, database, truth)
    items = truth.tables[ORDER_ITEMS]
    by_order: dict[int, list[dict[str, Any]]] = {}
    for item in items:
        by_order.setdefault(item["order_id"], []).append(item)
    multi = [o for o, its in by_order.items() if len(its) >= 2]
    assert len(multi) >= 3, "workload too small for this test"

    # 1. An item row vanishes: its order's count and total no longer match.
    gone = by_order[multi[0]][0]["item_id"]
    execute(conn, f"DELETE FROM `{database}`.`order_items` WHERE item_id = {gone}")
    # 2. An item of another order keeps an old version.
    stale = by_order[multi[1]][1]
    execute(
        conn,
        f"UPDATE `{database}`.`order_items` SET version = {stale['version'] - 1} "
        f"WHERE item_id = {stale['item_id']}",
    )
    # 3. An order vanishes with its items left behind.
    orphaned = multi[2]
    execute(conn, f"DELETE FROM `{database}`.`orders` WHERE order_id = {orphaned}")

    report = check_invariants(conn, database)
    assert report.count(ViolationKind.ITEM_COUNT) == 1
    assert report.count(ViolationKind.TOTAL) == 1
    assert report.count(ViolationKind.VERSION) == 1
    assert report.count(ViolationKind.ORPHAN_ITEM) == len(by_order[orphaned])

    comparison = compare_with_truth(conn, truth, database)
    orders_cmp, items_cmp = comparison.table(ORDERS), comparison.table(ORDER_ITEMS)
    assert (orders_cmp.missing, orders_cmp.extra, orders_cmp.wrong_version) == (1, 0, 0)
    assert (items_cmp.missing, items_cmp.extra, items_cmp.wrong_version) == (1, 0, 1)

    truth_path = tmp_path / "truth.json"
    truth.write(truth_path)
    capsys.readouterr()
    code = verify_cli.main([*cli_args(conn, database), "--truth", str(truth_path), "--json"])
    assert code == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["passed"] is False
    assert summary["final_invariants"]["violations"] == {
        "item_count": 1,
        "total": 1,
        "version": 1,
        "orphan_item": len(by_order[orphaned]),
    }
    assert summary["truth"]["tables"]["order_items"]["missing"] == 1


def test_watch_sees_a_partial_change(conn: Any, database: str, starrocks_emulator: Any) -> None:
    truth = make_truth(orders=6, seed=1)
    insert_state(conn, database, truth)
    quiet = watch(conn, 0.5, interval_s=0.1, database=database)
    assert quiet.ok
    assert quiet.checks >= 2

    # After the second check, a second connection deletes one item (a "partial txn"); the
    # watch stops itself after the next check. Driven by the checks, not by sleeps.
    item = truth.tables[ORDER_ITEMS][0]["item_id"]
    other = connect(settings_of(starrocks_emulator))
    stop = threading.Event()
    seen_reports: list[InvariantReport] = []

    def on_check(report: InvariantReport) -> None:
        seen_reports.append(report)
        if len(seen_reports) == 2:
            execute(other, f"DELETE FROM `{database}`.`order_items` WHERE item_id = {item}")
        elif len(seen_reports) == 4:
            stop.set()

    try:
        seen = watch(
            conn, 60, interval_s=0.05, database=database, stop_event=stop, on_check=on_check
        )
    finally:
        other.close()
    assert [r.ok for r in seen_reports] == [True, True, False, False]
    assert seen.stopped_by == "stop-event"
    assert seen.checks == 4
    assert seen.checks_with_violations == 2
    assert seen.violations[ViolationKind.ITEM_COUNT] == 2
    assert seen.violations[ViolationKind.TOTAL] == 2
    assert not seen.ok


def test_watch_ends_on_stop_file(conn: Any, database: str, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    stop.touch()
    started = time.monotonic()
    report = watch(conn, 30, interval_s=0.1, database=database, stop_file=stop)
    assert time.monotonic() - started < 5
    assert report.stopped_by == "stop-file"
    assert report.checks == 0
    assert not report.ok  # no check ran: nothing was verified


def test_ddl_cli_is_idempotent(starrocks_emulator: Any, conn: Any) -> None:
    args = [*cli_args(conn, "demo_cli"), "--file", str(ORDERS_DDL)]
    assert ddl_cli.main(args) == 0
    assert ddl_cli.main(args) == 0
    report = check_invariants(conn, "demo_cli")
    assert report.ok
    assert (report.orders, report.items) == (0, 0)
