from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from devstack.kafka import (
    BrokerStartError,
    KafkaBroker,
    create_topic,
    produce,
    start_broker,
    wait_until_ready,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def read_all(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes | None]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-read-all",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=count - len(out), timeout=1.0):
                assert msg.error() is None, msg.error()
                out.append(msg.value())
        return out
    finally:
        consumer.close()


def test_unique_topic_produce_and_read(
    kafka_broker: KafkaBroker, unique_topic: Callable[[int], str]
) -> None:
    topic = unique_topic(2)
    assert produce(kafka_broker.bootstrap, topic, [b"a", b"b", b"c"], partition=1) == 3
    assert read_all(kafka_broker.bootstrap, topic, 1, 3) == [b"a", b"b", b"c"]


def test_restart_keeps_port_and_data(fresh_kafka_broker: KafkaBroker) -> None:
    before = fresh_kafka_broker.handle
    create_topic(before.bootstrap, "survivor", 3)
    produce(before.bootstrap, "survivor", [b"x%d" % i for i in range(10)], partition=2)
    after = fresh_kafka_broker.restart()
    assert after.port == before.port
    assert after.pid != before.pid
    assert not before.is_running()
    assert read_all(after.bootstrap, "survivor", 2, 10) == [b"x%d" % i for i in range(10)]


def test_stop_is_by_pid_and_idempotent(tmp_path: Path) -> None:
    handle = start_broker(tmp_path / "k", port=0)
    assert handle.is_running()
    handle.stop()
    assert not handle.is_running()
    handle.stop()


def test_cli_prints_ready_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "devstack.kafka", "--port", "0", "--data-dir", str(tmp_path / "d")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("READY bootstrap=127.0.0.1:"), line
        bootstrap = line.split("=", 1)[1]
        create_topic(bootstrap, "cli", 1)
        proc.send_signal(15)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, 9)
            proc.wait()
    # The broker child is gone too: the data dir's broker no longer answers.
    with pytest.raises(BrokerStartError, match="did not answer"):
        wait_until_ready(bootstrap, 2.0)


def test_a_cluster_id_starting_with_a_dash_formats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One id in 64 starts with "-"; the storage tool must not read it as an option.
    import devstack.kafka.broker as broker

    monkeypatch.setattr(broker, "_cluster_id", lambda: "-AbCdEfGhIjKlMnOpQrStU")
    handle = start_broker(tmp_path / "dash", port=0)
    try:
        assert handle.is_running()
    finally:
        handle.stop()
