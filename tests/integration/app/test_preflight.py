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
from app.preflight import PreflightError, check_kafka
from tests.fixtures.kafka import ExternalBroker

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_unreachable_broker_stops_the_app_before_spark_with_one_line() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "app/main.py",
            "--config",
            "conf/local.yaml",
            "--set",
            "source.bootstrap-servers=127.0.0.1:1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert time.monotonic() - started < 60
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, done.stderr
    assert "source.bootstrap-servers=127.0.0.1:1 did not answer" in errors[0]
    assert "SparkContext" not in done.stderr + done.stdout


def test_unreachable_starrocks_stops_the_app_before_spark_with_one_line(
    kafka_broker: ExternalBroker,
) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "app/main.py",
            "--config",
            "conf/local.yaml",
            "--set",
            f"source.bootstrap-servers={kafka_broker.bootstrap}",
            "--set",
            "starrocks.jdbc-url=jdbc:mysql://127.0.0.1:1",
            "--set",
            "starrocks.sink.connect.timeout-ms=2000",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert time.monotonic() - started < 60
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
