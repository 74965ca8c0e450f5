"""The end-to-end scenario against real Apache Kafka (KRaft) and real StarRocks 4.x.

This is where the StarRocks client meets the real server. Needs Docker (see conftest.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from testcontainers.core.container import DockerContainer
from testcontainers.core.waiting_utils import wait_for_logs
from testcontainers.kafka import KafkaContainer

from demo.db import ConnectionSettings, connect
from demo.ddl import apply_file
from demo.generate import GeneratorConfig, generate
from demo.verify import run, watch
from demo.workload import WorkloadConfig
from devstack.kafka.admin import create_topic
from devstack.pipeline_process import PipelineProcess
from devstack.stack import DDL_FILE, LOCAL_CONFIG, topic_end_offsets, wait_caught_up

pytestmark = pytest.mark.e2e

STARROCKS_IMAGE = "starrocks/allin1-ubuntu:4.0.1"


@dataclass
class RealStack:
    bootstrap: str
    host: str
    fe_port: int
    query_port: int

    def sql(self) -> ConnectionSettings:
        return ConnectionSettings(host=self.host, port=self.query_port, user="root")


@pytest.fixture(scope="module")
def real_stack() -> Iterator[RealStack]:
    with (
        KafkaContainer().with_kraft() as kafka,
        DockerContainer(STARROCKS_IMAGE).with_exposed_ports(8030, 8040, 9030) as starrocks,
    ):
        wait_for_logs(starrocks, "Enjoy the journey to StarRocks", timeout=300)
        host = starrocks.get_container_host_ip()
        stack = RealStack(
            bootstrap=kafka.get_bootstrap_server(),
            host=host,
            fe_port=int(starrocks.get_exposed_port(8030)),
            query_port=int(starrocks.get_exposed_port(9030)),
        )
        deadline = time.monotonic() + 300
        while True:
            try:
                conn = connect(stack.sql())
                apply_file(conn, DDL_FILE)
                conn.close()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(5)
        yield stack


def test_orders_demo_exactly_once_on_the_real_stack(real_stack: RealStack, tmp_path: Path) -> None:
    topic, name, partitions = "cdc.orders", "real", 3
    create_topic(real_stack.bootstrap, topic, partitions)
    overrides = [
        f"pipeline.name={name}",
        f"pipeline.checkpoint-location={tmp_path / 'checkpoint'}",
        f"source.bootstrap-servers={real_stack.bootstrap}",
        f"source.topics={topic}",
        f"starrocks.load-url={real_stack.host}:{real_stack.fe_port}",
        f"starrocks.jdbc-url=jdbc:mysql://{real_stack.host}:{real_stack.query_port}",
        "source.max-offsets-per-trigger=200",
        # The container's BE is registered by its own address: the FE's 307 goes there.
        "starrocks.sink.redirect.allowed-hosts=*",
    ]
    pipeline = PipelineProcess(LOCAL_CONFIG, overrides, tmp_path / "pipeline.log").start()
    assert pipeline.wait_for_line("query started", 300)
    stop = threading.Event()
    watch_conn = connect(real_stack.sql())
    box: list[Any] = []
    watcher = threading.Thread(target=lambda: box.append(watch(watch_conn, 3600, stop_event=stop)))
    watcher.start()
    result = generate(
        GeneratorConfig(
            bootstrap=real_stack.bootstrap,
            topic=topic,
            workload=WorkloadConfig(orders=500, partitions=partitions, seed=3),
            rate=100,
        )
    )
    assert pipeline.wait_for_line("batch      1", 300)
    pipeline.kill()  # crash mid-run; the restart must neither lose nor duplicate
    pipeline = PipelineProcess(LOCAL_CONFIG, overrides, tmp_path / "pipeline.log").start()
    conn = connect(real_stack.sql())
    ends = topic_end_offsets(real_stack.bootstrap, topic, partitions)
    assert wait_caught_up(conn, name, topic, ends, 600)
    pipeline.stop()
    stop.set()
    watcher.join(30)
    verdict = run(conn, truth=result.truth)
    print(verdict.render())
    assert box[0].checks_with_violations == 0
    assert verdict.passed
