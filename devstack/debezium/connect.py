"""Run Kafka Connect (standalone) with Debezium's PostgreSQL connector from the resolved jars.

One JVM, ``org.apache.kafka.connect.cli.ConnectStandalone worker.properties
connector.properties``, from the classpath ``make setup`` resolved into
``jvm/lib/debezium-connect`` (``jvm/debezium-connect/pom.xml``). Standalone mode keeps source
offsets (the Postgres LSN Debezium has confirmed) in a file in the data dir, so a restart on the
same data dir resumes where the connector was; a fresh data dir starts with a snapshot.

The connector: ``pgoutput`` (built into PostgreSQL 10+, no server plugin to install),
``provide.transaction.metadata=true`` (BEGIN/END on ``<prefix>.transaction`` and a
``transaction`` block on every data event: what the pipeline assembles by), JsonConverter
with or without schemas, ``decimal.handling.mode=string`` (a NUMERIC arrives as its exact
decimal text instead of base64 bytes of the unscaled value).

READY: the REST API (ephemeral port) answers and ``GET /connectors/<name>/status`` says
RUNNING for the connector and its task. Stop: SIGTERM by PID (Connect flushes offsets and
stops the task), bounded wait, then SIGKILL.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack import children
from devstack.debezium.errors import ConnectError, ConnectStartError
from devstack.kafka.broker import free_port

logger = logging.getLogger(__name__)

#: Where ``make setup`` puts the worker's classpath; ``DEBEZIUM_CONNECT_LIB`` overrides it.
DEFAULT_LIB = Path(__file__).resolve().parents[2] / "jvm" / "lib" / "debezium-connect"
_MAIN = "org.apache.kafka.connect.cli.ConnectStandalone"
_CONNECTOR_CLASS = "io.debezium.connector.postgresql.PostgresConnector"
_LOG_NAME = "connect.log"
_PORT_NAME = "rest-port"
#: The standalone worker's offsets: rewritten at each flush (``offset.flush.interval.ms``).
OFFSETS_NAME = "offsets.dat"
_JAVA_OPTS = (
    "-Xms128m",
    "-Xmx512m",
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
# Snapshot, streaming start, slot and publication: enough to read a test's story.
logger.debezium.name = io.debezium
logger.debezium.level = info
logger.worker.name = org.apache.kafka.connect.runtime.Worker
logger.worker.level = info
"""


def connect_classpath(lib: Path | None = None) -> str:
    """The worker's Java classpath (``<lib>/*``).

    Raises:
        ConnectStartError: the jars are not there (``make setup`` resolves them).
    """
    folder = lib or Path(os.environ.get("DEBEZIUM_CONNECT_LIB", DEFAULT_LIB))
    if not any(folder.glob("debezium-connector-postgres-*.jar")) or not any(
        folder.glob("connect-runtime-*.jar")
    ):
        msg = (
            f"Kafka Connect / Debezium jars not found in {folder}: run `make setup` "
            "(mvn -f jvm/pom.xml dependency:copy-dependencies) or set DEBEZIUM_CONNECT_LIB"
        )
        raise ConnectStartError(msg)
    return f"{folder}/*"


@dataclass(frozen=True)
class PostgresSource:
    """The database Debezium reads and how it names what it writes.

    Attributes:
        host, port, user, password, dbname: where PostgreSQL is (TCP).
        topic_prefix: ``topic.prefix``: data topics are ``<prefix>.<schema>.<table>``, the
            transaction topic ``<prefix>.transaction``.
        tables: ``table.include.list`` (``schema.table``); empty = every table.
        slot_name: the replication slot; one per connector, unique on the server.
        schemas_enable: JsonConverter ``schemas.enable`` (envelope with ``schema``/``payload``).
        extra: further connector properties, verbatim (they win over the defaults here).
    """

    host: str
    port: int
    dbname: str
    topic_prefix: str
    user: str = "postgres"
    password: str = "postgres"  # noqa: S105 - local trust-auth server; ignored by it
    tables: tuple[str, ...] = ()
    slot_name: str = "txncdc"
    schemas_enable: bool = False
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def transaction_topic(self) -> str:
        """Debezium's default transaction topic name (``topic.transaction`` unset)."""
        return f"{self.topic_prefix}.transaction"

    def data_topic(self, table: str) -> str:
        """The topic of one ``schema.table``."""
        return f"{self.topic_prefix}.{table}"


def connector_properties(name: str, source: PostgresSource) -> dict[str, str]:
    """The connector's configuration, each non-default setting with its reason."""
    props = {
        "name": name,
        "connector.class": _CONNECTOR_CLASS,
        "tasks.max": "1",  # the Postgres connector always runs one task
        "database.hostname": source.host,
        "database.port": str(source.port),
        "database.user": source.user,
        "database.password": source.password,
        "database.dbname": source.dbname,
        "topic.prefix": source.topic_prefix,
        "plugin.name": "pgoutput",
        "slot.name": source.slot_name,
        "publication.name": f"{source.slot_name}_pub",
        # The transaction topic and the transaction block: the pipeline assembles by them.
        "provide.transaction.metadata": "true",
        # NUMERIC as exact decimal text: 'precise' would send base64 of the unscaled bytes.
        "decimal.handling.mode": "string",
        # Topics on a one-node broker: one replica; one partition keeps a table's order.
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1",
        # A delete is followed by a tombstone (log compaction); the pipeline skips them.
        "tombstones.on.delete": "true",
    }
    if source.tables:
        props["table.include.list"] = ",".join(source.tables)
        # Only the captured tables in the publication (all_tables needs every table's owner).
        props["publication.autocreate.mode"] = "filtered"
    props.update(source.extra)
    return props


def worker_properties(
    bootstrap: str, data: Path, rest_port: int, schemas_enable: bool
) -> dict[str, str]:
    """The standalone worker's configuration."""
    schemas = str(schemas_enable).lower()
    return {
        "bootstrap.servers": bootstrap,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": schemas,
        "value.converter.schemas.enable": schemas,
        "offset.storage.file.filename": str(data / OFFSETS_NAME),
        # Confirmed LSNs reach the file (and the slot) every second: a restart re-sends at
        # most a second of changes (Connect is at-least-once; the pipeline's sink upserts).
        "offset.flush.interval.ms": "1000",
        "listeners": f"http://127.0.0.1:{rest_port}",
        # The connector is on the classpath; no plugin.path scan of the whole disk.
        "plugin.discovery": "only_scan",
    }


def _properties_text(props: Mapping[str, str]) -> str:
    # Java properties: backslashes and leading specials escaped; values here are plain.
    return "".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in props.items())


def _java() -> str:
    found = children.find_java()
    if found is None:
        msg = "java not found: install Java 17+ or set JAVA_HOME"
        raise ConnectStartError(msg)
    return found


@dataclass(frozen=True)
class ConnectHandle:
    """A running worker: its REST URL, connector name, PID and data dir."""

    rest_url: str
    connector: str
    pid: int
    data_dir: Path
    source: PostgresSource

    def is_running(self) -> bool:
        """True while the worker process exists (reaping it if it has exited)."""
        return children.is_running(self.pid)

    def status(self) -> dict[str, Any]:
        """``GET /connectors/<name>/status`` (raises ``OSError`` when unreachable)."""
        return _get_json(f"{self.rest_url}/connectors/{self.connector}/status")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM by PID (offsets flushed, task stopped), bounded wait, then SIGKILL."""
        children.stop(self.pid, signal.SIGTERM, timeout, "connect")

    def kill(self) -> None:
        """SIGKILL the worker (a crash: it re-sends changes since its last flushed offset)."""
        children.kill(self.pid)

    def wait_for_offset_flush(self, timeout: float = 30.0) -> None:
        """Return just after the worker next rewrites its offsets file.

        Raises:
            ConnectError: no flush in ``timeout`` seconds (a flush needs records produced
                since the last one).
        """
        path = self.data_dir / OFFSETS_NAME
        before = _mtime_ns(path)
        deadline = time.monotonic() + timeout
        while _mtime_ns(path) == before:
            if time.monotonic() > deadline:
                msg = f"no offset flush to {path} in {timeout} s: is anything being captured?"
                raise ConnectError(msg)
            time.sleep(0.01)


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return 0


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - our own http URL
        body: dict[str, Any] = json.load(resp)
    return body


def _rest_port(data: Path, port: int) -> int:
    saved = data / _PORT_NAME
    if saved.is_file():
        kept = int(saved.read_text().strip())
        return kept if port in (0, kept) else port
    chosen = port or free_port()
    saved.write_text(f"{chosen}\n")
    return chosen


def start_connect(
    data_dir: Path | str,
    bootstrap: str,
    source: PostgresSource,
    *,
    connector: str = "txncdc-postgres",
    rest_port: int = 0,
    timeout: float = 120.0,
) -> ConnectHandle:
    """Start the worker with one Debezium Postgres connector; wait until both are RUNNING.

    Args:
        data_dir: config, offsets file and log; a fresh one per test (a used one resumes).
        bootstrap: Kafka ``bootstrap.servers``.
        source: the database and naming (see :class:`PostgresSource`).
        connector: the connector's name (REST path, offsets key).
        rest_port: REST port; 0 picks a free one (kept for restarts of this data dir).
        timeout: seconds until the connector and its task must be RUNNING.

    Raises:
        ConnectStartError: no jars or java; the worker exited, the connector or task FAILED
            (the message carries its trace), or it was not RUNNING in time.
    """
    data = Path(data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    classpath = connect_classpath()
    port = _rest_port(data, rest_port)
    worker = data / "worker.properties"
    worker.write_text(
        _properties_text(worker_properties(bootstrap, data, port, source.schemas_enable))
    )
    conn_file = data / "connector.properties"
    conn_file.write_text(_properties_text(connector_properties(connector, source)))
    log4j = data / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    log_path = data / _LOG_NAME
    argv = [_java(), *_JAVA_OPTS, f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]
    with log_path.open("ab") as log:
        offset = log.tell()
        proc = subprocess.Popen(  # noqa: S603 - fixed argv: our java, our jars
            [*argv, _MAIN, str(worker), str(conn_file)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    children.track(proc)
    handle = ConnectHandle(
        rest_url=f"http://127.0.0.1:{port}",
        connector=connector,
        pid=proc.pid,
        data_dir=data,
        source=source,
    )
    try:
        _wait_running(proc, handle, log_path, offset, time.monotonic() + timeout)
    except BaseException:
        children.abandon(proc)
        raise
    logger.info("connect ready rest=%s pid=%s connector=%s", handle.rest_url, proc.pid, connector)
    return handle


def _wait_running(
    proc: subprocess.Popen[bytes],
    handle: ConnectHandle,
    log_path: Path,
    offset: int,
    deadline: float,
) -> None:
    last: str = "no answer from the REST API yet"
    while True:
        if proc.poll() is not None:
            text = children.read_from(log_path, offset)
            msg = f"Kafka Connect exited ({proc.returncode}) while starting; log:\n{text[-3000:]}"
            raise ConnectStartError(msg)
        if time.monotonic() > deadline:
            text = children.read_from(log_path, offset)
            msg = f"connector {handle.connector} not RUNNING in time ({last}); log:\n{text[-3000:]}"
            raise ConnectStartError(msg)
        try:
            status = handle.status()
        except (OSError, ValueError) as e:
            # 404 until the standalone worker has created the connector; refused before.
            last = f"status: {e}"
            time.sleep(0.25)
            continue
        state = status.get("connector", {}).get("state")
        tasks = status.get("tasks", [])
        failed = [t for t in tasks if t.get("state") == "FAILED"]
        if state == "FAILED" or failed:
            trace = (failed[0] if failed else status.get("connector", {})).get("trace", "")
            msg = f"connector {handle.connector} FAILED: {str(trace)[:3000]}"
            raise ConnectStartError(msg)
        if state == "RUNNING" and tasks and all(t.get("state") == "RUNNING" for t in tasks):
            return
        last = f"connector={state} tasks={[t.get('state') for t in tasks]}"
        time.sleep(0.25)


class DebeziumConnect(children.Service[ConnectHandle]):
    """A worker whose handle survives restarts; a context manager that stops it on exit."""

    what = "connect"
    start_error = ConnectStartError

    def __init__(self, data_dir: Path | str, bootstrap: str, source: PostgresSource) -> None:
        super().__init__(data_dir)
        self._bootstrap = bootstrap
        self._source = source

    def _launch(self) -> ConnectHandle:
        return start_connect(self._data_dir, self._bootstrap, self._source)
