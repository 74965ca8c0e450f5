"""The generator against a real broker: counts, partitions and BEGIN..END framing read back.

The consumer here reads with a throwaway group and never commits offsets (nothing to resume).
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from assembler.codecs import CodecSettings, make_decoder
from assembler.events import Event
from demo import generate as generate_cli
from demo.errors import TopicError
from demo.generate import GeneratorConfig, generate
from demo.model import TABLES, Tables, decode_row
from demo.truth import GroundTruth
from demo.verify import compare_table
from demo.workload import WorkloadConfig, partition_for

pytestmark = pytest.mark.integration


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,  # read-only check: no offsets stored
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list[Any] = []
    try:
        for _ in range(60):
            if len(messages) >= expected:
                break
            for msg in consumer.consume(num_messages=expected - len(messages), timeout=1.0):
                assert msg.error() is None, msg.error()
                messages.append(msg)
        # Nothing beyond what the generator said it sent.
        messages += [m for m in consumer.consume(num_messages=1, timeout=0.5) if not m.error()]
    finally:
        consumer.close()
    return messages


def check_framing(messages: list[Any], decode: Callable[[bytes], Event], n: int) -> Tables:
    """Each partition holds whole BEGIN, DATA..., END transactions; replay them into tables."""
    by_partition: dict[int, list[Any]] = defaultdict(list)
    for msg in messages:
        by_partition[msg.partition()].append(msg)
    tables = Tables()
    txns = 0
    for partition, msgs in by_partition.items():
        msgs.sort(key=lambda m: m.offset())
        open_txn: Event | None = None
        data: list[Event] = []
        for msg in msgs:
            event = decode(msg.value())
            order_id = int(msg.key())
            assert partition == partition_for(order_id, n)
            if event.type == "TXN_BEGIN":
                assert open_txn is None, f"BEGIN inside {open_txn}"
                open_txn, data = event, []
            elif event.type == "DATA":
                assert open_txn is not None
                assert event.txn_id == open_txn.txn_id
                data.append(event)
            else:
                assert event.type == "TXN_END"
                assert open_txn is not None
                assert event.txn_id == open_txn.txn_id
                assert event.event_count == len(data)
                for d in data:
                    assert d.table is not None
                    assert d.row is not None
                    tables.apply(d.table, d.op or "UPSERT", decode_row(d.row))
                open_txn = None
                txns += 1
        assert open_txn is None, "partition ends inside a transaction"
    assert txns > 0
    return tables


def test_generate_json_and_read_back(kafka_broker: Any, unique_topic: Callable[[int], str]) -> None:
    topic = unique_topic(3)
    config = GeneratorConfig(
        bootstrap=kafka_broker.bootstrap,
        topic=topic,
        workload=WorkloadConfig(orders=40, partitions=3, seed=7),
    )
    result = generate(config)
    assert result.delivered == result.events
    assert sum(result.events_per_partition.values()) == result.events
    assert set(result.txns_per_partition) == {0, 1, 2}

    messages = consume_all(kafka_broker.bootstrap, topic, 3, result.events)
    assert len(messages) == result.events
    per_partition: dict[int, int] = defaultdict(int)
    for m in messages:
        per_partition[m.partition()] += 1
    assert dict(per_partition) == dict(result.events_per_partition)

    decoder = make_decoder(CodecSettings(encoding="json"))
    tables = check_framing(messages, decoder.decode, 3)
    assert tables == Tables.from_rows(result.truth.tables)
    # JSON values carry the schema's field names.
    assert set(json.loads(messages[0].value())) <= {
        "txn_id",
        "type",
        "database",
        "table",
        "op",
        "row",
        "source_ts_ms",
        "event_count",
    }


def test_cli_creates_topic_writes_truth_avro(kafka_broker: Any, tmp_path: Path) -> None:
    topic = f"demo-cli-{uuid.uuid4().hex[:8]}"
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
            "15",
            "--seed",
            "3",
            "--encoding",
            "avro",
            "--truth",
            str(truth_path),
            "--create-topic",
            "--rate",
            "500",
        ]
    )
    assert code == 0
    truth = GroundTruth.read(truth_path)
    expected = truth.counts["events"]
    messages = consume_all(kafka_broker.bootstrap, topic, 2, expected)
    assert len(messages) == expected
    decoder = make_decoder(CodecSettings(encoding="avro"))
    tables = check_framing(messages, decoder.decode, 2)
    for table in TABLES:  # the file holds decimals as strings: compare normalized
        assert compare_table(table, truth.tables[table], tables.rows[table].values()).ok
    assert truth.counts["rows"] == {k: len(v) for k, v in truth.tables.items()}


def test_too_few_partitions_is_refused(
    kafka_broker: Any, unique_topic: Callable[[int], str]
) -> None:
    topic = unique_topic(1)
    config = GeneratorConfig(
        bootstrap=kafka_broker.bootstrap,
        topic=topic,
        workload=WorkloadConfig(orders=1, partitions=2),
    )
    with pytest.raises(TopicError, match="has 1 partitions"):
        generate(config)
