"""Kafka and StarRocks are checked before Spark starts: a wrong address fails in seconds with one
line."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.config import load_config
from app.preflight import PreflightError, check_kafka, describe_topics
from tests.fixtures.kafka import ExternalBroker

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def run_app(*sets: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``app/main.py`` with ``--set`` overrides: its output and how long it took."""
    started = time.monotonic()
    args = [arg for value in sets for arg in ("--set", value)]
    done = subprocess.run(
        [sys.executable, "app/main.py", "--config", "conf/local.yaml", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, time.monotonic() - started


def test_unreachable_broker_stops_the_app_before_spark_with_one_line() -> None:
    done, took = run_app("source.bootstrap-servers=127.0.0.1:1")
    assert done.returncode == 1
    assert took < 60
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, done.stderr
    assert "source.bootstrap-servers=127.0.0.1:1 did not answer" in errors[0]
    assert "SparkContext" not in done.stderr + done.stdout


def test_unreachable_starrocks_stops_the_app_before_spark_with_one_line(
    kafka_broker: ExternalBroker,
) -> None:
    done, took = run_app(
        f"source.bootstrap-servers={kafka_broker.bootstrap}",
        "starrocks.jdbc-url=jdbc:mysql://127.0.0.1:1",
        "starrocks.sink.connect.timeout-ms=2000",
    )
    assert done.returncode == 1
    assert took < 60
    # (The topic does not exist on this broker: that is a WARNING line, not an error.)
    errors = [line for line in done.stderr.splitlines() if "level=WARNING" not in line]
    assert len(errors) == 1, done.stderr
    assert "cannot reach the query port" in errors[0]
    assert "127.0.0.1:1" in errors[0]
    assert "jdbc-url" in errors[0]
    assert "SparkContext" not in done.stderr + done.stdout


def test_reachable_broker_passes_and_missing_topics_are_only_a_warning(
    kafka_broker: ExternalBroker,
    unique_topic: Callable[[int], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = unique_topic(1)
    config = load_config(
        ROOT / "conf" / "local.yaml",
        [
            f"source.bootstrap-servers={kafka_broker.bootstrap}",
            f"source.topics={topic},not-there-yet",
        ],
    )
    caplog.set_level("WARNING", logger="app.preflight")
    check_kafka(config.source, timeout_s=10)
    assert [r.getMessage().split(" bootstrap=")[0] for r in caplog.records] == [
        "topic does not exist yet topic=not-there-yet"
    ]
    bad = load_config(ROOT / "conf" / "local.yaml", ["source.bootstrap-servers=127.0.0.1:1"])
    with pytest.raises(PreflightError, match=r"source\.bootstrap-servers"):
        check_kafka(bad.source, timeout_s=2)


def test_java_only_consumer_settings_leave_the_drivers_checks_working(
    kafka_broker: ExternalBroker, unique_topic: Callable[[int], str]
) -> None:
    # Settings of Spark's Java consumer that librdkafka refuses by name: the driver's own
    # client leaves them out (a JKS trust store is unused on this PLAINTEXT broker).
    topic = unique_topic(3)
    config = load_config(
        ROOT / "conf" / "local.yaml",
        [
            f"source.bootstrap-servers={kafka_broker.bootstrap}",
            f"source.topics={topic}",
            "source.options.kafka.security.protocol=PLAINTEXT",
            "source.options.kafka.default.api.timeout.ms=60000",
            "source.options.kafka.fetch.max.wait.ms=200",
            "source.options.kafka.ssl.truststore.location=/etc/kafka/truststore.jks",
        ],
    )
    check_kafka(config.source, timeout_s=10)
    ids, partitions = describe_topics(config.source, timeout_s=10)
    assert (list(ids), partitions) == ([topic], {topic: [0, 1, 2]})
