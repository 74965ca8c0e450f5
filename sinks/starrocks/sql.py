"""MySQL-protocol helper (``jdbc-url``) for validation and bookkeeping DDL, driver only.

The data path never uses SQL: rows go through Stream Load. This helper answers "does the
database/table exist", "which version is the server" and creates the sink's own tables.
"""

from __future__ import annotations

import logging
import re
from types import TracebackType
from typing import Any

import pymysql

from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.errors import (
    AuthError,
    ConnectionFailedError,
    InvalidRequestError,
    StarRocksError,
    UnknownDatabaseError,
)
from sinks.starrocks.fit import PAYLOAD_BYTES

logger = logging.getLogger(__name__)

_ACCESS_DENIED = 1045
_UNKNOWN_DB = 1049
_CONNECT_ERRORS = (2003, 2006, 2013)


class StarRocksSql:
    """A short-lived MySQL-protocol connection to the FE query port."""

    def __init__(self, config: StarRocksSinkConfig) -> None:
        self._config = config
        self._conn: Any = None

    def __enter__(self) -> StarRocksSql:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _connection(self) -> Any:
        if self._conn is None:
            cfg = self._config
            try:
                self._conn = pymysql.connect(
                    host=cfg.jdbc_host,
                    port=cfg.jdbc_port,
                    user=cfg.username,
                    password=cfg.password.reveal(),
                    connect_timeout=max(1, int(cfg.connect_timeout_s)),
                    read_timeout=max(1, int(cfg.socket_timeout_s)),
                    write_timeout=max(1, int(cfg.socket_timeout_s)),
                    autocommit=True,
                )
            except pymysql.MySQLError as e:
                raise self._map(e, "connect") from e
        return self._conn

    def query(self, statement: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        """Run one statement (``%s`` placeholders bound to ``params``); its rows."""
        try:
            with self._connection().cursor() as cursor:
                cursor.execute(statement, params)
                return [tuple(row) for row in cursor.fetchall()]
        except pymysql.MySQLError as e:
            raise self._map(e, statement.split(None, 1)[0].upper()) from e

    def server_version(self) -> tuple[int, int]:
        """(major, minor) from ``SELECT current_version()`` (e.g. ``4.0.2 abc`` -> (4, 0))."""
        rows = self.query("SELECT current_version()")
        text = str(rows[0][0]) if rows and rows[0] else ""
        match = re.search(r"(\d+)\.(\d+)", text)
        if not match:
            msg = f"cannot read the StarRocks version from current_version()={text!r}"
            raise InvalidRequestError(msg)
        return int(match.group(1)), int(match.group(2))

    def is_primary_key_table(self, database: str, table: str) -> bool:
        """Whether ``database.table`` is a PRIMARY KEY table (``SHOW CREATE TABLE``).

        Only there does the load's ``__op`` column upsert and delete by key: a DUPLICATE KEY
        table appends, so an UPSERT followed by a DELETE would leave two rows.
        """
        rows = self.query(f"SHOW CREATE TABLE `{database}`.`{table}`")
        ddl = str(rows[0][1]) if rows and len(rows[0]) > 1 else ""
        return re.search(r"\bPRIMARY\s+KEY\s*\(", ddl, re.IGNORECASE) is not None

    def tables(self, database: str) -> set[str]:
        """Table names of ``database``; :class:`UnknownDatabaseError` if it does not exist."""
        rows = self.query(f"SHOW TABLES FROM `{database}`")
        return {str(row[0]) for row in rows}

    def columns(self, database: str, table: str) -> set[str]:
        """Column names of ``database.table`` (``DESC``)."""
        return {str(row[0]) for row in self.query(f"DESC `{database}`.`{table}`")}

    def close(self) -> None:
        """Close the connection (errors on close are irrelevant)."""
        if self._conn is not None:
            try:
                self._conn.close()
            except pymysql.MySQLError:
                logger.debug("ignored error closing the StarRocks SQL connection")
            self._conn = None

    def _map(self, error: pymysql.MySQLError, what: str) -> StarRocksError:
        code = error.args[0] if error.args and isinstance(error.args[0], int) else None
        where = f"StarRocks SQL {what} on {self._config.jdbc_host}:{self._config.jdbc_port}"
        text = str(error.args[1]) if len(error.args) > 1 else str(error)
        if code == _ACCESS_DENIED:
            return AuthError(f"{where}: access denied; check username/password")
        if code == _UNKNOWN_DB or "unknown database" in text.lower():
            return UnknownDatabaseError(
                f"{where}: {text}; create the database or fix database-name"
            )
        if code in _CONNECT_ERRORS or (
            isinstance(error, pymysql.err.OperationalError) and code is None
        ):
            return ConnectionFailedError(
                f"{where}: cannot reach the query port ({text}); check jdbc-url"
            )
        return InvalidRequestError(f"{where}: {text}")


def progress_table_ddl(config: StarRocksSinkConfig) -> str:
    """DDL of the progress table: one row per (pipeline, topic, kafka_partition)."""
    return (
        f"CREATE TABLE IF NOT EXISTS `{config.database}`.`{config.progress_table}` (\n"
        "  pipeline VARCHAR(128) NOT NULL,\n"
        "  topic VARCHAR(255) NOT NULL,\n"
        "  kafka_partition INT NOT NULL,\n"
        "  last_offset BIGINT,\n"
        "  last_txn_id VARCHAR(255),\n"
        "  batch_id BIGINT,\n"
        "  label VARCHAR(128),\n"
        "  commit_time DATETIME,\n"
        "  topic_id VARCHAR(64)\n"
        ") PRIMARY KEY(pipeline, topic, kafka_partition)\n"
        "DISTRIBUTED BY HASH(pipeline, topic, kafka_partition)" + _properties(config)
    )


def dead_letter_table_ddl(config: StarRocksSinkConfig) -> str:
    """DDL of the dead-letter table: one row per rejected source row."""
    return (
        f"CREATE TABLE IF NOT EXISTS `{config.database}`.`{config.dead_letter_table}` (\n"
        "  topic VARCHAR(255) NOT NULL,\n"
        "  kafka_partition INT NOT NULL,\n"
        "  first_offset BIGINT NOT NULL,\n"
        "  row_seq INT NOT NULL,\n"
        "  pipeline VARCHAR(128),\n"
        "  txn_id VARCHAR(255),\n"
        "  last_offset BIGINT,\n"
        "  reason VARCHAR(1024),\n"
        f"  payload VARCHAR({PAYLOAD_BYTES}),\n"
        "  source_ts_ms BIGINT\n"
        ") PRIMARY KEY(topic, kafka_partition, first_offset, row_seq)\n"
        "DISTRIBUTED BY HASH(topic, kafka_partition)" + _properties(config)
    )


def _properties(config: StarRocksSinkConfig) -> str:
    if config.replication_num is None:
        return ""
    return f'\nPROPERTIES("replication_num" = "{config.replication_num}")'
