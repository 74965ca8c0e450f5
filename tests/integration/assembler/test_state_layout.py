"""Slots and their keys against Spark's own hashing; the layout kept next to the checkpoint."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from app.state_layout import (
    LAYOUT_FILE,
    LayoutError,
    StateLayout,
    plan_layout,
    slot_of,
)
from common.spark_hash import partition_keys, spark_hash_int

pytestmark = pytest.mark.integration


def test_spark_hash_int_is_sparks_hash(spark: Any) -> None:
    values = [*range(-50, 300), 2**31 - 1, -(2**31), 123_456_789]
    df = spark.createDataFrame([(v,) for v in values], "v int")
    got = {r.v: r.h for r in df.selectExpr("v", "hash(v) AS h").collect()}
    assert {v: spark_hash_int(v) for v in values} == got


@pytest.mark.parametrize("slots", [1, 2, 3, 8, 16])
def test_slot_i_is_in_state_partition_i(spark: Any, slots: int) -> None:
    # repartition(n, col) is the hash partitioning a stateful operator's input gets.
    keys = partition_keys(slots)
    df = spark.createDataFrame([(k,) for k in keys], "k int").repartition(slots, "k")
    placed = {r.k: r.p for r in df.selectExpr("k", "spark_partition_id() AS p").collect()}
    assert [placed[k] for k in keys] == list(range(slots))


def test_a_topics_partitions_are_spread_evenly_over_the_slots(spark: Any) -> None:
    rows = [(topic, p) for topic in ("orders", "cdc.shop.items") for p in range(12)]
    df = spark.createDataFrame(rows, "topic string, partition int")
    keys = partition_keys(4)
    got = df.withColumn("slot", slot_of(4)).collect()
    for topic in ("orders", "cdc.shop.items"):
        slots = [keys.index(r.slot) for r in got if r.topic == topic]
        assert sorted(slots) == sorted(list(range(4)) * 3)
        # consecutive partitions, consecutive slots
        assert all((b - a) % 4 == 1 for a, b in itertools.pairwise(slots))


def _offsets(checkpoint: Path) -> None:
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("v1\n{}\n")


def test_a_new_checkpoint_gets_slots_and_keeps_their_number(spark: Any, tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    assert plan_layout(spark, str(checkpoint), 3) == StateLayout(3, timeouts=False)
    assert json.loads((checkpoint / LAYOUT_FILE).read_text()) == {
        "layout": "slots",
        "slots": 3,
        "timeouts": "on-data",
    }
    # Before the first batch nothing is frozen: a restart may still change the number.
    assert plan_layout(spark, str(checkpoint), 2).slots == 2
    _offsets(checkpoint)
    # Once Spark stored a batch, the partition-to-slot mapping must not move.
    assert plan_layout(spark, str(checkpoint), 8).slots == 2


def test_spark_timeouts_are_chosen_with_the_checkpoint_and_kept_with_it(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    idle = tmp_path / "idle"
    assert plan_layout(spark, str(idle), 2, idle_batches=True) == StateLayout(2, timeouts=True)
    assert json.loads((idle / LAYOUT_FILE).read_text())["timeouts"] == "processing-time"
    _offsets(idle)
    # The state's schema has the timeout column now: idle-batches off later keeps it.
    assert plan_layout(spark, str(idle), 2, idle_batches=False).timeouts is True

    busy = tmp_path / "busy"
    plan_layout(spark, str(busy), 2, idle_batches=False)
    _offsets(busy)
    with caplog.at_level(logging.WARNING):
        assert plan_layout(spark, str(busy), 2, idle_batches=True).timeouts is False
    assert str(busy) in caplog.text
    assert "Start a new checkpoint" in caplog.text


def test_a_slot_layout_from_before_the_timeouts_choice_keeps_spark_timeouts(
    spark: Any, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "ckpt"
    _offsets(checkpoint)
    (checkpoint / LAYOUT_FILE).write_text('{"layout": "slots", "slots": 4}')
    assert plan_layout(spark, str(checkpoint), 2) == StateLayout(4, timeouts=True)


def test_a_checkpoint_with_offsets_and_no_layout_is_from_before_slots(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = tmp_path / "ckpt"
    _offsets(checkpoint)
    with caplog.at_level(logging.WARNING):
        assert plan_layout(spark, str(checkpoint), 2).slots is None
    assert str(checkpoint) in caplog.text
    assert "how to move it to slots" in caplog.text
    assert not (checkpoint / LAYOUT_FILE).exists()


@pytest.mark.parametrize(
    "text",
    [
        '{"layout": "slots", "slots": 0}',
        '{"layout": "slots"}',
        '{"layout": "slots", "slots": 2, "timeouts": "never"}',
        "{not json",
        '"slots"',
    ],
)
def test_a_damaged_layout_file_stops_the_start_naming_it(
    spark: Any, tmp_path: Path, text: str
) -> None:
    checkpoint = tmp_path / "ckpt"
    _offsets(checkpoint)
    (checkpoint / LAYOUT_FILE).write_text(text)
    with pytest.raises(LayoutError, match=LAYOUT_FILE) as refused:
        plan_layout(spark, str(checkpoint), 2)
    assert str(checkpoint) in str(refused.value)
    assert "pipeline.checkpoint-location" in str(refused.value)
