"""The generator's transactions keep the demo invariants at every transaction boundary."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.codecs import encode_event
from demo.errors import DemoConfigError
from demo.invariants import ViolationKind, evaluate, rows_from_tables
from demo.model import ORDER_ITEMS, ORDERS, Tables, decode_row
from demo.workload import (
    Transaction,
    TxnKind,
    Workload,
    WorkloadConfig,
    key_for,
    partition_for,
)

pytestmark = pytest.mark.unit

AVSC = Path(__file__).resolve().parents[3] / "conf" / "events.avsc"


def fake_clock(start: int = 1_700_000_000_000) -> Iterator[int]:
    return itertools.count(start, 7)


def run(config: WorkloadConfig) -> tuple[Workload, list[Transaction]]:
    clock = fake_clock()
    workload = Workload(config, clock=lambda: next(clock))
    return workload, list(workload.transactions())


def apply_data(tables: Tables, txn: Transaction, upto: int | None = None) -> None:
    """Apply the DATA events of ``txn`` (the first ``upto`` of them) as a sink would."""
    data = [e for e in txn.events if e.type == "DATA"]
    for event in data[:upto]:
        assert event.table is not None
        assert event.row is not None
        tables.apply(event.table, event.op or "UPSERT", decode_row(event.row))


configs = st.builds(
    WorkloadConfig,
    orders=st.integers(0, 40),
    partitions=st.integers(1, 6),
    seed=st.integers(0, 2**32),
    max_items=st.integers(1, 6),
    update_ratio=st.sampled_from([0.0, 0.3, 0.6]),
    delete_ratio=st.sampled_from([0.0, 0.1, 0.3]),
)


@settings(max_examples=60, deadline=None)
@given(configs)
def test_invariants_hold_after_every_transaction(config: WorkloadConfig) -> None:
    workload, txns = run(config)
    tables = Tables()
    for txn in txns:
        apply_data(tables, txn)
        report = evaluate(rows_from_tables(tables))
        assert report.ok, (txn.txn_id, report.examples)
    # The replayed state is exactly the ground truth.
    assert tables == Tables.from_rows(workload.final_rows())
    assert sum(t.kind == TxnKind.CREATE for t in txns) == config.orders


@settings(max_examples=40, deadline=None)
@given(configs.filter(lambda c: c.orders > 0))
def test_every_partial_transaction_breaks_an_invariant(config: WorkloadConfig) -> None:
    """DESIGN §8: any strict prefix of a transaction is visible as a violation."""
    _, txns = run(config)
    tables = Tables()
    for txn in txns:
        for upto in range(1, txn.data_events):
            partial = Tables({t: dict(rows) for t, rows in tables.rows.items()})
            apply_data(partial, txn, upto)
            assert not evaluate(rows_from_tables(partial)).ok, (txn.txn_id, txn.kind, upto)
        apply_data(tables, txn)


def test_partial_create_is_an_item_count_violation() -> None:
    _, txns = run(WorkloadConfig(orders=1, seed=3, max_items=4))
    tables = Tables()
    apply_data(tables, txns[0], upto=1)  # the order row only
    report = evaluate(rows_from_tables(tables))
    assert report.count(ViolationKind.ITEM_COUNT) == 1
    assert report.count(ViolationKind.TOTAL) == 1


def test_same_seed_same_transactions() -> None:
    config = WorkloadConfig(orders=50, partitions=3, seed=42)
    a = run(config)
    b = run(config)
    assert a[1] == b[1]
    assert a[0].final_rows() == b[0].final_rows()
    c = run(dataclasses.replace(config, seed=43))
    assert [t.events for t in c[1]] != [t.events for t in a[1]]


def test_determinism_does_not_depend_on_the_clock() -> None:
    config = WorkloadConfig(orders=30, partitions=2, seed=9)
    a = list(Workload(config, clock=lambda: 1).transactions())
    b = list(Workload(config, clock=lambda: 2).transactions())

    def strip(txn: Transaction) -> list[tuple[Any, ...]]:
        out = []
        for e in txn.events:
            row = decode_row(e.row) if e.row else None
            if row:
                row.pop("updated_ts_ms", None)
            out.append((e.txn_id, e.type, e.table, e.op, row, e.event_count))
        return out

    assert [strip(t) for t in a] == [strip(t) for t in b]


def test_partition_is_a_function_of_the_order_id() -> None:
    config = WorkloadConfig(orders=120, partitions=4, seed=1, update_ratio=0.4, delete_ratio=0.2)
    _, txns = run(config)
    partitions_of_order: dict[int, set[int]] = defaultdict(set)
    for txn in txns:
        assert txn.partition == partition_for(txn.order_id, 4)
        assert txn.key == key_for(txn.order_id) == str(txn.order_id).encode()
        partitions_of_order[txn.order_id].add(txn.partition)
        for event in txn.events:
            if event.row:
                row = decode_row(event.row)
                if "order_id" in row:  # item DELETEs carry the item key only
                    assert row["order_id"] == txn.order_id
    assert all(len(p) == 1 for p in partitions_of_order.values())
    assert {p for ps in partitions_of_order.values() for p in ps} == {0, 1, 2, 3}
    assert partition_for(12345, 1) == 0


def test_partition_for_is_pinned() -> None:
    """Pinned values: changing the function would silently move orders between partitions."""
    assert [partition_for(i, 8) for i in (1, 2, 3, 1000)] == [7, 5, 3, 7]


def test_event_shape_follows_the_schema() -> None:
    schema_fields = [f["name"] for f in json.loads(AVSC.read_text())["fields"]]
    _, txns = run(WorkloadConfig(orders=40, partitions=2, seed=5, database="shop"))
    kinds = {t.kind for t in txns}
    assert kinds == set(TxnKind)
    for txn in txns:
        begin, *data, end = txn.events
        assert list(begin._fields) == schema_fields
        assert begin.type == "TXN_BEGIN"
        assert end.type == "TXN_END"
        for marker in (begin, end):
            assert (marker.database, marker.table, marker.op, marker.row) == (None,) * 4
        assert end.event_count == len(data) == txn.data_events > 0
        assert {e.txn_id for e in txn.events} == {txn.txn_id}
        assert {e.source_ts_ms for e in txn.events} == {txn.source_ts_ms}
        for event in data:
            assert event.type == "DATA"
            assert event.database == "shop"
            assert event.table in (ORDERS, ORDER_ITEMS)
            assert event.op in ("UPSERT", "DELETE")
            assert event.event_count is None
            assert event.row is not None
            row = decode_row(event.row)
            if event.op == "DELETE":
                assert list(row) == ["order_id" if event.table == ORDERS else "item_id"]
        # The JSON encoding carries the schema's field names and nothing else.
        for event in txn.events:
            obj = json.loads(encode_event(event, "json"))
            assert set(obj) <= set(schema_fields)
            assert obj["txn_id"] == txn.txn_id


def test_amounts_are_exact_decimals() -> None:
    workload, txns = run(WorkloadConfig(orders=30, seed=11, max_items=6))
    for item in workload.final_rows()[ORDER_ITEMS]:
        assert item["amount"] == item["quantity"] * item["price"]
        assert item["price"].as_tuple().exponent == -2
    raw = next(e.row for e in txns[0].events if e.table == ORDER_ITEMS)
    assert raw is not None
    assert isinstance(decode_row(raw)["price"], Decimal)
    assert '"price":' in raw
    assert '"price":"' not in raw  # a JSON number, not a string


def test_updates_add_and_remove_items() -> None:
    _, txns = run(WorkloadConfig(orders=80, seed=2, update_ratio=0.5, delete_ratio=0.1))
    updates = [t for t in txns if t.kind == TxnKind.UPDATE]
    assert updates
    assert any(e.op == "DELETE" and e.table == ORDER_ITEMS for t in updates for e in t.events)
    deletes = [t for t in txns if t.kind == TxnKind.DELETE]
    assert deletes
    assert all(e.op == "DELETE" for t in deletes for e in t.events if e.type == "DATA")


def test_counts_match_the_events() -> None:
    workload, txns = run(WorkloadConfig(orders=25, partitions=3, seed=8))
    counts = workload.counts()
    assert counts.transactions == len(txns)
    assert counts.events == sum(len(t.events) for t in txns)
    data = sum(n for ops in counts.data_events.values() for n in ops.values())
    assert data == sum(t.data_events for t in txns)
    assert counts.data_rows == data
    final = workload.final_rows()
    assert counts.rows == {ORDERS: len(final[ORDERS]), ORDER_ITEMS: len(final[ORDER_ITEMS])}
    assert sum(counts.txns_by_kind.values()) == len(txns)
    assert len({t.txn_id for t in txns}) == len(txns)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"orders": -1},
        {"orders": 1, "partitions": 0},
        {"orders": 1, "max_items": 0},
        {"orders": 1, "update_ratio": 0.7, "delete_ratio": 0.3},
        {"orders": 1, "update_ratio": 1.5},
        {"orders": 1, "database": "demo; DROP"},
    ],
)
def test_invalid_config_is_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(DemoConfigError):
        WorkloadConfig(**kwargs)  # type: ignore[arg-type]


def test_row_as_object_splices_the_row_text_into_the_event() -> None:
    import json
    from decimal import Decimal

    from assembler import CodecSettings, make_decoder
    from assembler.events import Event
    from demo.generate import json_with_row_object

    row = '{"order_id":1,"total_amount":12.30}'
    raw = json_with_row_object(Event("t", "DATA", "demo", "orders", "UPSERT", row))
    assert json.loads(raw, parse_float=Decimal)["row"] == {
        "order_id": 1,
        "total_amount": Decimal("12.30"),
    }
    assert make_decoder(CodecSettings()).decode(raw).row == row
