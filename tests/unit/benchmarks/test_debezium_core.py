"""The Debezium core benchmark's backlog and its three reading orders (the harness, no timing)."""

from __future__ import annotations

import pytest

from benchmarks.debezium_core import backlog, main, run

pytestmark = pytest.mark.unit


def test_backlog_is_one_begin_and_end_per_transaction_and_its_rows() -> None:
    markers, data = backlog(3, 2)
    assert len(markers) == 6
    assert len(data) == 9
    assert [r.offset for r in markers] == list(range(6))
    assert sorted({r.topic for r in data}) == ["shop.public.order_items", "shop.public.orders"]


@pytest.mark.parametrize("order", ["in step", "markers first", "data first"])
def test_every_order_emits_every_row_once(order: str) -> None:
    markers, data = backlog(50, 3)
    calls = {
        "in step": [markers[:50] + data[:100], markers[50:] + data[100:]],
        "markers first": [markers, data[:120], data[120:]],
        "data first": [data[:120], data[120:], markers],
    }[order]
    result = run(calls)
    assert result.rows == 50 * 4
    assert result.records == len(markers) + len(data)


def test_main_runs_the_three_orders(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--txns", "30", "--batch", "40", "--items", "2"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("in step", "markers first", "data first"))
