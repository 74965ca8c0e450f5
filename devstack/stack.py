"""The local stack in one object: broker + StarRocks emulator, plus the waits built on them.

Shared by ``make demo`` (:mod:`devstack.demo`), the end-to-end tests and the chaos runner.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from demo.db import ConnectionSettings, connect
from demo.ddl import apply_file
from devstack.kafka.broker import BrokerHandle, start_broker
from devstack.starrocks.launcher import EmulatorHandle, start_emulator

REPO_ROOT = Path(__file__).resolve().parent.parent
DDL_FILE = REPO_ROOT / "demo" / "sql" / "orders.sql"
LOCAL_CONFIG = REPO_ROOT / "conf" / "local.yaml"
#: A label's states, as an operator sees them, once its rows are applied.
COMMITTED_STATES = ("COMMITTED", "VISIBLE")


@dataclass
class LocalStack:
    """A broker and an emulator with fresh data dirs under ``workdir``."""

    workdir: Path
    broker: BrokerHandle | None = None
    emulator: EmulatorHandle | None = None
    #: Where the pipelines' Spark puts its Unix domain socket files (app/session.py), so that a
    #: pipeline killed on purpose leaves none in /tmp. Not under ``workdir``: a socket's path
    #: must fit in 108 bytes.
    socket_dir: Path | None = None
    _emulator_process: Any = None

    def start(self) -> LocalStack:
        """Start both services (a few seconds)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.socket_dir = Path(tempfile.mkdtemp(prefix="cdc-sockets-"))
        self.broker = start_broker(self.workdir / "kafka")
        self._emulator_process = start_emulator(self.workdir / "starrocks")
        self.emulator = self._emulator_process.handle
        return self

    def stop(self) -> None:
        """Stop what was started, by PID, and remove the socket folder."""
        if self._emulator_process is not None:
            self._emulator_process.stop()
        if self.broker is not None:
            self.broker.stop()
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        """Kafka bootstrap servers."""
        assert self.broker is not None
        return self.broker.bootstrap

    def sql_settings(self) -> ConnectionSettings:
        """MySQL-protocol connection settings of the emulator's query port."""
        assert self.emulator is not None
        return ConnectionSettings(
            host=self.emulator.host,
            port=self.emulator.query_port,
            user=self.emulator.user,
            password=self.emulator.password,
        )

    def connect(self) -> Any:
        """A new autocommit pymysql connection to the emulator."""
        return connect(self.sql_settings())

    def rows_loaded(self, database: str, tables: Collection[str]) -> int:
        """Rows loaded into ``database``'s ``tables`` by transactions that became visible.

        Exactly once means exactly the rows sent: a transaction applied twice counts its rows
        twice, one lost counts none (the emulator keeps each label's loaded rows).
        """
        assert self.emulator is not None
        return sum(
            n
            for txn in self.emulator.control.transactions()
            if txn["db"] == database and txn["state"] in COMMITTED_STATES
            for table, n in txn["loaded_rows"].items()
            if table in tables
        )

    def apply_ddl(self, path: Path = DDL_FILE) -> None:
        """Create the demo database and tables."""
        conn = self.connect()
        try:
            apply_file(conn, path)
        finally:
            conn.close()

    def pipeline_overrides(self, topic: str, checkpoint: Path, name: str) -> list[str]:
        """``--set`` items pointing ``conf/local.yaml`` at this stack."""
        assert self.emulator is not None
        assert self.socket_dir is not None
        return [
            f"spark.conf.spark.python.unix.domain.socket.dir={self.socket_dir}",
            f"pipeline.name={name}",
            f"pipeline.checkpoint-location={checkpoint}",
            f"source.bootstrap-servers={self.bootstrap}",
            f"source.topics={topic}",
            f"starrocks.load-url={self.emulator.host}:{self.emulator.fe_port}",
            f"starrocks.jdbc-url=jdbc:mysql://{self.emulator.host}:{self.emulator.query_port}",
            f"starrocks.username={self.emulator.user}",
            f"starrocks.sink.label-prefix={name}",
        ]


def topic_end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """High watermark per partition (the next offset to be written)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "cdc-devstack-watermarks",  # never subscribes or commits
            "enable.auto.commit": False,
        }
    )
    try:
        return {
            p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
            for p in range(partitions)
        }
    finally:
        consumer.close()


def committed_offsets(
    conn: Any, pipeline: str, topic: str, database: str = "demo"
) -> dict[int, int]:
    """Last source offset per partition that the sink made visible (its progress table)."""
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT kafka_partition, last_offset FROM {database}._cdc_progress "
            "WHERE pipeline = %s AND topic = %s",
            (pipeline, topic),
        )
        return {int(p): int(o) for p, o in cur.fetchall()}


def wait_caught_up(
    conn: Any,
    pipeline: str,
    topic: str,
    end_offsets: Mapping[int, int],
    timeout_s: float,
    database: str = "demo",
    alive: Callable[[], bool] | None = None,
) -> bool:
    """Wait until every partition's last record (a TXN_END) is visible in the sink.

    ``alive``: the pipeline is still running (the wait ends early, False, once it is not).
    """
    want = {p: o - 1 for p, o in end_offsets.items() if o > 0}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = alive is None or alive()
        try:
            got = committed_offsets(conn, pipeline, topic, database)
        except Exception:
            got = {}
        if all(got.get(p, -1) >= o for p, o in want.items()):
            return True
        if not running:
            return False
        time.sleep(0.25)
    return False


@dataclass
class LatencySampler:
    """Measures visibility latency: first time an order version is seen minus its source time.

    Polls ``orders`` (one SELECT, so one consistent view) every ``interval_s``. Samples are
    upper bounds by up to one interval.
    """

    settings: ConnectionSettings
    database: str = "demo"
    interval_s: float = 0.1
    samples_ms: list[float] = field(default_factory=list)
    # (source time, latency) pairs, to separate warm-up from steady state.
    samples: list[tuple[float, float]] = field(default_factory=list)
    # When each (order_id, version) was first seen, epoch ms: to join with other timings.
    visible_ms: dict[tuple[int, int], float] = field(default_factory=dict)
    _seen: dict[int, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> LatencySampler:
        """Begin sampling in a daemon thread."""
        self._thread = threading.Thread(target=self._run, daemon=True, name="latency-sampler")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        conn = connect(self.settings)
        try:
            while not self._stop.is_set():
                now_ms = time.time() * 1000
                with conn.cursor() as cur:
                    cur.execute(
                        f"SELECT order_id, version, updated_ts_ms FROM {self.database}.orders"
                    )
                    rows = cur.fetchall()
                for order_id, version, ts in rows:
                    if self._seen.get(int(order_id), -1) < int(version):
                        self._seen[int(order_id)] = int(version)
                        self.visible_ms[(int(order_id), int(version))] = now_ms
                        if ts is not None:
                            self.samples_ms.append(now_ms - float(ts))
                            self.samples.append((float(ts), now_ms - float(ts)))
                self._stop.wait(self.interval_s)
        finally:
            conn.close()

    def percentiles(self, steady: bool = False) -> dict[str, float]:
        """p50/p95/p99/max in milliseconds (empty when nothing was seen).

        ``steady``: only transactions produced after the first one became visible, i.e.
        without Spark's start-up and first-batch warm-up.
        """
        values = self.samples_ms
        if steady and self.samples:
            first_visible = min(ts + lat for ts, lat in self.samples)
            values = [lat for ts, lat in self.samples if ts >= first_visible]
        return percentiles(values)


def split_by_outages(
    samples: list[tuple[float, float]], outages: Mapping[str, tuple[float, float]]
) -> dict[str, dict[str, float]]:
    """Percentiles of ``(source time, latency)`` pairs split around outages (epoch ms).

    Each outage ``name: (down_ms, up_ms)`` takes the samples produced before ``up_ms`` and
    first seen after ``down_ms`` (the first outage in order that matches). ``running``: the
    others, leaving out those produced before the first one was seen (the pipeline's start).
    """
    first_visible = min((ts + lat for ts, lat in samples), default=0.0)
    split: dict[str, list[float]] = {"running": [], **{name: [] for name in outages}}
    for ts, lat in samples:
        name = next((n for n, (down, up) in outages.items() if ts + lat >= down and ts < up), None)
        if name is not None:
            split[name].append(lat)
        elif ts >= first_visible:
            split["running"].append(lat)
    return {name: percentiles(values) for name, values in split.items()}


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p95/p99/max and n of ``values`` (empty with fewer than two)."""
    if len(values) < 2:
        return {}
    q = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": q[49], "p95": q[94], "p99": q[98], "max": max(values), "n": len(values)}
