"""Dead-letter grouping, reason mapping, comparison with the truth, and the verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from demo.deadletters import (
    OTHER,
    ExpectedDeadLetter,
    compare_dead_letters,
    dead_letter_query,
    expected_from_truth,
    group_rows,
    kind_of_reason,
)
from demo.errors import DemoConfigError
from demo.invariants import InvariantReport
from demo.truth import GroundTruth
from demo.verify import Verdict

pytestmark = pytest.mark.unit


def rows_of(topic: str, partition: int, first: int, n: int, reason: str) -> list[tuple[Any, ...]]:
    later = reason.split(":")[0] + ": later event of transaction 'x', which was rejected"
    return [(topic, partition, first, seq, "x", reason if seq == 0 else later) for seq in range(n)]


def test_kind_of_reason() -> None:
    assert kind_of_reason("undecodable: record at offset 3 cannot be decoded") == "undecodable"
    assert kind_of_reason("TXN-TOO-LARGE: big") == "txn-too-large"
    assert kind_of_reason("txn-timeout: open for 10 ms") == "txn-timeout"
    assert kind_of_reason("event_count mismatch") == OTHER
    assert kind_of_reason(None) == OTHER
    assert kind_of_reason("") == OTHER


def test_group_rows_by_coordinates_kind_from_first_row() -> None:
    rows = [
        *rows_of("t", 0, 10, 4, "no-begin: DATA without BEGIN"),
        *rows_of("t", 1, 10, 2, "undecodable: bad"),
        ("t", 0, 20, 1, None, "undecodable: lone"),
    ]
    report = group_rows(reversed(rows))  # order of the SELECT does not matter
    assert [(t.coordinates, t.kind, t.records) for t in report.transactions] == [
        (("t", 0, 10), "no-begin", 4),
        (("t", 0, 20), "undecodable", 1),
        (("t", 1, 10), "undecodable", 2),
    ]
    assert report.records == 7
    assert report.by_kind()["undecodable"] == (2, 3)
    assert report.by_kind(topic="other")["undecodable"] == (0, 0)
    summary = report.to_dict()
    assert summary["by_kind"]["no-begin"] == {"transactions": 1, "records": 4}


def test_comparison_counts_missing_unexpected_and_wrong_records() -> None:
    rows = [
        *rows_of("t", 0, 10, 4, "no-begin: x"),  # as expected
        *rows_of("t", 0, 30, 3, "undecodable: x"),  # expected with 5 records
        *rows_of("t", 1, 7, 2, "txn-id-mismatch: x"),  # expected as unknown-type
        *rows_of("t", 2, 1, 1, "event-count-mismatch: x"),  # not expected at all
        *rows_of("elsewhere", 0, 0, 9, "undecodable: x"),  # another topic: not judged
    ]
    expected = [
        ExpectedDeadLetter("no-begin", "t", 0, 10, 4),
        ExpectedDeadLetter("undecodable", "t", 0, 30, 5),
        ExpectedDeadLetter("unknown-type", "t", 1, 7, 2),
        ExpectedDeadLetter("begin-while-open", "t", 3, 0, 2),  # never dead-lettered
    ]
    cmp = compare_dead_letters(group_rows(rows), expected, ["t"])
    assert not cmp.ok
    assert cmp.kind("no-begin").ok
    u = cmp.kind("undecodable")
    assert (u.wrong_records, u.missing, u.unexpected) == (1, 0, 0)
    assert (u.expected_records, u.actual_records) == (5, 3)
    assert cmp.kind("unknown-type").missing == 1
    assert cmp.kind("txn-id-mismatch").unexpected == 1
    assert cmp.kind("event-count-mismatch").unexpected == 1
    assert cmp.kind("begin-while-open").missing == 1
    assert cmp.other_topics == 1
    assert any("missing begin-while-open" in e for e in cmp.examples)
    assert any("3 records, want 5" in e for e in cmp.examples)

    exact = compare_dead_letters(group_rows(rows[:4]), expected[:1], ["t"])
    assert exact.ok
    assert compare_dead_letters(group_rows([]), [], ["t"]).ok


def test_query_is_one_validated_statement() -> None:
    sql = dead_letter_query("demo_1", "_cdc_dead_letter")
    assert sql.count("SELECT") == 1
    assert "`demo_1`.`_cdc_dead_letter`" in sql
    with pytest.raises(DemoConfigError):
        dead_letter_query("demo", "x`; DROP TABLE y")


def test_truth_round_trip_with_dead_letters(tmp_path: Path) -> None:
    section = {
        "expected": {"no-begin": {"transactions": 1, "records": 3}},
        "max_txn_rows": None,
        "transactions": [
            {
                "kind": "no-begin",
                "txn_id": "b-1",
                "topic": "t",
                "partition": 2,
                "first_offset": 17,
                "records": 3,
                "sent_records": 3,
            }
        ],
    }
    truth = GroundTruth("demo", {"orders": [], "order_items": []}, {}, {"topic": "t"}, section)
    path = tmp_path / "truth.json"
    truth.write(path)
    back = GroundTruth.read(path)
    assert back.dead_letters == section
    assert back.meta == {"topic": "t"}
    assert expected_from_truth(section) == (ExpectedDeadLetter("no-begin", "t", 2, 17, 3, "b-1"),)
    old = GroundTruth("demo", {"orders": [], "order_items": []}, {}, {})
    old.write(path)
    assert GroundTruth.read(path).dead_letters is None


def test_verdict_includes_dead_letters() -> None:
    ok = InvariantReport(orders=0, items=0)
    report = group_rows(rows_of("t", 0, 5, 2, "no-begin: x"))
    good = compare_dead_letters(report, [ExpectedDeadLetter("no-begin", "t", 0, 5, 2)], ["t"])
    bad = compare_dead_letters(report, [], ["t"])
    assert Verdict("demo", ok, dead_letter_report=report, dead_letters=good).passed
    verdict = Verdict("demo", ok, dead_letter_report=report, dead_letters=bad)
    assert not verdict.passed
    text = verdict.render()
    assert "dead letters" in text
    assert "unexpected no-begin dead letter at topic=t partition=0 first_offset=5" in text
    assert "VERDICT: FAIL" in text
    summary = json.loads(json.dumps(verdict.to_dict()))
    assert summary["dead_letters"]["kinds"]["no-begin"]["unexpected"] == 1
    assert summary["dead_letter_table"]["records"] == 2
