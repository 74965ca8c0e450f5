"""MySQL-protocol connections to StarRocks (the FE query port) for the demo tools.

Real StarRocks and the project's emulator both speak the MySQL protocol, so the same
``pymysql`` code serves both. Connections run in autocommit mode: every SELECT then reads the
latest visible version instead of a snapshot pinned by an open transaction.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

import pymysql

from demo.errors import DatabaseError


@dataclass(frozen=True)
class ConnectionSettings:
    """Where StarRocks' FE listens for SQL; the password never appears in ``repr``."""

    host: str = "127.0.0.1"
    port: int = 9030
    user: str = "root"
    password: str = field(default="", repr=False)
    connect_timeout_s: int = 10
    read_timeout_s: int = 60


def connect(settings: ConnectionSettings) -> Any:
    """Open an autocommit connection; raise :class:`DatabaseError` naming host and port."""
    try:
        return pymysql.connect(
            host=settings.host,
            port=settings.port,
            user=settings.user,
            password=settings.password,
            autocommit=True,
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.read_timeout_s,
            charset="utf8mb4",
        )
    except pymysql.MySQLError as e:
        msg = f"cannot connect to {settings.host}:{settings.port} as {settings.user!r}: {e}"
        raise DatabaseError(msg) from e


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--host --port --user --password`` (StarRocks defaults)."""
    parser.add_argument("--host", default="127.0.0.1", help="StarRocks FE host")
    parser.add_argument("--port", type=int, default=9030, help="FE query (MySQL) port")
    parser.add_argument("--user", default="root")
    parser.add_argument("--password", default="")


def settings_from_args(args: argparse.Namespace) -> ConnectionSettings:
    """Connection settings from parsed ``add_connection_arguments`` options."""
    return ConnectionSettings(
        host=args.host, port=args.port, user=args.user, password=args.password
    )
