"""The emulator's SQLite storage: WAL checkpoints run beside the commits, not inside them."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from devstack.starrocks.catalog import parse_create_table
from devstack.starrocks.storage import OP_UPSERT, Storage

pytestmark = pytest.mark.unit

DDL = "CREATE TABLE d.t (id BIGINT NOT NULL, v VARCHAR(200)) PRIMARY KEY(id)"


def test_commits_leave_checkpoints_to_a_thread_that_copies_them(tmp_path: Path) -> None:
    storage = Storage(tmp_path)
    try:
        storage.create_database("d", False)
        storage.create_table(parse_create_table(DDL), "d", DDL)
        schema = storage.tables[("d", "t")]
        # The writer never checkpoints on its own: a commit does not wait for one.
        assert storage._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
        before = storage.path.stat().st_size
        rows = [(OP_UPSERT, (i, "x" * 150)) for i in range(20_000)]  # ~4 MB: past 1,000 pages
        storage.commit_rows([(schema, rows)])
        deadline = time.monotonic() + 10
        while storage.path.stat().st_size <= before + 2_000_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert storage.path.stat().st_size > before + 2_000_000  # the rows reached the file
    finally:
        storage.close()
    assert not storage._checkpoints._thread.is_alive()
    reader = sqlite3.connect(storage.path)
    try:
        assert reader.execute('SELECT COUNT(*) FROM "d.t"').fetchone() == (20_000,)
    finally:
        reader.close()
