"""The Debezium demo's workload through a lost connection: it counts what PostgreSQL committed.

Its count of row changes is what the demo holds StarRocks' loaded rows to, so a transaction cut
by PostgreSQL's crash must count if and only if it committed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from devstack.demo_debezium import PG_DDL, Workload
from devstack.postgres import PostgresServer

pytestmark = pytest.mark.integration


@pytest.fixture
def workload(postgres_server: PostgresServer) -> Iterator[Workload]:
    with psycopg.connect(postgres_server.handle.conninfo(), autocommit=True) as conn:
        for statement in PG_DDL:
            conn.execute(statement)
    load = Workload(postgres_server.handle.conninfo(), seed=3)
    load.run(4, rate=1000.0)
    yield load
    load.conn.close()


def _orders(server: PostgresServer) -> list[tuple[int, int]]:
    with psycopg.connect(server.handle.conninfo()) as conn:
        return [(r[0], r[1]) for r in conn.execute("SELECT order_id, version FROM orders")]


def test_a_transaction_cut_by_a_crash_before_its_commit_is_not_counted(
    workload: Workload, postgres_server: PostgresServer
) -> None:
    before = (workload.transactions, workload.row_changes, dict(workload.live))
    restarts: list[threading.Timer] = []

    def crash() -> None:
        postgres_server.kill()
        restarts.append(threading.Timer(0.5, postgres_server.start))
        restarts[-1].start()

    workload.before_commit = crash
    try:
        change = workload.create()
        workload.apply(change)
        assert (workload.cut, workload.cut_committed) == (1, 0)
        assert (workload.transactions, workload.row_changes, workload.live) == before
        assert change.order_id not in dict(_orders(postgres_server))
        workload.apply(workload.create())  # and it goes on, on its new connection
        assert workload.transactions == before[0] + 1
    finally:
        # The workload reconnects once the server accepts, which can be before start()
        # returns: the fixture's stop must see the new handle, or that server outlives the test.
        for restart in restarts:
            restart.join(90)


def test_a_commit_whose_answer_was_lost_is_counted(
    workload: Workload, postgres_server: PostgresServer
) -> None:
    before = (workload.transactions, workload.row_changes)

    def commit_then_lose_the_connection() -> None:
        workload.conn.commit()
        workload.conn.close()

    workload.before_commit = commit_then_lose_the_connection
    change = workload.update()
    workload.apply(change)
    assert (workload.cut, workload.cut_committed) == (1, 1)
    assert workload.transactions == before[0] + 1
    assert workload.row_changes == before[1] + change.rows
    assert (change.order_id, change.version) in _orders(postgres_server)
    assert workload.live[change.order_id][0] == change.version
