"""Apply a ``.sql`` file of DDL statements over the MySQL protocol.

CLI::

    python -m demo.ddl --host H --port 9030 --user root --password '' \
        --file demo/sql/orders.sql [--database demo]

Statements are split on ``;`` after removing ``--`` comment lines, so a ``;`` may not appear
inside a string literal. Idempotence comes from the file (``IF NOT EXISTS`` everywhere): apply
it as often as you like. ``--database`` renames the backquoted database identifier
```demo``` (tests give each run its own database).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pymysql

from demo.db import add_connection_arguments, connect, settings_from_args
from demo.errors import DatabaseError, DemoError
from demo.model import check_identifier

logger = logging.getLogger(__name__)

#: The DDL in ``demo/sql/`` names this database; ``--database`` replaces it.
DEFAULT_DATABASE = "demo"

#: ``demo/sql/orders.sql`` in a source checkout.
ORDERS_DDL = Path(__file__).resolve().parent / "sql" / "orders.sql"


def split_statements(sql: str) -> list[str]:
    """Split a script into statements: drop ``--`` comment lines, split on ``;``."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def render(sql: str, database: str = DEFAULT_DATABASE) -> str:
    """Return the script with the backquoted database ``demo`` renamed to ``database``."""
    check_identifier(database)
    return sql.replace(f"`{DEFAULT_DATABASE}`", f"`{database}`")


def apply_sql(conn: Any, sql: str) -> int:
    """Execute every statement of ``sql`` in order; return how many ran.

    Raises:
        DatabaseError: a statement failed; the message quotes its first line.
    """
    statements = split_statements(sql)
    with conn.cursor() as cur:
        for statement in statements:
            try:
                cur.execute(statement)
            except pymysql.MySQLError as e:
                first = statement.splitlines()[0]
                msg = f"DDL statement failed ({first!r}...): {e}"
                raise DatabaseError(msg) from e
            logger.debug("applied %s", statement.splitlines()[0])
    return len(statements)


def apply_file(conn: Any, path: Path, database: str = DEFAULT_DATABASE) -> int:
    """Apply a DDL file, renaming the database; return the number of statements."""
    return apply_sql(conn, render(path.read_text(), database))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 failure)."""
    parser = argparse.ArgumentParser(
        prog="python -m demo.ddl", description="Apply a .sql DDL file to StarRocks."
    )
    add_connection_arguments(parser)
    parser.add_argument("--file", type=Path, default=ORDERS_DDL, help="the .sql file")
    parser.add_argument("--database", default=DEFAULT_DATABASE, help="rename `demo` to this")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        conn = connect(settings_from_args(args))
        try:
            count = apply_file(conn, args.file, args.database)
        finally:
            conn.close()
    except (DemoError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"applied {count} statement(s) from {args.file} (database {args.database})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
