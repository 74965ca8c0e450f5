"""The cdc-kafka source against a real broker and real Spark (local[2])."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from app.sources import SCHEMA, parse_options, read_kafka_stream
from app.sources.errors import KafkaSourceError
from app.sources.range_reader import read_range
from common.errors import ConfigError, Transient
from devstack.kafka import KafkaBroker, add_partitions, produce
from tests.integration.sources.helpers import Collected, run_available_now

pytestmark = pytest.mark.integration

TopicFactory = Callable[[int], str]


def options(bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        # Tests must fail fast rather than wait Spark's default two minutes.
        "kafkaConsumer.pollTimeoutMs": "20000",
        **extra,
    }


def fill(bootstrap: str, topic: str, counts: dict[int, int], tag: str = "") -> None:
    for partition, count in counts.items():
        values = [f"{tag}{partition}-{i}".encode() for i in range(count)]
        produce(bootstrap, topic, values, partition=partition)


def expected(topic: str, counts: dict[int, int], first: dict[int, int] | None = None) -> set[Any]:
    first = first or {}
    return {
        (topic, p, o)
        for p, n in counts.items()
        for o in range(first.get(p, 0), first.get(p, 0) + n)
    }


def keys(got: Collected) -> list[tuple[str, int, int]]:
    return [(t, p, o) for t, p, o, _ in got.rows]


def assert_ordered(got: Collected) -> None:
    for tp, offsets in got.per_partition().items():
        assert offsets == sorted(offsets), f"{tp} out of order"


def test_schema_is_the_official_connectors(spark: Any, kafka_broker: KafkaBroker) -> None:
    df = read_kafka_stream(spark, options(kafka_broker.bootstrap, "any"))
    assert df.schema == SCHEMA
    assert [f.name for f in df.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]


def test_reads_every_record_exactly_once_in_offset_order(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(3)
    counts = {0: 7, 1: 0, 2: 13}
    fill(kafka_broker.bootstrap, topic, counts)

    got = run_available_now(spark, options(kafka_broker.bootstrap, topic), tmp_path / "cp")

    assert len(keys(got)) == len(set(keys(got))) == 20
    assert set(keys(got)) == expected(topic, counts)
    assert_ordered(got)
    values = {(p, o): v for _, p, o, v in got.rows}
    assert values[(2, 12)] == b"2-12"
    # Spark's checkpoint is the only owner of offsets: no consumer group ever committed.
    groups = AdminClient({"bootstrap.servers": kafka_broker.bootstrap}).list_consumer_groups()
    assert not [g.group_id for g in groups.result(15).valid if g.group_id.startswith("cdc-kafka")]


def test_rows_carry_key_timestamp_and_type(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(1)
    before = time.time()
    produce(kafka_broker.bootstrap, topic, [b"v"], partition=0, key=b"k")
    rows: list[Any] = []
    query = (
        read_kafka_stream(spark, options(kafka_broker.bootstrap, topic))
        .writeStream.foreachBatch(lambda df, _id: rows.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    [row] = rows
    assert bytes(row["key"]) == b"k"
    assert row["timestampType"] == 0  # CreateTime, as the official connector reports it
    assert abs(row["timestamp"].timestamp() - before) < 60


def test_max_offsets_per_trigger_splits_batches(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(2)
    counts = {0: 20, 1: 10}
    fill(kafka_broker.bootstrap, topic, counts)

    got = run_available_now(
        spark,
        options(kafka_broker.bootstrap, topic, maxOffsetsPerTrigger="10"),
        tmp_path / "cp",
    )

    # Shares are floored per partition as in Spark: 9 rows per batch here, so 4 batches.
    assert [len(rows) for _, rows in sorted(got.batches.items())] == [9, 9, 9, 3]
    assert set(keys(got)) == expected(topic, counts)
    assert len(keys(got)) == 30
    assert_ordered(got)  # across batches too: later batches hold later offsets


def test_restart_from_checkpoint_continues_without_loss_or_duplicates(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(2)
    fill(kafka_broker.bootstrap, topic, {0: 5, 1: 3}, tag="a")
    opts = options(kafka_broker.bootstrap, topic)
    first = run_available_now(spark, opts, tmp_path / "cp")
    fill(kafka_broker.bootstrap, topic, {0: 4, 1: 6}, tag="b")

    second = run_available_now(spark, opts, tmp_path / "cp")

    assert set(keys(first)) == expected(topic, {0: 5, 1: 3})
    assert set(keys(second)) == expected(topic, {0: 4, 1: 6}, first={0: 5, 1: 3})
    assert min(second.batches) > max(first.batches)
    assert all(v.startswith(b"b") for *_, v in second.rows)


def test_replayed_batch_reads_exactly_the_same_records(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(3)
    fill(kafka_broker.bootstrap, topic, {0: 6, 1: 6, 2: 6})
    opts = options(kafka_broker.bootstrap, topic, maxOffsetsPerTrigger="8")
    checkpoint = tmp_path / "cp"
    first = run_available_now(spark, opts, checkpoint)
    last = max(first.batches)
    # A crash after the batch ran but before Spark recorded it as committed: Spark must run
    # the same batch id again, with the offsets from its offset log.
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    fill(kafka_broker.bootstrap, topic, {0: 2})  # newer data must not leak into the replay

    replay = run_available_now(spark, opts, checkpoint)

    assert min(replay.batches) == last
    assert sorted(replay.batches[last]) == sorted(first.batches[last])
    assert set(keys(replay)) - set(keys(first)) == expected(topic, {0: 2}, first={0: 6})


def test_starting_offsets_json(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(3)
    fill(kafka_broker.bootstrap, topic, {0: 5, 1: 5, 2: 5})
    start = f'{{"{topic}":{{"0":3,"1":-2,"2":-1}}}}'

    got = run_available_now(
        spark, options(kafka_broker.bootstrap, topic, startingOffsets=start), tmp_path / "cp"
    )

    assert set(keys(got)) == expected(topic, {0: 2, 1: 5}, first={0: 3})


def test_starting_offsets_json_must_cover_every_partition(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(2)
    start = f'{{"{topic}":{{"0":0}}}}'
    with pytest.raises(Exception, match=f"missing: {topic}/1"):
        run_available_now(
            spark, options(kafka_broker.bootstrap, topic, startingOffsets=start), tmp_path / "cp"
        )


def test_starting_offsets_latest_reads_only_new_records(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(2)
    fill(kafka_broker.bootstrap, topic, {0: 4, 1: 4}, tag="old")
    got = Collected()

    def on_batch(df: Any, batch_id: int) -> None:
        got.batches[batch_id] = [
            (r["topic"], r["partition"], r["offset"], bytes(r["value"])) for r in df.collect()
        ]

    query = (
        read_kafka_stream(spark, options(kafka_broker.bootstrap, topic, startingOffsets="latest"))
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: len(query.recentProgress) >= 2, 90, "query did not start")
        fill(kafka_broker.bootstrap, topic, {0: 2, 1: 1}, tag="new")
        wait_for(lambda: len(got.rows) >= 3, 90, "new records did not arrive")
        time.sleep(1.5)
    finally:
        query.stop()
    assert set(keys(got)) == expected(topic, {0: 2, 1: 1}, first={0: 4, 1: 4})
    assert len(got.rows) == 3


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_new_partitions_are_read_from_their_start(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(1)
    fill(kafka_broker.bootstrap, topic, {0: 3})
    opts = options(kafka_broker.bootstrap, topic)
    first = run_available_now(spark, opts, tmp_path / "cp")
    add_partitions(kafka_broker.bootstrap, topic, 3)
    fill(kafka_broker.bootstrap, topic, {1: 2, 2: 4})

    second = run_available_now(spark, opts, tmp_path / "cp")

    assert set(keys(first)) == expected(topic, {0: 3})
    assert set(keys(second)) == expected(topic, {1: 2, 2: 4})


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        future.result(15)


def test_fail_on_data_loss_names_topic_partition_and_offsets(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(1)
    fill(kafka_broker.bootstrap, topic, {0: 10})
    opts = options(kafka_broker.bootstrap, topic)
    run_available_now(spark, opts, tmp_path / "cp")
    fill(kafka_broker.bootstrap, topic, {0: 10}, tag="b")
    delete_records_before(kafka_broker.bootstrap, topic, 0, 15)  # as retention would

    with pytest.raises(Exception, match=rf"data loss on {topic}/0: .*\[10, 20\).*\[15, 20\)"):
        run_available_now(spark, opts, tmp_path / "cp")

    # failOnDataLoss=false: the same checkpoint continues with what still exists.
    lenient = {**opts, "failOnDataLoss": "false"}
    got = run_available_now(spark, lenient, tmp_path / "cp")
    assert set(keys(got)) == expected(topic, {0: 5}, first={0: 15})


def test_kafka_options_reach_the_client(
    spark: Any, kafka_broker: KafkaBroker, unique_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = unique_topic(1)
    fill(kafka_broker.bootstrap, topic, {0: 3})
    good = options(
        kafka_broker.bootstrap,
        topic,
        **{"kafka.security.protocol": "PLAINTEXT", "kafka.client.id": "pass-through"},
    )
    assert len(run_available_now(spark, good, tmp_path / "ok").rows) == 3

    # A setting librdkafka does not know proves the option is handed over, not dropped.
    bad = options(kafka_broker.bootstrap, topic, **{"kafka.no.such.setting": "1"})
    with pytest.raises(Exception, match=r"no\.such\.setting"):
        run_available_now(spark, bad, tmp_path / "bad")


def test_forbidden_client_settings_fail_before_the_query(
    spark: Any, kafka_broker: KafkaBroker
) -> None:
    opts = options(kafka_broker.bootstrap, "x", **{"kafka.enable.auto.commit": "true"})
    with pytest.raises(ConfigError, match=r"kafka\.enable\.auto\.commit"):
        read_kafka_stream(spark, opts)


def test_unreadable_range_fails_transiently_and_names_the_partition(tmp_path: Path) -> None:
    from devstack.kafka import create_topic

    broker = KafkaBroker(tmp_path / "kafka")
    bootstrap = broker.start().bootstrap
    try:
        create_topic(bootstrap, "gone", 1)
        fill(bootstrap, "gone", {0: 3})
    finally:
        broker.stop()
    opts = parse_options(
        options(
            bootstrap,
            "gone",
            **{
                "kafkaConsumer.pollTimeoutMs": "2000",
                "fetchOffset.numRetries": "1",
                "fetchOffset.retryIntervalMs": "100",
            },
        )
    )
    started = time.monotonic()
    with pytest.raises(KafkaSourceError, match="gone/0") as info:
        list(read_range(opts, "gone", 0, 0, 3))
    assert isinstance(info.value, Transient)
    assert time.monotonic() - started < 30


def test_broker_restart_mid_stream_loses_nothing(
    spark: Any, fresh_kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    from devstack.kafka import create_topic

    bootstrap = fresh_kafka_broker.bootstrap
    topic = "restart"
    create_topic(bootstrap, topic, 2)
    fill(bootstrap, topic, {0: 5, 1: 5}, tag="a")
    got = Collected()

    def on_batch(df: Any, batch_id: int) -> None:
        got.batches[batch_id] = [
            (r["topic"], r["partition"], r["offset"], bytes(r["value"])) for r in df.collect()
        ]

    query = (
        read_kafka_stream(spark, options(bootstrap, topic, **{"fetchOffset.numRetries": "20"}))
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: len(got.rows) >= 10, 90, "first records did not arrive")
        fresh_kafka_broker.restart()
        fill(bootstrap, topic, {0: 3, 1: 4}, tag="b")
        wait_for(lambda: len(got.rows) >= 17, 120, "records after restart did not arrive")
        time.sleep(1.0)
        assert query.exception() is None
    finally:
        query.stop()
    assert len(got.rows) == 17
    assert set(keys(got)) == expected(topic, {0: 8, 1: 9})
