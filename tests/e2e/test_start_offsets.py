"""Where a restarted pipeline reads from, when the checkpoint and Kafka disagree (review findings
1 and 2): a re-created topic that grew past the checkpoint's offsets is caught, not skipped; a
lost checkpoint resumes after StarRocks' last commit, whatever ``starting-offsets`` says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from devstack.kafka.admin import create_topic
from devstack.stack import LocalStack
from tests.e2e.test_kafka_behaviour import (
    caught_up,
    order_ids,
    pipeline,
    produce_orders,
    stack,  # noqa: F401 - the fixture
    wait_exit,
)

pytestmark = pytest.mark.e2e


def recreate(local: LocalStack, topic: str) -> None:
    """Delete ``topic`` and create it again, empty, under a new topic id."""
    admin = AdminClient({"bootstrap.servers": local.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    create_topic(local.bootstrap, topic, 1)


@pytest.mark.parametrize(
    "new_orders",
    # 6 records, below the checkpoint's offset 15 (Spark alone would fail on them), and 30,
    # past it (Spark alone would read on from there and skip the first 15 without a word).
    [2, 10],
    ids=["below-the-checkpoint", "grown-past-the-checkpoint"],
)
def test_recreated_topic_stops_before_reading(
    stack: LocalStack,  # noqa: F811 - the fixture
    tmp_path: Path,
    new_orders: int,
) -> None:
    topic = "cdc.recreated"
    create_topic(stack.bootstrap, topic, 1)
    produce_orders(stack, topic, range(5))
    run = pipeline(stack, tmp_path, topic)
    assert caught_up(stack, topic, {0: 15})
    assert run.stop() == 0

    recreate(stack, topic)
    produce_orders(stack, topic, range(100, 100 + new_orders))

    failed = pipeline(stack, tmp_path, topic)
    assert wait_exit(failed, 240) == 1
    log = "\n".join(failed.lines)
    # The topic id kept with the checkpoint catches it before Spark reads (app/resume.py).
    assert f"topic {topic} was deleted and re-created" in log, log[-3000:]
    assert "new pipeline.checkpoint-location" in log
    assert order_ids(stack) == set(range(5))


def test_recreated_topic_with_its_checkpoint_lost_is_not_resumed_from_old_offsets(
    stack: LocalStack,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    """No checkpoint to hold the old topic id: the progress rows hold it (12-08). Resuming
    from their offsets (15) would skip the new topic's first five orders."""
    topic = "cdc.recreated.lost"
    create_topic(stack.bootstrap, topic, 1)
    produce_orders(stack, topic, range(5))
    run = pipeline(stack, tmp_path / "first", topic)
    assert caught_up(stack, topic, {0: 15})
    assert run.stop() == 0

    recreate(stack, topic)
    produce_orders(stack, topic, range(100, 110))

    failed = pipeline(stack, tmp_path / "second", topic)
    assert wait_exit(failed, 240) == 1
    log = "\n".join(failed.lines)
    assert "written for a topic since deleted and re-created" in log, log[-3000:]
    assert "source.starting-offsets=earliest" in log
    assert order_ids(stack) == set(range(5))


def test_lost_checkpoint_resumes_after_the_last_commit_not_from_latest(
    stack: LocalStack,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    topic = "cdc.lostckpt"
    create_topic(stack.bootstrap, topic, 1)
    produce_orders(stack, topic, range(5))
    run = pipeline(stack, tmp_path / "first", topic)
    assert caught_up(stack, topic, {0: 15})
    assert run.stop() == 0
    produce_orders(stack, topic, range(5, 8))  # written while the pipeline is down

    # A new checkpoint folder (the old one lost), and starting-offsets=latest.
    resumed = pipeline(stack, tmp_path / "second", topic, "source.starting-offsets=latest")
    try:
        assert caught_up(stack, topic, {0: 24})
        assert order_ids(stack) == set(range(8))
        assert any("resuming from StarRocks' progress table" in line for line in resumed.lines)
    finally:
        assert resumed.stop() == 0
