"""Bad-input injection against a real broker: the truth's coordinates are the topic's.

Records are consumed back (throwaway group, no offsets committed) and replayed through the real
assembler under the ``reject`` policy: its dead letters must be exactly the truth's expected
ones, and its complete transactions exactly the truth's tables.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assembler.codecs import CodecSettings, Encoding
from assembler.machine import TransactionAssembler
from assembler.output import KIND_REJECT, KIND_ROW, OutputRow
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings, Targets
from demo import generate as generate_cli
from demo.badinput import BadInputKind
from demo.deadletters import compare_dead_letters, expected_from_truth, group_rows
from demo.generate import GeneratorConfig, generate
from demo.model import TABLES, Tables, decode_row
from demo.truth import GroundTruth
from demo.verify import compare_table
from demo.workload import WorkloadConfig
from tests.integration.demo.test_generate_kafka import consume_all

DEMO_TARGETS = Targets(
    "demo", frozenset({"orders", "order_items"}), frozenset({"_cdc_progress", "_cdc_dead_letter"})
)
pytestmark = pytest.mark.integration

MAX_TXN_ROWS = 12
TXN_TIMEOUT_MS = 60_000


def assemble(messages: list[Any], encoding: Encoding) -> list[OutputRow]:
    assembler = TransactionAssembler(
        AssemblerSettings(
            codec=CodecSettings(encoding=encoding),
            max_txn_rows=MAX_TXN_ROWS,
            txn_timeout_ms=TXN_TIMEOUT_MS,
            targets=DEMO_TARGETS,
        )
    )
    by_partition: dict[int, list[SourceRecord]] = defaultdict(list)
    for m in messages:
        by_partition[m.partition()].append(
            SourceRecord(m.topic(), m.partition(), m.offset(), m.value())
        )
    outputs: list[OutputRow] = []
    for records in by_partition.values():
        step = assembler.process(None, records, now_ms=0)
        outputs += step.outputs
        # Only the never-ending (txn-timeout) transactions are left open; time them out.
        step = assembler.expire(step.state, now_ms=TXN_TIMEOUT_MS)
        assert step.timeout_at_ms is None
        outputs += step.outputs
    return outputs


def check_against_truth(messages: list[Any], truth: GroundTruth, encoding: Encoding) -> None:
    assert truth.dead_letters is not None
    outputs = assemble(messages, encoding)
    report = group_rows(
        (o.topic, o.partition, o.first_offset, o.row_seq, o.txn_id, o.reason)
        for o in outputs
        if o.kind == KIND_REJECT
    )
    expected = expected_from_truth(truth.dead_letters)
    comparison = compare_dead_letters(report, expected, [truth.meta["topic"]])
    assert comparison.ok, comparison.examples
    assert len(report.transactions) == len(expected)
    tables = Tables()
    for o in outputs:
        if o.kind == KIND_ROW:
            assert o.table is not None
            assert o.row is not None
            tables.apply(o.table, o.op or "UPSERT", decode_row(o.row))
    for table in TABLES:  # a truth read from a file holds decimals as strings
        assert compare_table(table, truth.tables[table], tables.rows[table].values()).ok


def test_every_kind_through_a_real_topic(
    kafka_broker: Any, unique_topic: Callable[[int], str]
) -> None:
    topic = unique_topic(3)
    config = GeneratorConfig(
        bootstrap=kafka_broker.bootstrap,
        topic=topic,
        workload=WorkloadConfig(orders=30, partitions=3, seed=5, max_items=4),
        bad_inputs=dict.fromkeys(BadInputKind, 2),
        max_txn_rows=MAX_TXN_ROWS,
    )
    result = generate(config)
    assert len(result.bad_transactions) == 2 * len(BadInputKind)
    assert result.delivered == result.events
    assert result.events == result.counts.events + result.bad_events

    messages = consume_all(kafka_broker.bootstrap, topic, 3, result.events)
    assert len(messages) == result.events
    # The coordinates in the truth are where the bad transactions' first records landed.
    at = {(m.partition(), m.offset()): m for m in messages}
    for sent in result.bad_transactions:
        first = at[(sent.txn.partition, sent.first_offset)]
        assert first.key() == sent.txn.key
    assert result.truth.dead_letters is not None
    expected = result.truth.dead_letters["expected"]
    assert all(expected[k.value]["transactions"] == 2 for k in BadInputKind)
    check_against_truth(messages, result.truth, "json")


def test_cli_bad_input_writes_expected_dead_letters(kafka_broker: Any, tmp_path: Path) -> None:
    topic = f"demo-bad-{uuid.uuid4().hex[:8]}"
    truth_path = tmp_path / "truth.json"
    code = generate_cli.main(
        [
            "--bootstrap",
            kafka_broker.bootstrap,
            "--topic",
            topic,
            "--partitions",
            "2",
            "--orders",
            "10",
            "--seed",
            "8",
            "--encoding",
            "avro",
            "--max-items",
            "3",
            "--truth",
            str(truth_path),
            "--create-topic",
            "--bad-input",
            "undecodable:2",
            "--bad-input",
            "txn-too-large",
            "--bad-input",
            "no-begin",
            "--bad-input",
            "no-begin",
            "--bad-input",
            "txn-timeout:2",
            "--max-txn-rows",
            str(MAX_TXN_ROWS),
        ]
    )
    assert code == 0
    truth = GroundTruth.read(truth_path)
    assert truth.dead_letters is not None
    expected = truth.dead_letters["expected"]
    assert expected["undecodable"]["transactions"] == 2
    assert expected["no-begin"]["transactions"] == 2
    assert expected["txn-too-large"]["transactions"] == 1
    assert expected["txn-timeout"]["transactions"] == 2
    assert expected["txn-too-large"]["records"] >= MAX_TXN_ROWS + 3
    assert truth.dead_letters["max_txn_rows"] == MAX_TXN_ROWS
    sent = sum(t["sent_records"] for t in truth.dead_letters["transactions"])
    total = truth.counts["events"] + sent
    messages = consume_all(kafka_broker.bootstrap, topic, 2, total)
    assert len(messages) == total
    check_against_truth(messages, truth, "avro")


def test_cli_refuses_unknown_kind(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--bootstrap", "x:1", "--topic", "t", "--partitions", "1", "--orders", "1"]
    assert generate_cli.main([*args, "--bad-input", "nonsense"]) == 2
    assert "unknown kind" in capsys.readouterr().err
    assert generate_cli.main([*args, "--bad-input", "txn-too-large"]) == 2
    assert "--max-txn-rows" in capsys.readouterr().err
