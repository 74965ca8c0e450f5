"""The native fast path (``txncdc_native``) against the pure-Python machine and loader.

The scanner may take a transaction only when the machine would emit it unchanged: over
streams full of what it must leave alone (bad JSON, arrays, duplicate fields, escaped
surrogates, wrong types, rows that are not objects, unknown ops and tables, size limits,
count mismatches, gaps, replays), both must give the same rows, states and failures. The
scanner must also really take the common case, or the comparison proves nothing.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembler import (
    AssemblerSettings,
    OutputRow,
    PartitionState,
    Policy,
    SourceRecord,
    TransactionAssembler,
    buffer,
)
from assembler.codecs import CodecSettings
from assembler.fast import native_scan
from assembler.machine import AssemblyFailed
from assembler.settings import Targets, Violation
from common import native
from sinks.starrocks import client, loader
from sinks.starrocks.errors import InvalidRequestError
from tests.unit.assembler.builders import begin, data, end, records, roundtrip, txn

pytestmark = pytest.mark.unit

TOPIC = "cdc"
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_native_module_is_installed() -> None:
    # make setup builds it; without it every test below would compare the machine with itself.
    assert native.native_module() is not None


def _scan(asm_settings: AssemblerSettings) -> Any:
    asm = TransactionAssembler(asm_settings)
    assert asm._scan is not None
    return asm._scan


def test_the_scanner_makes_output_rows_of_the_output_row_type_only() -> None:
    module = native.native_module()
    assert module is not None
    for wrong in (tuple, int, "OutputRow"):
        with pytest.raises(ValueError, match="OutputRow"):
            module.JsonTxnScanner(10, 1000, None, wrong)
    out: list[OutputRow] = []
    scanner = module.JsonTxnScanner(10, 1000, None, OutputRow)
    scanner.scan(records(txn("a", 2)), 0, -1, 0, TOPIC, 0, out)
    assert [type(row) for row in out] == [OutputRow, OutputRow]
    assert out[1].row_seq == 1
    assert out[1].is_txn_end


def test_the_scanner_takes_whole_transactions_and_holds_an_open_one() -> None:
    recs = records([*txn("a", 3), *txn("b", 0), *txn("c", 2), *txn("d", 2)[:2]], start=10)
    out: list[OutputRow] = []
    nxt, last, seq, held = _scan(AssemblerSettings())(recs, 0, -1, 0, TOPIC, 0, out)
    # a (5 records), b (2, empty: no rows, no txn_seq), c (4); d's BEGIN and one DATA held.
    assert (nxt, last, seq) == (13, 22, 2)
    assert [(r.txn_id, r.txn_seq, r.row_seq, r.is_txn_end) for r in out] == [
        ("a", 1, 0, False),
        ("a", 1, 1, False),
        ("a", 1, 2, True),
        ("c", 2, 0, False),
        ("c", 2, 1, True),
    ]
    assert type(out[0]) is OutputRow
    assert out[0] == ("ROW", TOPIC, 0, "a", 1, 0, "shop", "orders", "UPSERT", '{"id": 0}',
                      False, 10, 14, None, None)  # fmt: skip
    # What the machine's buffer holds of d: its DATA at offset 22, byte for byte.
    d_row = (22, 0, "shop", "orders", '{"id": 0}')
    size = buffer.buffered_size(*d_row[2:])
    assert held == ("d", 21, None, None, 1, size, buffer.encode([d_row]))


def test_the_scanner_continues_the_transaction_the_state_holds() -> None:
    events = [begin("a", ts=1), data("a", 0, ts=2), data("a", 1, table="items", op="DELETE")]
    events += [data("a", 2), end("a", 3, ts=None), *txn("b", 1)]
    recs = records(events, start=5)
    machine = TransactionAssembler(AssemblerSettings())
    machine._scan = None
    first = machine.process(None, recs[:2], now_ms=7)  # BEGIN and one DATA: buffered
    st = first.state
    held = (st.txn_id, st.txn_first_offset, st.txn_begin_ts_ms, st.txn_last_ts_ms,
            st.txn_rows, st.txn_bytes, st.txn_buffer)  # fmt: skip
    scan = _scan(AssemblerSettings())
    out: list[OutputRow] = []
    # The second DATA and the third, still open: the buffer grows as the machine's would.
    nxt, last, seq, left = scan(recs[:4], 2, 6, 0, TOPIC, 0, out, held)
    second = machine.process(st, recs[2:4], now_ms=8).state
    assert (nxt, last, seq, out) == (4, 8, 0, [])
    assert left == (second.txn_id, second.txn_first_offset, second.txn_begin_ts_ms,
                    second.txn_last_ts_ms, second.txn_rows, second.txn_bytes,
                    second.txn_buffer)  # fmt: skip
    # Then its END and a whole transaction: the held rows come first, numbered on.
    assert left is not None
    nxt, last, seq, left = scan(recs, 4, 8, 0, TOPIC, 0, out, left)
    assert (nxt, last, seq, left) == (len(recs), 12, 2, None)
    expected = machine.process(second, recs[4:], now_ms=9).outputs
    assert [r.as_tuple() for r in out] == [r.as_tuple() for r in expected]
    assert [(r.row_seq, r.table, r.op, r.source_ts_ms) for r in out[:3]] == [
        (0, "orders", "UPSERT", 2), (1, "items", "DELETE", 2), (2, "orders", "UPSERT", 2),
    ]  # fmt: skip


def test_the_scanner_leaves_a_held_transaction_it_cannot_judge_to_the_machine() -> None:
    st = TransactionAssembler(AssemblerSettings()).process(None, records(txn("a", 2)[:2]), 0).state
    held = (st.txn_id, st.txn_first_offset, st.txn_begin_ts_ms, st.txn_last_ts_ms,
            st.txn_rows, st.txn_bytes, st.txn_buffer)  # fmt: skip
    scan = _scan(AssemblerSettings(max_txn_rows=2))
    cases = {
        "another txn's DATA": records([data("b", 5), end("a", 2)], start=2),
        "a BEGIN while open": records([begin("b"), end("b", 0)], start=2),
        "count mismatch": records([data("a", 1), end("a", 3)], start=2),
        "too many rows": records([data("a", 1), data("a", 2), end("a", 3)], start=2),
        "a gap": records([data("a", 1), end("a", 2)], start=5),
    }
    for why, recs in cases.items():
        out: list[OutputRow] = []
        assert scan(recs, 0, 1, 0, TOPIC, 0, out, held)[0] == 0, why
        assert out == [], why
    corrupt = (*held[:6], held[6][:-1])
    assert scan(records([end("a", 1)], start=2), 0, 1, 0, TOPIC, 0, [], corrupt)[0] == 0


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (b'{"txn_id":"a","type":"DATA","database":"shop","table":"orders","row":"[1]"}', "array"),
        (
            b'{"txn_id":"a","type":"DATA","database":"shop","table":"orders","row":"{\\"s\\":\\"\\\\ud800\\"}"}',
            "surrogate",
        ),
        (
            b'{"txn_id":"a","type":"DATA","database":"shop","table":"orders","row":{"id":1}}',
            "object row",
        ),
        (
            b'{"txn_id":"a","type":"DATA","database":"shop","table":"orders","op":"upsert","row":"{}"}',
            "op",
        ),
        (
            b'{"txn_id":"a","txn_id":"a","type":"DATA","database":"shop","table":"orders","row":"{}"}',
            "dup",
        ),
        (b'["a","DATA","shop","orders",null,"{}"]', "array event"),
        (
            b'{"txn_id":"a","type":"DATA","database":"shop","table":"orders","row":"{}","source_ts_ms":1.0}',
            "float",
        ),
        (b"\xff", "not UTF-8"),
        (
            b'{"txn_id":"a","type":"DATA","database":"shop","table":"orders","row":"{}","x":"\xff"}',
            "not UTF-8 in a field the scanner ignores",
        ),
        (
            b'{"txn_id":"a","type":"DATA","database":"shop","table":"orders","row":"{}","x":"\\ud800"}',
            "a lone surrogate in a field the scanner ignores",
        ),
        (
            b'{"txn_id":"a","type":"DATA","database":"shop","table":"orders","row":"{}","x":{"\\ud800":1}}',
            "a lone surrogate in a key the scanner ignores",
        ),
        (None, "tombstone"),
    ],
)
def test_the_scanner_leaves_a_transaction_it_cannot_judge_to_the_machine(
    value: bytes | None, why: str
) -> None:
    recs = records([*txn("x", 1)])
    recs += [
        SourceRecord(TOPIC, 0, 3, b'{"txn_id":"a","type":"TXN_BEGIN"}'),
        SourceRecord(TOPIC, 0, 4, value),
        SourceRecord(TOPIC, 0, 5, b'{"txn_id":"a","type":"TXN_END"}'),
    ]
    out: list[OutputRow] = []
    assert _scan(AssemblerSettings())(recs, 0, -1, 0, TOPIC, 0, out)[0] == 3, why
    assert [r.txn_id for r in out] == ["x"]


def test_the_scanner_leaves_limits_targets_counts_and_gaps_to_the_machine() -> None:
    cases: list[tuple[AssemblerSettings, list[SourceRecord]]] = [
        (AssemblerSettings(max_txn_rows=2), records(txn("a", 3))),
        (AssemblerSettings(max_txn_bytes=40), records(txn("a", 2))),
        (
            AssemblerSettings(targets=Targets("shop", frozenset({"items"}))),
            records(txn("a", 1)),
        ),
        (AssemblerSettings(), records([*txn("a", 2)[:-1], txn("a", 3)[-1]])),  # count 3 != 2
        (AssemblerSettings(), records([*txn("a", 1)[:2], *txn("b", 1)])),  # DATA of a, then BEGIN
        (AssemblerSettings(), [*records(txn("a", 1)[:2]), *records(txn("a", 1)[2:], start=9)]),
    ]
    for asm_settings, recs in cases:
        assert _scan(asm_settings)(recs, 0, -1, 0, TOPIC, 0, [])[0] == 0


def test_only_the_json_codec_with_the_event_schema_has_a_scanner() -> None:
    encoding: Literal["avro", "maxwell"]
    for encoding in ("avro", "maxwell"):
        asm_settings = AssemblerSettings(codec=CodecSettings(encoding=encoding))
        assert TransactionAssembler(asm_settings)._scan is None
    asm = TransactionAssembler(AssemblerSettings())
    assert native_scan(AssemblerSettings(), asm._decoder) is not None


def test_the_scanner_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.NATIVE_ENV, "off")
    assert TransactionAssembler(AssemblerSettings())._scan is None


# -- the scanner against the machine ------------------------------------------------------

_ROWS = [
    '{"id":1}',
    "{}",
    ' {"a":[1,2,{"b":null}],"s":"x\\"y"} ',
    '{"big":123456789012345678901234567890,"f":1.25}',
    '{"e":"\\u00e9\\n"}',
    '{"s":"\\ud83d\\ude00"}',
    '{"s":"\\ud800"}',
    '{"f":1e400}',
    '{"__op":1,"id":2}',
    "[1]",
    '{"a":1',
    "NaN",
    '"text"',
]


def _data_value(rnd: random.Random, txn_id: str) -> bytes:
    event: dict[str, Any] = {"txn_id": txn_id, "type": "DATA", "database": "shop"}
    event["table"] = rnd.choice(["orders", "orders", "items", "other", ""])
    op = rnd.choice([None, None, "UPSERT", "DELETE", "upsert", 5])
    if op is not None:
        event["op"] = op
    if rnd.random() < 0.05:
        event["row"] = {"id": 1, "n": 1.5}
    elif rnd.random() < 0.03:
        event["row"] = None
    else:
        event["row"] = rnd.choice(_ROWS)
    if rnd.random() < 0.5:
        event["source_ts_ms"] = rnd.choice([5, None, 2**63, 1.5, "7"])
    text = json.dumps(event, ensure_ascii=rnd.random() < 0.5)
    if rnd.random() < 0.05:
        text = text.replace('"type"', '"type": "DATA", "type"', 1)  # a duplicate field
    if rnd.random() < 0.05:  # invalid UTF-8 (0xff) in a field nobody reads
        text = text.replace('"type"', '"note": "\udcff", "type"', 1)
        return text.encode(errors="surrogateescape")
    return _lone_surrogate(rnd, text).encode()


def _marker(rnd: random.Random, txn_id: str, kind: str, rows: int) -> bytes:
    event: dict[str, Any] = {"txn_id": txn_id, "type": kind}
    if rnd.random() < 0.5:
        event["source_ts_ms"] = rnd.choice([1, 2, None])
    if kind == "TXN_END" and rnd.random() < 0.7:
        event["event_count"] = rnd.choice([rows, rows, rows, rows + 1, 2**40])
    if rnd.random() < 0.1:
        event["extra"] = {"ignored": [1, 2]}
    return _lone_surrogate(rnd, json.dumps(event)).encode()


def _lone_surrogate(rnd: random.Random, text: str) -> str:
    """Now and then an escaped lone surrogate in a field or key nobody reads: the Python
    decoder refuses the record, whichever string holds it."""
    if rnd.random() < 0.03:
        return text.replace(
            '"type"', rnd.choice(['"x": "\\ud800", ', '"x": {"\\udc00": 1}, ']) + '"type"', 1
        )
    return text


_ODD = [
    None,
    b"",
    b"not json",
    b"\xff\xfe",
    b"[]",
    b'["a","TXN_BEGIN"]',
    b'{"type":"TXN_END"}',
    b'{"txn_id":"","type":"TXN_BEGIN"}',
    b'{"txn_id":"a","type":"HEARTBEAT"}',
    b'{"txn_id":"a","type":"TXN_BEGIN","source_ts_ms":NaN}',
]


def _stream(rnd: random.Random, n_txns: int) -> list[bytes | None]:
    values: list[bytes | None] = []
    for t in range(n_txns):
        txn_id = rnd.choice([f"t{t}", f"t{t}", "a"])
        clean = rnd.random() < 0.6
        rows = rnd.randint(0, 4)
        values.append(_marker(rnd, txn_id, "TXN_BEGIN", rows))
        for _ in range(rows):
            if clean:
                values.append(
                    json.dumps(
                        {"txn_id": txn_id, "type": "DATA", "database": "shop", "table": "orders",
                         "row": json.dumps({"id": rnd.randint(0, 9)}), "source_ts_ms": 4}
                    ).encode()
                )  # fmt: skip
            else:
                values.append(_data_value(rnd, rnd.choice([txn_id, txn_id, "other"])))
        if not clean and rnd.random() < 0.2:
            values.append(rnd.choice(_ODD))
        if rnd.random() < 0.9:
            values.append(_marker(rnd, txn_id, "TXN_END", rows))
    return values


def _run(
    asm: TransactionAssembler, recs: list[SourceRecord], cuts: list[int]
) -> tuple[list[tuple[Any, ...]], tuple[Any, ...] | None, str | None]:
    state: PartitionState | None = None
    out: list[tuple[Any, ...]] = []
    bounds = [0, *cuts, len(recs)]
    try:
        for call, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            batch = recs[lo:hi]
            if lo > 0:
                batch = batch + recs[max(0, lo - 2) : lo]  # replays of consumed offsets
            if not batch:
                continue
            # A later time each call: a transaction held open keeps the time it was opened.
            step = asm.process(state, batch, now_ms=1000 * call)
            out += [r.as_tuple() for r in step.outputs]
            state = roundtrip(step.state)
    except AssemblyFailed as e:
        return out, None, str(e)
    return out, state.to_tuple() if state else None, None


@SETTINGS
@given(st.data())
def test_the_scanner_and_the_machine_agree_on_any_stream(data_: st.DataObject) -> None:
    rnd = data_.draw(st.randoms(use_true_random=False))
    values = _stream(rnd, data_.draw(st.integers(1, 8)))
    offset = rnd.randint(0, 5)
    recs = []
    for value in values:
        recs.append(SourceRecord(TOPIC, 0, offset, value))
        offset += rnd.choice([1, 1, 1, 2, 4])  # gaps: markers, and offsets Kafka lost
    cuts = sorted(data_.draw(st.lists(st.integers(0, len(recs)), max_size=3)))
    fail = data_.draw(st.booleans())
    asm_settings = AssemblerSettings(
        policies={v: Policy.FAIL if fail else Policy.REJECT for v in Violation},
        max_txn_rows=data_.draw(st.sampled_from([3, 1_000_000])),
        max_txn_bytes=data_.draw(st.sampled_from([120, 256 * 1024 * 1024])),
        targets=data_.draw(st.sampled_from([None, Targets("shop", frozenset({"orders"}))])),
    )
    fast = TransactionAssembler(asm_settings)
    slow = TransactionAssembler(asm_settings)
    slow._scan = None
    assert fast._scan is not None
    assert _run(fast, recs, cuts) == _run(slow, recs, cuts)


def test_the_scanner_takes_the_common_case_in_the_comparison() -> None:
    # Guard for the comparison above: a clean stream goes through the scanner, not around it.
    asm = TransactionAssembler(AssemblerSettings())
    calls: list[int] = []
    scan = asm._scan
    assert scan is not None

    def counting(recs: list[SourceRecord], start: int, *args: Any) -> Any:
        result = scan(recs, start, *args)
        calls.append(result[0] - start)
        return result

    asm._scan = counting  # type: ignore[assignment]
    recs = records([*txn("a", 2), *txn("b", 3), data("c")])
    step = asm.process(None, recs, now_ms=0)
    assert len(step.outputs) == 5 + 1  # a, b and the lone DATA's reject
    assert calls[0] == 9


def test_the_scanner_takes_a_transaction_cut_by_the_calls_on_both_sides() -> None:
    # Guard for the comparison above: a transaction cut by a batch's end is not the machine's.
    asm = TransactionAssembler(AssemblerSettings())
    scan = asm._scan
    assert scan is not None
    taken: list[int] = []

    def counting(recs: list[SourceRecord], start: int, *args: Any) -> Any:
        result = scan(recs, start, *args)
        taken.append(result[0] - start)
        return result

    asm._scan = counting  # type: ignore[assignment]
    recs = records([*txn("a", 2), *txn("b", 6), *txn("c", 1)])
    state = asm.process(None, recs[:7], now_ms=1).state  # a, and b's BEGIN and 2 DATA
    assert (state.txn_rows, state.txn_opened_at_ms) == (2, 1)
    step = asm.process(roundtrip(state), recs[7:10], now_ms=2)  # 3 more of b's DATA
    # Open since the first call: its timeout counts from then.
    assert (step.state.txn_rows, step.state.txn_opened_at_ms, step.timeout_at_ms) == (
        5,
        1,
        1 + asm.settings.txn_timeout_ms,
    )
    step = asm.process(roundtrip(step.state), recs[10:], now_ms=3)  # b's last DATA, END; c
    assert [(r.txn_id, r.row_seq) for r in step.outputs] == [("b", i) for i in range(6)] + [
        ("c", 0)
    ]
    assert taken == [7, 3, 5]


# -- the loader's row splice against the loader -------------------------------------------


@SETTINGS
@given(
    st.sampled_from(["UPSERT", "DELETE", None]),
    st.one_of(
        st.sampled_from(_ROWS),
        st.dictionaries(
            st.sampled_from(["id", "__op", "é", "a\\b"]),
            st.one_of(st.integers(), st.text(max_size=4), st.floats(allow_nan=False)),
        ).map(lambda d: json.dumps(d, ensure_ascii=False)),
    ),
    st.sampled_from(["", " ", "\n"]),
)
def test_the_native_row_splice_matches_the_loader(op: str | None, row: str, pad: str) -> None:
    row = pad + row
    spliced = _encode(op, row)
    python = _encode(op, row, native_off=True)
    assert spliced == python


def _encode(op: str | None, row: str, native_off: bool = False) -> bytes | str:
    saved = loader._native_encode
    if native_off:
        loader._native_encode = None
    try:
        return loader.encode_row(op, row, "where")
    except InvalidRequestError as e:
        return str(e)
    finally:
        loader._native_encode = saved


def test_the_loader_uses_the_native_splice() -> None:
    assert loader._native_encode is not None
    assert loader._native_encode(0, ' {"id":1}') == b'{"__op":0,"id":1}'
    assert loader._native_encode(1, "{}") == b'{"__op":1}'
    assert loader._native_encode(0, '{"__op":1}') is None  # the row's own __op: Python decides
    assert loader._native_encode(0, "[1]") is None


# -- the loader's loop over runs of plain splices against the loop row by row ---------------

_LOOP_ROWS = [*_ROWS, '{"s":"\ud800"}', None, '{"id":2,"note":"ééé"}']


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.sampled_from(["UPSERT", "DELETE", None, "", "upsert", "MERGE"]),
            st.sampled_from(_LOOP_ROWS),
        ),
        max_size=40,
    ),
    st.integers(min_value=8, max_value=120),
    st.booleans(),
)
def test_the_native_loader_loop_sends_what_the_loop_row_by_row_sends(
    rows: list[tuple[str, str | None, str | None]], max_bytes: int, as_list: bool
) -> None:
    loads = sorted(
        ((table, op, row, "t", 0, f"x{i}") for i, (table, op, row) in enumerate(rows)),
        key=lambda r: r[0],
    )
    native_sent, native_reports = _load(loads, max_bytes, as_list)
    python_sent, python_reports = _load(loads, max_bytes, as_list, native_off=True)
    assert native_sent == python_sent
    assert native_reports == python_reports


def test_the_native_loader_loop_cuts_chunks_at_the_same_byte() -> None:
    # Parts of 17 bytes: every max-bytes from "one row per chunk" to "all in one", both ways.
    loads = [("a", "UPSERT", f'{{"id":{i}}}', "t", 0, "x") for i in range(6)]
    for max_bytes in range(10, 120):
        for as_list in (True, False):
            assert _load(loads, max_bytes, as_list) == _load(
                loads, max_bytes, as_list, native_off=True
            ), max_bytes


def test_the_native_loader_loop_takes_plain_rows_in_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    run = loader._native_run
    assert run is not None

    def counted(*args: Any) -> tuple[int, bytes, int]:
        calls.append(args[1])
        return run(*args)

    monkeypatch.setattr(loader, "_native_run", counted)
    loads = [("a", "UPSERT", f'{{"id":{i}}}', "t", 0, "x") for i in range(100)]
    loads += [("b", "DELETE", '{"id":1}', "t", 0, "x")]
    sent, reports = _load(loads, 1 << 20, True)
    assert calls == [0, 100]  # one call per table
    assert sent[0] == ("a", b"[" + b",".join(b'{"__op":0,"id":%d}' % i for i in range(100)) + b"]")
    assert sent[1] == ("b", b'[{"__op":1,"id":1}]')
    assert [r.rows for r in reports] == [100, 1]


def _load(
    loads: list[tuple[Any, ...]], max_bytes: int, as_list: bool, native_off: bool = False
) -> tuple[list[tuple[str, bytes]], list[loader.TableReport]]:
    sent: list[tuple[str, bytes]] = []

    class Loader(loader.PartitionLoader):
        def _send(self, client: Any, table: str, chunk: Any, report: Any) -> None:
            sent.append((table, chunk.body()))
            report.requests += 1

    class Config:
        max_bytes_per_load = max_bytes

    class Client:
        def __init__(self, _config: Any) -> None:
            pass

        def close(self) -> None:
            pass

    plan = loader.LoadPlan(Config(), {loader.ANY_TABLE: "l"}, True, 0)  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(client, "StarRocksClient", Client)
        patch.setattr(loader, "_BLOCK_ROWS", 3)  # iterators come in lists of 3: runs cut
        if native_off:
            patch.setattr(loader, "_native_run", None)
        reports = Loader(plan).load(list(loads) if as_list else iter(loads))
    return sent, reports
