"""The whole pipeline on real parts: broker + spark-submit app + StarRocks emulator.

Generator -> Kafka -> ``./spark-submit.sh --config conf/local.yaml`` -> emulator, with the
verifier watching the invariants while it runs and comparing with the ground truth at the end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demo.generate import GeneratorConfig, generate
from demo.verify import WatchReport, run, watch
from demo.workload import WorkloadConfig
from devstack.kafka.admin import create_topic
from devstack.pipeline_process import PipelineProcess
from devstack.stack import LOCAL_CONFIG, LocalStack, topic_end_offsets, wait_caught_up

pytestmark = pytest.mark.e2e

TOPIC = "cdc.orders"
NAME = "e2e"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    with LocalStack(tmp_path / "stack") as s:
        s.apply_ddl()
        yield s
    assert s.socket_dir is not None
    assert not s.socket_dir.exists(), "the stack's stop leaves its socket folder"


class Watcher:
    """The verifier's --watch in a thread, for the whole run."""

    def __init__(self, stack: LocalStack) -> None:
        self._stop = threading.Event()
        self._conn = stack.connect()
        self.report: WatchReport | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.report = watch(self._conn, 3600, interval_s=0.1, stop_event=self._stop)

    def stop(self) -> WatchReport:
        self._stop.set()
        self._thread.join(30)
        assert self.report is not None
        return self.report


def start_pipeline(stack: LocalStack, tmp_path: Path, *extra: str) -> PipelineProcess:
    overrides = stack.pipeline_overrides(TOPIC, tmp_path / "checkpoint", NAME)
    proc = PipelineProcess(LOCAL_CONFIG, [*overrides, *extra], tmp_path / "pipeline.log")
    proc.start()
    assert proc.wait_for_line("query started", 240), (tmp_path / "pipeline.log").read_text()[-3000:]
    return proc


def assert_exact(stack: LocalStack, truth: Any, watcher: Watcher) -> None:
    conn = stack.connect()
    verdict = run(conn, truth=truth)
    report = watcher.stop()
    print(verdict.render())
    assert report.checks > 10, "the watch must actually have looked"
    assert report.checks_with_violations == 0, report.to_dict()
    assert verdict.final.ok, verdict.to_dict()
    assert verdict.comparison is not None
    for table in verdict.comparison.tables:
        assert (table.missing, table.extra, table.wrong_version, table.wrong_value) == (0, 0, 0, 0)
        assert table.expected == table.actual > 0


def produce_through_a_crash(
    stack: LocalStack, tmp_path: Path, config: GeneratorConfig, extra: tuple[str, ...]
) -> None:
    """Produce ``config`` while the pipeline runs, kill -9 it mid-way, restart, catch up, and
    check exactly-once and no partial transaction throughout."""
    partitions = config.workload.partitions
    create_topic(stack.bootstrap, TOPIC, partitions)
    pipeline = start_pipeline(stack, tmp_path, *extra)
    watcher = Watcher(stack)
    result_box: list[Any] = []
    producer = threading.Thread(target=lambda: result_box.append(generate(config)))
    producer.start()
    # Crash the driver (kill -9, no cleanup) once it has committed some batches.
    assert pipeline.wait_for_line("batch      2", 240), "no progress before the crash"
    pipeline.kill()
    # What the killed run could not clean up is in the folders it was given, not in /tmp:
    # Spark's scratch, and the Python driver's Unix socket file (LocalStack.socket_dir).
    assert list((tmp_path / "spark-local").glob("spark-*/userFiles-*/cdc-pyfiles-*.zip"))
    sockets = socket_files(stack)
    assert sockets, "the killed run's socket file is not in the stack's socket folder"
    pipeline = start_pipeline(stack, tmp_path, *extra)
    producer.join(300)
    ends = topic_end_offsets(stack.bootstrap, TOPIC, partitions)
    conn = stack.connect()
    assert wait_caught_up(conn, NAME, TOPIC, ends, 600), "the sink did not catch up"
    # The workers came from the project's daemon (spark-submit.sh's launcher put it there).
    daemons = [c for c in pipeline.command_lines() if b"\0-m\0app.pydaemon\0" in c]
    assert daemons, pipeline.command_lines()
    assert socket_files(stack) - sockets, "no Unix domain socket between the JVM and Python"
    pipeline.stop()
    # A graceful stop removes its sockets (app/main.py stops the session on the way out).
    assert socket_files(stack) <= sockets
    assert_exact(stack, result_box[0].truth, watcher)


def socket_files(stack: LocalStack) -> set[Path]:
    """The Unix domain socket files Spark and PySpark make (app/session.py), in the folder
    the stack gives ``spark.python.unix.domain.socket.dir``."""
    assert stack.socket_dir is not None
    return set(stack.socket_dir.glob(".*.sock"))


def test_json_rows_as_objects_across_partitions_with_spanning_batches_and_a_crash_restart(
    stack: LocalStack, tmp_path: Path
) -> None:
    config = GeneratorConfig(
        bootstrap=stack.bootstrap,
        topic=TOPIC,
        workload=WorkloadConfig(orders=200, partitions=3, seed=11),
        rate=40,
        # Rows as nested JSON objects, the usual shape of CDC JSON.
        row_as_object=True,
    )
    # A small per-trigger cap makes transactions straddle micro-batches; one task reads the
    # three partitions.
    extra = (
        "source.max-offsets-per-trigger=120",
        "starrocks.sink.buffer-flush.interval-ms=500",
        "source.max-read-tasks=1",
    )
    produce_through_a_crash(stack, tmp_path, config, extra)
    # The restarted run went on from the checkpoint, under the same query id.
    log = (tmp_path / "pipeline.log").read_text()
    assert log.count("query started") == 2
    # Each start warmed one Python worker per core beside its planning (app/warmup.py).
    assert log.count("python workers warm workers=2 ") == 2, log[-3000:]


def test_maxwell_stream_exactly_once_through_a_crash_restart(
    stack: LocalStack, tmp_path: Path
) -> None:
    # Maxwell's shape: no BEGIN, xid on every row, "commit": true on the last (docs/maxwell.md).
    config = GeneratorConfig(
        bootstrap=stack.bootstrap,
        topic=TOPIC,
        workload=WorkloadConfig(orders=120, partitions=2, seed=13),
        rate=40,
        maxwell=True,
    )
    extra = (
        "source.envelope=maxwell",
        "source.max-offsets-per-trigger=80",
        "starrocks.sink.buffer-flush.interval-ms=500",
    )
    produce_through_a_crash(stack, tmp_path, config, extra)


def test_avro_with_executors_in_separate_processes(stack: LocalStack, tmp_path: Path) -> None:
    partitions = 2
    create_topic(stack.bootstrap, TOPIC, partitions)
    config = GeneratorConfig(
        bootstrap=stack.bootstrap,
        topic=TOPIC,
        workload=WorkloadConfig(orders=150, partitions=partitions, seed=5),
        encoding="avro",
    )
    result = generate(config)
    watcher = Watcher(stack)
    started = time.monotonic()
    pipeline = start_pipeline(
        stack,
        tmp_path,
        "assembler.encoding=avro",
        # Executors in their own processes: everything executor-side must pickle and import.
        "spark.master=local-cluster[2,1,1024]",
        "source.max-offsets-per-trigger=300",
    )
    ends = topic_end_offsets(stack.bootstrap, TOPIC, partitions)
    conn = stack.connect()
    assert wait_caught_up(conn, NAME, TOPIC, ends, 400), "the sink did not catch up"
    pipeline.stop()
    print(f"caught up in {time.monotonic() - started:.0f} s")
    assert_exact(stack, result.truth, watcher)


def test_a_commit_behind_that_fails_restarts_the_query_in_process_exactly_once(
    stack: LocalStack, tmp_path: Path
) -> None:
    """The first commit with data is refused after Spark recorded its batch (commit behind):
    the next batch stops the query, ``app/main.py`` starts it again in the same process, and
    the start settles the noted label (here still open: committed now). Exactly once."""
    config = GeneratorConfig(
        bootstrap=stack.bootstrap,
        topic=TOPIC,
        workload=WorkloadConfig(orders=60, partitions=2, seed=5),
        rate=60,
    )
    create_topic(stack.bootstrap, TOPIC, 2)
    assert stack.emulator is not None
    stack.emulator.control.fail_next(
        "commit", 2, status="FAILED", message="Can not commit CANCELLED transaction 1, label is x"
    )  # the commit and its re-send once the label is found uncommitted: the sink checks first
    pipeline = start_pipeline(
        stack,
        tmp_path,
        "starrocks.sink.buffer-flush.interval-ms=500",
        "starrocks.sink.commit-behind=true",
    )
    watcher = Watcher(stack)
    result = generate(config)
    ends = topic_end_offsets(stack.bootstrap, TOPIC, 2)
    assert wait_caught_up(stack.connect(), NAME, TOPIC, ends, 300), "the sink did not catch up"
    pipeline.stop()
    log = (tmp_path / "pipeline.log").read_text()
    assert "query restarts to replay a batch whose commit failed" in log, log[-3000:]
    assert "COMMIT_BEHIND_FAILED" in log
    assert log.count("query started") == 2  # one process, the query started twice
    # Polls sized to the batch's share of each partition (app/source.py).
    assert "kafka.max.poll.records=100000: source.max-offsets-per-trigger=200000 over 2 part" in log
    assert_exact(stack, result.truth, watcher)
