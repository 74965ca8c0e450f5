"""Start, stop and restart a real Apache Kafka broker (KRaft, one node) from the resolved jars.

One JVM runs broker and controller together (``process.roles=broker,controller``), as
``kafka-server-start.sh`` would with a combined config, from the classpath ``make setup``
resolved into ``jvm/lib/kafka-broker`` (``jvm/kafka-broker/pom.xml``). The first start formats
the data dir (``kafka.tools.StorageTool format``, the class behind ``kafka-storage.sh``); a
restart on the same data dir and ports keeps topics, records and idempotent-producer state.

Ports: Kafka must advertise the port it listens on, so ``port=0`` picks a free port here
(bind, read, close) and keeps it, and the controller's, for every restart.

Who calls this: test fixtures (``tests/fixtures/kafka.py``), the ``python -m devstack.kafka`` CLI,
the chaos runner and benchmarks. Nothing here is shipped to Spark executors.
"""

from __future__ import annotations

import base64
import logging
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from devstack import children
from devstack.kafka.admin import wait_until_ready
from devstack.kafka.errors import BrokerStartError

logger = logging.getLogger(__name__)

#: Where ``make setup`` puts the broker's classpath; ``KAFKA_BROKER_LIB`` overrides it.
DEFAULT_LIB = Path(__file__).resolve().parents[2] / "jvm" / "lib" / "kafka-broker"
_LOG_NAME = "kafka.log"
_PORTS_NAME = "ports"
_MAIN = "kafka.Kafka"
_STORAGE_TOOL = "kafka.tools.StorageTool"
# Small and steady: one broker of a test or benchmark on a 2-core machine.
_JAVA_OPTS = (
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
)
_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
# Start, stop, topic and partition changes: enough to read a test's story from the log.
logger.server.name = kafka.server
logger.server.level = info
logger.controller.name = org.apache.kafka.controller
logger.controller.level = info
logger.log.name = kafka.log.LogManager
logger.log.level = info
"""


def broker_classpath(lib: Path | None = None) -> str:
    """The broker's Java classpath (``<lib>/*``).

    Raises:
        BrokerStartError: the jars are not there (``make setup`` resolves them).
    """
    folder = lib or Path(os.environ.get("KAFKA_BROKER_LIB", DEFAULT_LIB))
    if not any(folder.glob("kafka_2.13-*.jar")):
        msg = (
            f"Apache Kafka jars not found in {folder}: run `make setup` "
            "(mvn -f jvm/pom.xml dependency:copy-dependencies) or set KAFKA_BROKER_LIB"
        )
        raise BrokerStartError(msg)
    return f"{folder}/*"


def _java() -> str:
    found = children.find_java()
    if found is None:
        msg = "java not found: install Java 17+ or set JAVA_HOME"
        raise BrokerStartError(msg)
    return found


def free_port() -> int:
    """A port nobody listens on right now (bound and released: a small race, fine here)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class BrokerHandle:
    """A running broker: where to connect, which process it is, where its data lives.

    Frozen: a restart yields a new handle (new PID, same ports and data dir).
    """

    bootstrap: str
    port: int
    pid: int
    data_dir: Path
    controller_port: int = 0

    def is_running(self) -> bool:
        """True while the broker process exists (reaping it if it has exited)."""
        return children.is_running(self.pid)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker: SIGTERM by PID (a controlled shutdown), wait, then SIGKILL.

        Idempotent: stopping a stopped broker does nothing.
        """
        children.stop(self.pid, signal.SIGTERM, timeout, "broker")

    def kill(self) -> None:
        """SIGKILL the broker (a crash: the next start recovers its logs)."""
        children.kill(self.pid)

    def restart(self, timeout: float = 60.0) -> BrokerHandle:
        """Stop (if running), start on the same ports and data dir; returns the new handle."""
        self.stop()
        return start_broker(self.data_dir, port=self.port, timeout=timeout)


def _server_properties(data: Path, port: int, controller_port: int) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={data / 'logs'}",
            # One node: every internal topic has one replica.
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            # Consumers in tests join alone: no 3 s wait for more members.
            "group.initial.rebalance.delay.ms=0",
            # After a kill -9 the new incarnation waits out the old one's session: keep it short.
            "broker.session.timeout.ms=3000",
            "broker.heartbeat.interval.ms=500",
            # Retention tests delete segments within seconds, not every five minutes.
            "log.retention.check.interval.ms=1000",
            "log.segment.delete.delay.ms=0",
            "file.delete.delay.ms=0",
            # A 2-core machine: fewer threads than the defaults, which assume a server.
            "num.network.threads=2",
            "num.io.threads=4",
            "background.threads=2",
            "log.cleaner.threads=1",
            "num.recovery.threads.per.data.dir=1",
            "",
        ]
    )


def _cluster_id() -> str:
    # What `kafka-storage random-uuid` prints: a UUID, base64url without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _ports(data: Path, port: int) -> tuple[int, int]:
    """This data dir's ports: the ones it was first started with, so restarts keep them."""
    saved = data / _PORTS_NAME
    if saved.is_file():
        broker, controller = (int(p) for p in saved.read_text().split())
        if port in (0, broker):
            return broker, controller
        return port, controller
    chosen = (port or free_port(), free_port())
    saved.write_text(f"{chosen[0]} {chosen[1]}\n")
    return chosen


def start_broker(data_dir: Path | str, port: int = 0, timeout: float = 60.0) -> BrokerHandle:
    """Start Apache Kafka (KRaft, one node) on 127.0.0.1 and wait until it answers metadata.

    Args:
        data_dir: where the broker keeps its config, logs and data; use a fresh one per test.
            A data dir that was started before is restarted with its ports and data.
        port: Kafka port; 0 picks a free one (kept for restarts of this data dir).
        timeout: seconds to wait for a successful metadata call.

    Raises:
        BrokerStartError: no jars, no java, the process exited or did not become ready in
            time; the message carries the tail of its log.
    """
    data = Path(data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    classpath = broker_classpath()
    port, controller_port = _ports(data, port)
    config = data / "server.properties"
    config.write_text(_server_properties(data, port, controller_port))
    log4j = data / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    log_path = data / _LOG_NAME
    java = [_java(), *_JAVA_OPTS, f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]
    if not (data / "logs" / "meta.properties").is_file():
        _format_storage(java, config, log_path)
    with log_path.open("ab") as log:
        offset = log.tell()
        # Output goes to a file, not a pipe: nobody drains a pipe for the broker's lifetime.
        proc = subprocess.Popen(  # noqa: S603 - fixed argv: our java, our jars
            [*java, _MAIN, str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    children.track(proc)
    handle = BrokerHandle(
        bootstrap=f"127.0.0.1:{port}",
        port=port,
        pid=proc.pid,
        data_dir=data,
        controller_port=controller_port,
    )
    try:
        _wait_ready(proc, handle.bootstrap, log_path, offset, time.monotonic() + timeout)
    except BaseException:
        children.abandon(proc)
        raise
    logger.info("broker ready bootstrap=%s pid=%s data_dir=%s", handle.bootstrap, proc.pid, data)
    return handle


def _format_storage(java: list[str], config: Path, log_path: Path) -> None:
    with log_path.open("ab") as log:
        done = subprocess.run(  # noqa: S603 - fixed argv: our java, our jars
            # "=": a base64 id may start with "-", which argparse would read as an option.
            [*java, _STORAGE_TOOL, "format", f"--cluster-id={_cluster_id()}", "-c", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        text = log_path.read_text(errors="replace")
        msg = f"formatting Kafka storage failed (exit {done.returncode}); log:\n{text[-2000:]}"
        raise BrokerStartError(msg)


def _wait_ready(
    proc: subprocess.Popen[bytes], bootstrap: str, log_path: Path, offset: int, deadline: float
) -> None:
    # The listener first (a plain connect), then one metadata call: a Kafka client pointed at
    # a port nobody listens on yet logs an error line every 50 ms.
    host, _, port = bootstrap.rpartition(":")
    while True:
        if proc.poll() is not None:
            text = children.read_from(log_path, offset)
            msg = f"Kafka exited with code {proc.returncode} while starting; log:\n{text[-2000:]}"
            raise BrokerStartError(msg)
        if time.monotonic() > deadline:
            text = children.read_from(log_path, offset)
            msg = f"Kafka did not listen on {bootstrap} in time; log:\n{text[-2000:]}"
            raise BrokerStartError(msg)
        try:
            socket.create_connection((host, int(port)), timeout=1.0).close()
        except OSError:
            time.sleep(0.1)
            continue
        break
    wait_until_ready(bootstrap, max(1.0, deadline - time.monotonic()))


class KafkaBroker(children.Service[BrokerHandle]):
    """A broker whose handle survives restarts; a context manager that stops it on exit.

    Fixtures hold one of these so that ``restart()`` keeps the same object valid for the test.
    """

    what = "broker"
    start_error = BrokerStartError

    def __init__(self, data_dir: Path | str, port: int = 0) -> None:
        super().__init__(data_dir)
        self._port = port

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers``; stable across restarts."""
        return self.handle.bootstrap

    def _launch(self) -> BrokerHandle:
        # Port 0 is resolved once and then kept for restarts.
        handle = start_broker(self._data_dir, port=self._port)
        self._port = handle.port
        return handle

    def restart(self) -> BrokerHandle:
        """Stop and start on the same port and data dir; data survives."""
        self._handle = self.handle.restart()
        return self._handle
