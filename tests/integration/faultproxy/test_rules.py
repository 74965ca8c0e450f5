"""The rule book's matching and selection order (pure; lives here with the proxy's tests)."""

from __future__ import annotations

import pytest

from devstack.faultproxy import FaultKind, FaultRule, FaultRuleError, Hop, Op
from devstack.faultproxy.rules import FaultBook, classify_path

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("path", "op"),
    [
        ("/api/transaction/begin", Op.BEGIN),
        ("/api/transaction/COMMIT", Op.COMMIT),  # the FE registers ops case-insensitively
        ("/api/transaction/load", Op.LOAD),
        ("/api/transaction/list", Op.OTHER),
        ("/api/demo/get_load_state", Op.GET_LOAD_STATE),
        ("/api/demo/orders/_stream_load", Op.STREAM_LOAD),
        ("/api/health", Op.OTHER),
    ],
)
def test_classify_path(path: str, op: Op) -> None:
    assert classify_path(path) is op


def test_selection_order_hop_and_counts() -> None:
    book = FaultBook(seed=1)
    book.add(FaultRule(FaultKind.DROP_RESPONSE, "commit"))
    book.add(FaultRule(FaultKind.HTTP_ERROR, "commit", hop=Hop.BE, status=500))
    book.add(FaultRule(FaultKind.DELAY, "any", count=2, seconds=0.1))
    book.add(FaultRule(FaultKind.JITTER, "any", count=None, min_ms=5, max_ms=10))
    # Jitter is independent of the action rule.
    assert 0.005 <= book.take_jitter(Op.BEGIN, Hop.FE) <= 0.010
    # FE hop: the hop=be error does not match, the delay (next in order) does.
    first = book.take_pre(Op.COMMIT, Hop.FE)
    assert first is not None
    assert first.kind is FaultKind.DELAY
    second = book.take_pre(Op.COMMIT, Hop.BE)
    assert second is not None
    assert second.kind is FaultKind.HTTP_ERROR
    third = book.take_pre(Op.LOAD, Hop.BE)
    assert third is not None
    assert third.kind is FaultKind.DELAY
    assert book.take_pre(Op.COMMIT, Hop.BE) is None  # both used up
    assert book.take_post(Op.BEGIN, Hop.FE) is None
    drop = book.take_post(Op.COMMIT, Hop.FE)
    assert drop is not None
    assert drop.kind is FaultKind.DROP_RESPONSE
    snap = book.snapshot()
    assert [r["kind"] for r in snap["rules"]] == ["jitter"]  # count=None stays armed
    assert snap["injected"] == {
        "jitter": {"begin": 1},
        "delay": {"commit": 1, "load": 1},
        "http_error": {"commit": 1},
        "drop_response": {"commit": 1},
    }


@pytest.mark.parametrize(
    "raw",
    [
        {"op": "commit"},
        {"kind": "nope"},
        {"kind": "delay", "op": "commitx"},
        {"kind": "delay", "count": 0},
        {"kind": "http_error", "status": 99},
        {"kind": "jitter", "min_ms": 10, "max_ms": 5},
        {"kind": "delay", "extra": 1},
        [],
    ],
)
def test_bad_rules_are_rejected(raw: object) -> None:
    with pytest.raises(FaultRuleError):
        FaultRule.from_json(raw)


def test_rule_round_trips() -> None:
    rule = FaultRule(FaultKind.HTTP_ERROR, "load", 3, Hop.BE, status=500, body="x")
    assert FaultRule.from_json(rule.to_json()) == rule
