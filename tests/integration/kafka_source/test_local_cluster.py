"""Spark's Kafka connector with executors in separate processes (``local-cluster``).

The shared test session is ``local[2]``; a second SparkContext cannot live in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from devstack.kafka import KafkaBroker, produce_by_partition

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def test_local_cluster_executors_read_every_record_once(
    kafka_broker: KafkaBroker, unique_topic: Callable[[int], str], tmp_path: Path
) -> None:
    topic = unique_topic(4)
    values = {p: [f"{p}-{i}".encode() for i in range(25)] for p in range(4)}
    produce_by_partition(kafka_broker.bootstrap, topic, values)
    output = tmp_path / "out.json"

    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("local_cluster_job.py")),
            kafka_broker.bootstrap,
            topic,
            str(tmp_path / "cp"),
            str(output),
        ],
        cwd=REPO,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=560,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(output.read_text())
    assert result["executors"] == 2
    assert result["driver_pid"] not in result["executor_pids"]
    got = sorted((p, o) for p, o, _ in result["rows"])
    assert got == [(p, o) for p in range(4) for o in range(25)]
    assert {f"{p}-{o}" for p, o, _ in result["rows"]} == {v for *_, v in result["rows"]}
