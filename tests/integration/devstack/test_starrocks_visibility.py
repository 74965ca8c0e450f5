"""Atomic visibility: one SELECT never sees part of a multi-table commit, or any uncommitted row."""

from __future__ import annotations

import threading

import pytest

from devstack.starrocks.launcher import EmulatorHandle
from tests.integration.devstack.srclient import TxnClient

pytestmark = pytest.mark.integration


def test_reader_never_sees_partial_multi_table_commit(c: TxnClient, emu: EmulatorHandle) -> None:
    db = c.db
    stop = threading.Event()
    seen: list[tuple[int, int, int]] = []
    errors: list[str] = []

    def reader() -> None:
        conn = emu.connect()
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute(
                        f"SELECT (SELECT COUNT(*) FROM {db}.t1), (SELECT COUNT(*) FROM {db}.t2), "
                        f"(SELECT COUNT(*) FROM {db}.t1 a JOIN {db}.t2 b ON a.id = b.ref)"
                    )
                    row = cur.fetchone()
                    n1, n2, nj = int(row[0]), int(row[1]), int(row[2])
                    seen.append((n1, n2, nj))
                    if not (n1 == n2 == nj):
                        errors.append(f"partial state {n1} {n2} {nj}")
        finally:
            conn.close()

    t = threading.Thread(target=reader)
    t.start()
    try:
        per_txn = 300
        for i in range(12):
            label = f"vis{i}"
            assert c.call("begin", label, multi=True, timeout="60").status == "OK"
            ids = range(i * per_txn, (i + 1) * per_txn)
            assert (
                c.load(label, "t1", [{"id": k, "v": "x"} for k in ids], multi=True).status == "OK"
            )
            assert (
                c.load(label, "t2", [{"id": k, "ref": k} for k in ids], multi=True).status == "OK"
            )
            if i % 4 == 3:
                assert c.call("rollback", label, multi=True).status == "OK"
            else:
                assert c.call("commit", label, multi=True).status == "OK"
    finally:
        stop.set()
        t.join()
    assert not errors, errors[:3]
    assert len(seen) >= 3, seen
    assert {s[0] % 300 for s in seen} == {0}, seen
    # Rolled-back txns (every 4th) never show up.
    n = 9 * 300
    assert emu.sql(f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {db}.t1") == [(n, n)]


def test_uncommitted_and_prepared_rows_invisible(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "u", table="t1").status == "OK"
    assert c.load("u", "t1", [{"id": 1}]).status == "OK"
    assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t1") == [(0,)]
    assert c.call("prepare", "u").status == "OK"
    assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t1") == [(0,)]
    assert c.call("commit", "u").status == "OK"
    assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t1") == [(1,)]
