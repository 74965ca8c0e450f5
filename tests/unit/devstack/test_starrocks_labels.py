"""The stand-in's labels: global for multi-table tasks, forgotten once expired (§4.3a)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.starrocks.storage import Storage
from devstack.starrocks.txns import TxnManager


@pytest.fixture
def fe(tmp_path: Path) -> Iterator[TxnManager]:
    storage = Storage(tmp_path / "data")
    for db in ("a", "b"):
        storage.create_database(db, if_not_exists=False)
    yield TxnManager(storage, be_address="127.0.0.1:1", label_keep_s=0.05)
    storage.close()


def begin(fe: TxnManager, db: str, label: str) -> str:
    headers = {"db": db, "label": label, "transaction_type": "multi", "timeout": "60"}
    return str(fe.fe_begin(headers).body["Status"])


def rollback(fe: TxnManager, db: str, label: str) -> None:
    headers = {"db": db, "label": label, "transaction_type": "multi"}
    assert fe.fe_rollback(headers).body["Status"] == "OK"


def test_a_multi_table_label_blocks_every_database_among_many_labels(fe: TxnManager) -> None:
    for n in range(200):
        assert begin(fe, "a", f"other-{n}") == "OK"
        rollback(fe, "a", f"other-{n}")
    assert begin(fe, "a", "shared") == "OK"
    assert begin(fe, "b", "shared") == "LABEL_ALREADY_EXISTS"
    assert begin(fe, "b", "free") == "OK"


def test_an_expired_label_is_free_again_in_every_database(fe: TxnManager) -> None:
    assert begin(fe, "a", "shared") == "OK"
    rollback(fe, "a", "shared")
    time.sleep(0.1)
    fe.check_timeouts()
    assert fe.by_label == {}
    assert begin(fe, "b", "shared") == "OK"
    assert begin(fe, "a", "shared") == "LABEL_ALREADY_EXISTS"
