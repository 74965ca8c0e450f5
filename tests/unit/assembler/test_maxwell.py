"""Maxwell's JSON through the same state machine: xid on every row, commit on the last."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assembler.codecs import CodecSettings, Encoding
from assembler.machine import TransactionAssembler
from assembler.output import KIND_REJECT, KIND_ROW, OutputRow
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings

pytestmark = pytest.mark.unit

TOPIC = "maxwell"


def mx(xid: int | None, kind: str = "insert", commit: bool = False, **extra: Any) -> bytes:
    doc: dict[str, Any] = {
        "database": "shop",
        "table": "orders",
        "type": kind,
        "ts": 1_700_000_000,
        "xid": xid,
        "data": {"id": xid, "amount": 1},
        **extra,
    }
    if commit:
        doc["commit"] = True
    return json.dumps(doc).encode()


def run(values: list[bytes], calls: int = 1, maxwell: bool = True, expire_at: int | None = None):
    encoding: Encoding = "maxwell" if maxwell else "json"
    asm = TransactionAssembler(
        AssemblerSettings(codec=CodecSettings(encoding=encoding), txn_timeout_ms=1000)
    )
    records = [SourceRecord(TOPIC, 0, i, v) for i, v in enumerate(values)]
    out: list[OutputRow] = []
    state = None
    size = max(1, len(records) // calls)
    for i in range(0, len(records), size):
        step = asm.process(state, records[i : i + size], now_ms=0)
        out += step.outputs
        state = step.state
    if expire_at is not None and state is not None:
        out += asm.expire(state, now_ms=expire_at).outputs
    return out


@pytest.mark.parametrize("calls", [1, 5])
def test_transactions_come_out_whole_on_their_commit_row(calls: int) -> None:
    out = run(
        [
            mx(10),
            mx(10, "update").replace(b'"amount": 1}', b'"amount": 12.30}'),
            mx(10, "delete", commit=True),
            mx(11, commit=True),
        ],
        calls=calls,
    )
    rows = [(r.kind, r.txn_id, r.op, json.loads(r.row)) for r in out]
    assert [(k, t, op) for k, t, op, _ in rows] == [
        (KIND_ROW, "10", "UPSERT"),
        (KIND_ROW, "10", "UPSERT"),
        (KIND_ROW, "10", "DELETE"),
        (KIND_ROW, "11", "UPSERT"),
    ]
    assert '"amount":12.30' in out[1].row  # a DECIMAL keeps its exact text
    assert [r.is_txn_end for r in out] == [False, False, True, True]
    assert (out[0].first_offset, out[2].last_offset) == (0, 2)


def test_a_lost_commit_flag_rejects_that_transaction_when_the_next_one_starts() -> None:
    out = run([mx(10), mx(10), mx(11, commit=True)])
    rejects = [r for r in out if r.kind == KIND_REJECT]
    assert {r.txn_id for r in rejects} == {"10"}
    assert all(r.reason.startswith("begin-while-open") for r in rejects)
    assert [(r.kind, r.txn_id) for r in out if r.kind == KIND_ROW] == [(KIND_ROW, "11")]


def test_a_commit_that_never_comes_times_out() -> None:
    out = run([mx(10), mx(10)], expire_at=5000)
    # Its two rows, keyed by the first one's offset: there is no BEGIN record to reject.
    assert [(r.kind, r.txn_id, r.row_seq, r.last_offset) for r in out] == [
        (KIND_REJECT, "10", 0, 0),
        (KIND_REJECT, "10", 1, 1),
    ]
    assert all(r.reason.startswith("txn-timeout") for r in out)


def test_ddl_and_bootstrap_markers_are_skipped_bootstrap_rows_are_dead_lettered() -> None:
    ddl = json.dumps({"type": "table-alter", "database": "shop", "sql": "ALTER TABLE x"})
    start = json.dumps({"type": "bootstrap-start", "database": "shop", "table": "orders"})
    boot = json.dumps(
        {"type": "bootstrap-insert", "database": "shop", "table": "orders", "data": {"id": 1}}
    )
    out = run([ddl.encode(), start.encode(), boot.encode(), mx(12, commit=True)])
    assert [(r.kind, r.txn_id) for r in out] == [
        (KIND_REJECT, "bootstrap:shop.orders"),
        (KIND_ROW, "12"),
    ]
    assert out[0].reason.startswith("unknown-type")
    assert json.loads(json.loads(out[0].row)["row"]) == {"id": 1}  # the row is kept


def test_maxwell_types_are_not_accepted_in_the_projects_own_envelope() -> None:
    event = {
        "txn_id": "x",
        "type": "MAXWELL_COMMIT",
        "database": "shop",
        "table": "orders",
        "op": "UPSERT",
        "row": "{}",
    }
    out = run([json.dumps(event).encode()], maxwell=False)
    assert [r.kind for r in out] == [KIND_REJECT]
    assert out[0].reason.startswith("unknown-type")


def test_bad_maxwell_records_are_undecodable_with_the_reason() -> None:
    out = run([mx(None), b"[1]", mx(13, kind="truncate"), mx(14, commit=True)])
    reasons = [r.reason for r in out if r.kind == KIND_REJECT]
    assert len(reasons) == 3
    assert "without an integer xid" in reasons[0]
    assert "not an object" in reasons[1]
    assert "unknown type 'truncate'" in reasons[2]
    assert [r.txn_id for r in out if r.kind == KIND_ROW] == ["14"]


def test_maxwell_json_is_read_as_the_projects_own_envelope_is() -> None:
    # The same parser decides (assembler.codecs.json_object): a lone surrogate escape is a
    # reject naming it, so is a row holding NaN (StarRocks' strict parser refuses it, failing
    # the batch on every replay), and a nested float keeps its digits exactly.
    surrogate = mx(20, commit=True).replace(b'"amount": 1', b'"amount": "\\ud800"')
    nan = mx(21, commit=True).replace(b'"amount": 1', b'"amount": NaN')
    nested = mx(22, commit=True).replace(
        b'"amount": 1', b'"amount": {"exact": 0.1000000000000000001}'
    )
    out = run([surrogate, nan, nested])
    rejects = [r.reason for r in out if r.kind == KIND_REJECT]
    assert len(rejects) == 2
    assert "lone UTF-16 surrogate" in rejects[0]
    assert "NaN is not a JSON number" in rejects[1]
    rows = {r.txn_id: r.row for r in out if r.kind == KIND_ROW}
    assert set(rows) == {"22"}
    assert "0.1000000000000000001" in rows["22"]
