"""Spec §5 data semantics: JSON, jsonpaths, CSV, __op, NULLs, filtering and max_filter_ratio."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
import requests

from devstack.starrocks.launcher import EmulatorHandle
from tests.integration.devstack.srclient import TxnClient

pytestmark = pytest.mark.integration


def _commit_single(c: TxnClient, label: str, table: str, body: str, **headers: str) -> dict:  # type: ignore[type-arg]
    assert c.call("begin", label, table=table).status == "OK"
    extra: dict[str, Any] = dict(headers)  # header names never clash with call()'s own
    r = c.call("load", label, table=table, data=body, **extra)
    assert r.status == "OK", r.text
    r = c.call("commit", label)
    return r.body


def test_json_ops_applied_in_load_order(c: TxnClient, emu: EmulatorHandle) -> None:
    rows = [
        {"id": 1, "v": "a", "amt": "1.005", "__op": 0},
        {"id": 2, "v": "b", "amt": 2},
        {"id": 1, "__op": 1},  # upsert then delete of one key in one txn => deleted
        {"id": 3, "v": "c", "__op": "upsert"},
        {"id": 2, "v": "b2", "amt": "2.5"},  # later upsert wins
        {"id": 4, "v": "d", "unknown_key": 1},  # unknown keys are ignored
    ]
    body = _commit_single(c, "j1", "t1", json.dumps(rows), format="json", strip_outer_array="true")
    assert body["Status"] == "OK"
    assert body["NumberLoadedRows"] == 6
    got = emu.sql(f"SELECT id, v, amt FROM {c.db}.t1 ORDER BY id")
    assert got == [(2, "b2", Decimal("2.50")), (3, "c", None), (4, "d", None)]
    # A second txn deletes through a string op and a later load of the same txn.
    assert c.call("begin", "j2", table="t1").status == "OK"
    assert c.load("j2", "t1", [{"id": 3, "__op": "delete"}]).status == "OK"
    assert c.load("j2", "t1", [{"id": 5, "v": "e"}]).status == "OK"
    assert c.call("commit", "j2").status == "OK"
    assert [r[0] for r in emu.sql(f"SELECT id FROM {c.db}.t1 ORDER BY id")] == [2, 4, 5]


def test_json_single_document_and_jsonpaths(c: TxnClient, emu: EmulatorHandle) -> None:
    body = _commit_single(c, "doc", "t1", json.dumps({"id": 10, "v": "one"}), format="json")
    assert body["NumberLoadedRows"] == 1
    doc = json.dumps([{"a": {"k": 11}, "b": "x"}, {"a": {"k": 12}, "b": "y"}])
    body = _commit_single(
        c,
        "jp",
        "t1",
        doc,
        format="json",
        strip_outer_array="true",
        jsonpaths='["$.a.k", "$.b"]',
        columns="id, v",
    )
    assert body["NumberLoadedRows"] == 2
    assert emu.sql(f"SELECT id, v FROM {c.db}.t1 ORDER BY id") == [
        (10, "one"),
        (11, "x"),
        (12, "y"),
    ]


def test_csv_columns_nulls_and_op(c: TxnClient, emu: EmulatorHandle) -> None:
    body = _commit_single(
        c, "csv1", "t1", "1|a|1.5\n2|\\N|\\N\n3||3\n", format="csv", column_separator="|"
    )
    assert body["NumberLoadedRows"] == 3
    assert emu.sql(f"SELECT id, v, amt FROM {c.db}.t1 ORDER BY id") == [
        (1, "a", Decimal("1.50")),
        (2, None, None),
        (3, "", Decimal("3.00")),
    ]
    body = _commit_single(
        c,
        "csv2",
        "t1",
        "1,x,0\n3,y,1\n",
        format="csv",
        column_separator=",",
        columns="id, v, temp, __op = temp",
    )
    assert body["NumberLoadedRows"] == 2
    assert emu.sql(f"SELECT id, v FROM {c.db}.t1 ORDER BY id") == [(1, "x"), (2, None)]
    body = _commit_single(
        c,
        "csv3",
        "t1",
        "9\x01z\x01\\N\n",
        format="csv",
        column_separator="\\x01",
        columns="id, v, amt",
    )
    assert body["NumberLoadedRows"] == 1


def test_filtered_rows_and_max_filter_ratio_single(c: TxnClient, emu: EmulatorHandle) -> None:
    rows = [{"id": 1, "v": "ok"}, {"id": None, "v": "null key"}, {"id": 3, "v": "x" * 40}]
    assert c.call("begin", "f1", table="t1").status == "OK"
    assert c.load("f1", "t1", rows).status == "OK"  # counted, not failed, at load time
    r = c.call("commit", "f1")
    assert (r.status, r.message) == ("INTERNAL_ERROR", "too many filtered rows")
    assert "/api/_load_error_log?file=error_log_" in r.body["ErrorURL"]
    log = requests.get(r.body["ErrorURL"], timeout=10)
    assert log.status_code == 200
    assert "NULL value in non-nullable column" in log.text
    assert c.state("f1") == "ABORTED"
    assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t1") == [(0,)]
    # The same rows with a tolerant ratio: 2 of 3 filtered <= 0.7.
    assert c.call("begin", "f2", table="t1").status == "OK"
    assert c.load("f2", "t1", rows, max_filter_ratio="0.7").status == "OK"
    r = c.call("prepare", "f2")
    assert r.status == "OK"
    assert (r.body["NumberTotalRows"], r.body["NumberFilteredRows"]) == (3, 2)
    assert r.body["NumberLoadedRows"] == 1
    assert c.call("commit", "f2").status == "OK"
    assert emu.sql(f"SELECT id FROM {c.db}.t1") == [(1,)]


def test_strict_mode_conversion(c: TxnClient, emu: EmulatorHandle) -> None:
    rows = [{"id": 1, "amt": "not-a-number"}]
    body = _commit_single(
        c, "nonstrict", "t1", json.dumps(rows), format="json", strip_outer_array="true"
    )
    assert body["NumberFilteredRows"] == 0
    assert emu.sql(f"SELECT amt FROM {c.db}.t1") == [(None,)]
    assert c.call("begin", "strict", table="t1").status == "OK"
    assert c.load("strict", "t1", rows, strict_mode="true").status == "OK"
    assert c.call("commit", "strict").message == "too many filtered rows"


def test_max_filter_ratio_multi_aborts_whole_txn(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "mf", multi=True, timeout="30").status == "OK"
    assert c.load("mf", "t2", [{"id": 1, "ref": 1}], multi=True).status == "OK"
    assert c.load("mf", "t1", [{"id": None}, {"id": 2}], multi=True).status == "OK"
    r = c.call("commit", "mf", multi=True)
    assert r.status == "FAILED"
    assert "Failed to load table t1" in r.message
    assert "abnormal data more than max filter rate, tracking_url:" in r.message
    assert c.state("mf") == "ABORTED"
    assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t2") == [(0,)]


def test_a_multi_table_sub_task_that_loaded_no_row_fails_whatever_the_ratio(
    c: TxnClient, emu: EmulatorHandle
) -> None:
    """StarRocks' waitCoordFinish refuses "no row loaded" before it reads the filter ratio:
    every row of t1 filtered fails the transaction even with max_filter_ratio 1."""
    assert c.call("begin", "nr", multi=True, timeout="30").status == "OK"
    assert c.load("nr", "t2", [{"id": 1, "ref": 1}], multi=True).status == "OK"
    load = c.load("nr", "t1", [{"id": None}], multi=True, max_filter_ratio="1")
    assert load.status == "OK"
    r = c.call("commit", "nr", multi=True)
    assert r.status == "FAILED"
    assert "Failed to load table t1" in r.message
    assert "No partitions have data available for loading" in r.message
    assert c.state("nr") == "ABORTED"
    assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t2") == [(0,)]


def test_load_params_must_match_and_planning_errors(c: TxnClient) -> None:
    assert c.call("begin", "neq", table="t1").status == "OK"
    assert c.load("neq", "t1", [{"id": 1}]).status == "OK"
    r = c.load("neq", "t1", [{"id": 2}], max_filter_ratio="0.5")
    assert (r.status, r.message) == ("INTERNAL_ERROR", "load request not equal last.")
    assert c.state("neq") == "ABORTED"
    assert c.call("begin", "bad", table="t1").status == "OK"
    r = c.call("load", "bad", table="t1", data="1\n", format="csv", columns="id, x = nope")
    assert r.status == "ANALYSIS_ERROR"
    assert c.load("bad", "t1", [{"id": 1}]).status == "TXN_NOT_EXISTS"
    r = c.call("load", "bad2", table="t1", data="1", format="xml")
    assert r.status == "FAILED"  # label unknown: FE answers first
    assert c.call("begin", "fmt", table="t1").status == "OK"
    r = c.call("load", "fmt", table="t1", data="1", format="xml")
    assert (r.status, r.message) == ("INVALID_ARGUMENT", "unknown data format, format=xml")
    # Multi-table planning errors are answered by the FE and cancel the whole txn.
    assert c.call("begin", "mbad", multi=True).status == "OK"
    r = c.call(
        "load", "mbad", table="t1", multi=True, data="1\n", format="csv", columns="id, x = nope"
    )
    assert r.status == "FAILED"
    assert r.node == "fe"
    # Cancelled before any commit registered it: get_load_state cannot see it (spec §4.3a).
    assert c.state("mbad") == "UNKNOWN"
    assert c.h.control.labels()["mbad"] == "ABORTED"
    assert c.call("begin", "mtab", multi=True).status == "OK"
    r = c.load("mtab", "nosuch", [{"id": 1}], multi=True)
    assert r.status == "FAILED"
    assert f"Failed to find table nosuch in db {c.db}" in r.message


def test_different_formats_per_table_in_multi(c: TxnClient, emu: EmulatorHandle) -> None:
    assert c.call("begin", "fmts", multi=True, timeout="30").status == "OK"
    assert c.load("fmts", "t1", [{"id": 1, "v": "j"}], multi=True).status == "OK"
    r = c.call(
        "load", "fmts", table="t2", multi=True, data="5,1,csv\n", format="csv", column_separator=","
    )
    assert r.status == "OK"
    assert c.call("commit", "fmts", multi=True).status == "OK"
    assert emu.sql(f"SELECT a.v, b.note FROM {c.db}.t1 a JOIN {c.db}.t2 b ON a.id = b.ref") == [
        ("j", "csv")
    ]


def test_discarded_table_commits_without_its_rows(c: TxnClient, emu: EmulatorHandle) -> None:
    # The benchmark knob: t1's committed rows are dropped, t2's written, the txn unchanged.
    emu.control.discard_rows([f"{c.db}.t1"])
    try:
        assert c.call("begin", "dr", multi=True).status == "OK"
        assert c.load("dr", "t1", [{"id": 1, "v": "a"}], multi=True).status == "OK"
        assert c.load("dr", "t2", [{"id": 7, "ref": 1}], multi=True).status == "OK"
        assert c.call("commit", "dr", multi=True).status == "OK"
        assert c.state("dr") == "VISIBLE"
        assert emu.sql(f"SELECT COUNT(*) FROM {c.db}.t1") == [(0,)]
        assert emu.sql(f"SELECT id FROM {c.db}.t2") == [(7,)]
    finally:
        emu.control.discard_rows([])
    assert c.call("begin", "dr2", multi=True).status == "OK"
    assert c.load("dr2", "t1", [{"id": 2, "v": "b"}], multi=True).status == "OK"
    assert c.call("commit", "dr2", multi=True).status == "OK"
    assert emu.sql(f"SELECT id FROM {c.db}.t1") == [(2,)]
    bad = requests.post(f"{emu.fe_url}/_emulator/discard", json={"tables": ["t1"]}, timeout=10)
    assert bad.status_code == 400
    assert "db.table" in bad.json()["error"]
