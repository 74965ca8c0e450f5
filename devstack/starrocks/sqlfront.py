"""The MySQL-protocol query port (mysql-mimic) over the SQLite storage.

Statements are StarRocks SQL as a client would send to a real FE on port 9030. DDL and SHOW
commands are handled by hand (StarRocks DDL is outside generic SQL parsers); SELECT and DML go
through sqlglot: read as MySQL, table references ``db.t`` renamed to the SQLite table
``"db.t"``, then written as SQLite. Each session owns a read connection, so every SELECT runs
on one WAL snapshot and never sees a partial commit (see :mod:`.storage`).

DECIMAL values are stored as exact text: ``SUM`` becomes the exact ``DECSUM`` aggregate, and a
DECIMAL column used outside the select list (WHERE, ORDER BY, JOIN) is compared as REAL, which
is exact for the magnitudes tests use but is a documented deviation.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlglot
from mysql_mimic import MysqlServer, ResultColumn
from mysql_mimic.auth import IdentityProvider, NativePasswordAuthPlugin, User
from mysql_mimic.errors import MysqlError
from mysql_mimic.session import BaseSession
from mysql_mimic.types import ColumnType
from mysql_mimic.variables import GlobalVariables, SessionVariables
from sqlglot import exp

from devstack.starrocks.catalog import TableSchema, parse_create_table, unquote
from devstack.starrocks.coltypes import ColumnSpec, output_value
from devstack.starrocks.errors import SqlError
from devstack.starrocks.storage import Storage, connect_reader

if TYPE_CHECKING:
    from mysql_mimic.auth import AuthPlugin

EMULATOR_VERSION = "4.0.0-emulator"
HANDSHAKE_VERSION = "5.1.0"

# StarRocks' session-variable defaults (fe SessionVariable / GlobalVariable) that MySQL
# drivers read at connect time. MySQL Connector/J (shaded into flink-connector-starrocks) reads
# max_allowed_packet and fails ("Packet for query is too large (28 > -1)") when it is NULL.
_SESSION_DEFAULTS: dict[str, str | int] = {
    "auto_increment_increment": 1,
    "autocommit": 1,
    "character_set_client": "utf8",
    "character_set_connection": "utf8",
    "character_set_results": "utf8",
    "character_set_server": "utf8",
    "collation_connection": "utf8_general_ci",
    "collation_database": "utf8_general_ci",
    "collation_server": "utf8_general_ci",
    "init_connect": "",
    "interactive_timeout": 3600,
    "language": "/starrocks/share/english/",
    "license": "Apache License 2.0",
    "lower_case_table_names": 0,
    "max_allowed_packet": 33554432,
    "net_buffer_length": 16384,
    "net_read_timeout": 60,
    "net_write_timeout": 60,
    "query_cache_size": 1048576,
    "query_cache_type": 0,
    "sql_mode": "ONLY_FULL_GROUP_BY",
    "sql_select_limit": 9223372036854775807,
    "transaction_isolation": "REPEATABLE-READ",
    "transaction_read_only": 0,
    "tx_isolation": "REPEATABLE-READ",
    "tx_read_only": 0,
    "wait_timeout": 28800,
}


def _variables() -> dict[str, str | int]:
    tz = time.strftime("%Z") or "UTC"
    return {
        **_SESSION_DEFAULTS,
        "system_time_zone": tz,
        "time_zone": tz,
        "version": HANDSHAKE_VERSION,
        "version_comment": "StarRocks emulator",
    }


def _like_regex(pattern: str) -> re.Pattern[str]:
    parts = ("." if ch == "_" else ".*" if ch == "%" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts), re.I)


def _select_variables(text: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    """``SELECT @@[session.|global.]x [AS y], ...``: values, labelled by alias when given."""
    values = _variables()
    row: list[Any] = []
    labels: list[str] = []
    for item in re.finditer(
        r"@@((?:session\.|global\.|local\.)?(\w+))(?:\s+AS\s+(`?)(\w+)\3)?", text, re.I
    ):
        row.append(values.get(item.group(2).lower()))
        labels.append(item.group(4) or f"@@{item.group(1)}")
    return [tuple(row)], labels


_IDENT = r"(?:`[^`]+`|[\w$]+)"
_QNAME = rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?"
_MYSQL_TYPES = {
    "TINYINT": ColumnType.TINY,
    "BOOLEAN": ColumnType.TINY,
    "SMALLINT": ColumnType.SHORT,
    "INT": ColumnType.LONG,
    "BIGINT": ColumnType.LONGLONG,
    "LARGEINT": ColumnType.LONGLONG,
    "FLOAT": ColumnType.FLOAT,
    "DOUBLE": ColumnType.DOUBLE,
    "DECIMAL": ColumnType.NEWDECIMAL,
    "DATE": ColumnType.DATE,
    "DATETIME": ColumnType.DATETIME,
    "JSON": ColumnType.JSON,
}

Result = tuple[Sequence[Sequence[Any]], Sequence[Any]] | None


class _Identity(IdentityProvider):  # type: ignore[misc]  # mysql_mimic is untyped
    """One user with a native password, as the real FE's root account."""

    def __init__(self, user: str, password: str) -> None:
        self.user = user
        self.auth_string = (
            NativePasswordAuthPlugin.create_auth_string(password) if password else None
        )

    def get_plugins(self) -> Sequence[AuthPlugin]:
        return [NativePasswordAuthPlugin()]

    async def get_user(self, username: str) -> User | None:
        if username != self.user:
            return None
        return User(
            name=username,
            auth_string=self.auth_string,
            auth_plugin=NativePasswordAuthPlugin.name,
        )


class _Session(BaseSession):  # type: ignore[misc]  # mysql_mimic is untyped
    def __init__(self, engine: SqlEngine) -> None:
        gv = GlobalVariables()
        gv.set("version", HANDSHAKE_VERSION, force=True)
        self.variables = SessionVariables(gv)
        self.username: str | None = None
        self.database: str | None = None
        self.engine = engine
        self.conn = connect_reader(engine.storage.path)

    async def handle_query(self, sql: str, attrs: dict[str, str]) -> Any:
        try:
            result, new_db = self.engine.execute(self.conn, self.database, sql)
        except SqlError as e:
            raise MysqlError(str(e), e.code) from e
        if new_db is not None:
            self.database = new_db
        return result

    async def use(self, database: str) -> None:
        if database not in self.engine.storage.databases:
            msg = f"Unknown database '{database}'"
            raise MysqlError(msg, 1049)
        self.database = database

    async def close(self) -> None:
        self.conn.close()


def make_mysql_server(storage: Storage, user: str, password: str) -> MysqlServer:
    """A mysql-mimic server bound to ``storage`` (call ``start_server(host=, port=)``)."""
    engine = SqlEngine(storage)
    return MysqlServer(
        session_factory=lambda: _Session(engine),
        identity_provider=_Identity(user, password),
    )


class SqlEngine:
    """Executes the supported StarRocks SQL subset (see module docstring)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def execute(
        self, conn: sqlite3.Connection, current_db: str | None, sql: str
    ) -> tuple[Result, str | None]:
        """Run one statement; returns (result, new current database or None).

        Raises:
            SqlError: the statement failed; the message is what the client sees.
        """
        text = re.sub(r"^\s*(/\*.*?\*/\s*)*", "", sql, flags=re.S).strip().rstrip(";").strip()
        if not text:
            msg = "Query was empty"
            raise SqlError(msg, 1065)
        head = text.split(None, 1)[0].upper()
        if head in ("SET", "COMMIT", "ROLLBACK", "BEGIN", "START", "ANALYZE", "REFRESH"):
            return None, None
        if head == "USE":
            db = unquote(text.split(None, 1)[1])
            if db not in self.storage.databases:
                msg = f"Unknown database '{db}'"
                raise SqlError(msg, 1049)
            return None, db
        if head in ("DESC", "DESCRIBE", "EXPLAIN") and head != "EXPLAIN":
            return self._desc(text.split(None, 1)[1], current_db), None
        if head == "SHOW":
            return self._show(text, current_db), None
        if head == "CREATE":
            return self._create(text, current_db), None
        if head == "DROP":
            return self._drop(text, current_db), None
        if head == "TRUNCATE":
            m = re.fullmatch(rf"TRUNCATE\s+TABLE\s+{_QNAME}", text, re.I)
            if not m:
                msg_0 = "Syntax error in TRUNCATE TABLE"
                raise SqlError(msg_0)
            db, name = self._qualify(m.group(1), m.group(2), current_db)
            self.storage.truncate_table(db, name)
            return None, None
        if head in ("SELECT", "WITH", "(", "INSERT", "UPDATE", "DELETE", "UPSERT"):
            return self._dml(conn, text, current_db), None
        msg = f"Getting syntax error. The emulator does not support: {text[:80]}"
        raise SqlError(msg, 1064)

    # -- DDL / SHOW ------------------------------------------------------------------------

    def _qualify(self, a: str, b: str | None, current_db: str | None) -> tuple[str, str]:
        if b is not None:
            return unquote(a), unquote(b)
        if current_db is None:
            msg = "No database selected"
            raise SqlError(msg, 1046)
        return current_db, unquote(a)

    def _schema(self, db: str, name: str) -> TableSchema:
        if db not in self.storage.databases:
            msg = f"Unknown database '{db}'"
            raise SqlError(msg, 1049)
        schema = self.storage.tables.get((db, name))
        if schema is None:
            msg = f"Getting analyzing error. Detail message: Unknown table '{db}.{name}'."
            raise SqlError(msg, 1064)
        return schema

    def _create(self, text: str, current_db: str | None) -> Result:
        m = re.fullmatch(
            rf"CREATE\s+(?:DATABASE|SCHEMA)\s+(IF\s+NOT\s+EXISTS\s+)?({_IDENT})(\s+.*)?",
            text,
            re.I | re.S,
        )
        if m:
            self.storage.create_database(unquote(m.group(2)), bool(m.group(1)))
            return None
        if re.match(r"CREATE\s+TABLE\b", text, re.I):
            ct = parse_create_table(text)
            db = ct.db or current_db
            if db is None:
                msg = "No database selected"
                raise SqlError(msg, 1046)
            self.storage.create_table(ct, db, text)
            return None
        msg = "The emulator supports CREATE DATABASE and CREATE TABLE only"
        raise SqlError(msg)

    def _drop(self, text: str, current_db: str | None) -> Result:
        m = re.fullmatch(
            rf"DROP\s+(?:DATABASE|SCHEMA)\s+(IF\s+EXISTS\s+)?({_IDENT})(\s+FORCE)?", text, re.I
        )
        if m:
            self.storage.drop_database(unquote(m.group(2)), bool(m.group(1)))
            return None
        m = re.fullmatch(rf"DROP\s+TABLE\s+(IF\s+EXISTS\s+)?{_QNAME}(\s+FORCE)?", text, re.I)
        if m:
            db, name = self._qualify(m.group(2), m.group(3), current_db)
            if db not in self.storage.databases:
                msg = f"Unknown database '{db}'"
                raise SqlError(msg, 1049)
            self.storage.drop_table(db, name, bool(m.group(1)))
            return None
        msg_0 = "The emulator supports DROP DATABASE and DROP TABLE only"
        raise SqlError(msg_0)

    def _desc(self, target: str, current_db: str | None) -> Result:
        m = re.fullmatch(rf"\s*{_QNAME}\s*", target)
        if not m:
            msg = "Syntax error in DESC"
            raise SqlError(msg)
        schema = self._schema(*self._qualify(m.group(1), m.group(2), current_db))
        rows = [
            (
                c.name,
                c.desc_type(),
                "YES" if c.nullable else "NO",
                "true" if c.name in schema.key_columns else "false",
                c.default,
                "",
            )
            for c in schema.columns
        ]
        return rows, ["Field", "Type", "Null", "Key", "Default", "Extra"]

    def _show(self, text: str, current_db: str | None) -> Result:
        if re.fullmatch(r"SHOW\s+(DATABASES|SCHEMAS)", text, re.I):
            return [(d,) for d in sorted(self.storage.databases)], ["Database"]
        m = re.fullmatch(rf"SHOW\s+(?:FULL\s+)?TABLES(?:\s+(?:FROM|IN)\s+({_IDENT}))?", text, re.I)
        if m:
            db = unquote(m.group(1)) if m.group(1) else current_db
            if db is None:
                msg = "No database selected"
                raise SqlError(msg, 1046)
            if db not in self.storage.databases:
                msg = f"Unknown database '{db}'"
                raise SqlError(msg, 1049)
            names = sorted(n for d, n in self.storage.tables if d == db)
            return [(n,) for n in names], [f"Tables_in_{db}"]
        m = re.fullmatch(rf"SHOW\s+CREATE\s+TABLE\s+{_QNAME}", text, re.I)
        if m:
            schema = self._schema(*self._qualify(m.group(1), m.group(2), current_db))
            return [(schema.name, schema.ddl)], ["Table", "Create Table"]
        m = re.fullmatch(rf"SHOW\s+(?:FULL\s+)?COLUMNS\s+(?:FROM|IN)\s+{_QNAME}", text, re.I)
        if m:
            return self._desc(
                f"{m.group(1)}.{m.group(2)}" if m.group(2) else m.group(1), current_db
            )
        m = re.fullmatch(
            r"SHOW\s+(?:SESSION\s+|GLOBAL\s+)?VARIABLES(?:\s+LIKE\s+'([^']*)')?", text, re.I
        )
        if m:
            pattern = m.group(1)
            rx = None if pattern is None else _like_regex(pattern)
            rows = [
                (k, str(v))
                for k, v in sorted(_variables().items())
                if rx is None or rx.fullmatch(k)
            ]
            return rows, ["Variable_name", "Value"]
        if re.fullmatch(r"SHOW\s+(VARIABLES|WARNINGS|ERRORS|PROCESSLIST).*", text, re.I | re.S):
            return [], ["Variable_name", "Value"]
        msg = f"The emulator does not support: {text[:80]}"
        raise SqlError(msg, 1064)

    # -- SELECT / DML ----------------------------------------------------------------------

    def _dml(self, conn: sqlite3.Connection, text: str, current_db: str | None) -> Result:
        if re.match(r"SELECT\s+@@", text, re.I):
            return _select_variables(text)
        try:
            tree = sqlglot.parse_one(text, read="mysql")
        except sqlglot.errors.ParseError as e:
            msg = f"Getting syntax error. {e}"
            raise SqlError(msg, 1064) from e
        if tree is None:
            msg_0 = "Query was empty"
            raise SqlError(msg_0, 1065)
        schemas = self._rewrite_tables(tree, current_db)
        version = EMULATOR_VERSION if "current_version" in text.lower() else HANDSHAKE_VERSION
        for cv in list(tree.find_all(exp.CurrentVersion)):
            cv.replace(exp.Literal.string(version))
        for cs in list(tree.find_all(exp.CurrentSchema)):
            cs.replace(exp.Literal.string(current_db) if current_db else exp.Null())
        decimals = {c.name.lower() for s in schemas.values() for c in s.columns if c.is_decimal}
        is_select = isinstance(tree, (exp.Select, exp.Union, exp.Subquery)) or bool(
            isinstance(tree, exp.Query)
        )
        projections = list(tree.expressions) if isinstance(tree, exp.Select) else []
        if decimals:
            _rewrite_decimals(tree, decimals, projections if is_select else [])
        for node in list(tree.find_all(exp.Sum)):
            repl: exp.Expr = exp.Anonymous(this="DECSUM", expressions=[node.this])
            if isinstance(node.parent, exp.Select) and node.arg_key == "expressions":
                # Keep the column label a client sees on StarRocks, e.g. "sum(amount)".
                repl = exp.alias_(repl, node.sql(dialect="mysql").lower(), quoted=True)
            node.replace(repl)
        for col in list(tree.find_all(exp.Column)):
            if col.args.get("db"):
                col.set("db", None)
        if isinstance(tree, exp.Select):
            projections = list(tree.expressions)
        try:
            out_sql = tree.sql(dialect="sqlite")
        except Exception as e:
            msg = f"Getting syntax error. {e}"
            raise SqlError(msg, 1064) from e
        if not is_select:
            self.storage.execute_write(out_sql)
            return None
        try:
            cur = conn.execute(out_sql)
            rows = cur.fetchall()
        except sqlite3.Error as e:
            msg = f"Getting analyzing error. Detail message: {e}."
            raise SqlError(msg, 1064) from e
        names = [d[0] for d in cur.description or ()]
        specs = _output_specs(projections, names, schemas)
        if any(s is not None for s in specs):
            rows = [
                tuple(v if s is None else output_value(s, v) for s, v in zip(specs, r, strict=True))
                for r in rows
            ]
        columns: list[Any] = [
            n if s is None else ResultColumn(n, _MYSQL_TYPES.get(s.type_name, ColumnType.VARCHAR))
            for n, s in zip(names, specs, strict=True)
        ]
        return rows, columns

    def _rewrite_tables(self, tree: exp.Expr, current_db: str | None) -> dict[str, TableSchema]:
        """Point ``db.t`` at SQLite's ``"db.t"``; returns schemas by alias/name."""
        ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
        schemas: dict[str, TableSchema] = {}
        for t in list(tree.find_all(exp.Table)):
            name = t.name
            if not t.args.get("db") and name in ctes:
                continue
            db = t.db or current_db
            if not db:
                msg = "No database selected"
                raise SqlError(msg, 1046)
            schema = self._schema(db, name)
            alias = t.alias or name
            schemas[alias] = schema
            new = exp.Table(this=exp.Identifier(this=f"{db}.{name}", quoted=True))
            new.set("alias", exp.TableAlias(this=exp.Identifier(this=alias, quoted=True)))
            if isinstance(t.parent, (exp.Insert, exp.Schema)) or isinstance(
                tree, (exp.Insert, exp.Update, exp.Delete)
            ):
                new.set("alias", None)
            t.replace(new)
        return schemas


def _rewrite_decimals(tree: exp.Expr, decimals: set[str], projections: list[exp.Expr]) -> None:
    """Compare DECIMAL text as REAL outside the select list and SUM (module docstring)."""
    keep = {id(p.unalias()) for p in projections}
    for col in list(tree.find_all(exp.Column)):
        if col.name.lower() not in decimals or id(col) in keep:
            continue
        if isinstance(col.parent, exp.Sum):
            continue
        col.replace(exp.Cast(this=col.copy(), to=exp.DataType.build("DOUBLE")))


def _output_specs(
    projections: list[exp.Expr], names: list[str], schemas: dict[str, TableSchema]
) -> list[ColumnSpec | None]:
    """Which result columns carry a StarRocks type needing conversion (DECIMAL, DATE...)."""

    def by_name(name: str, table: str | None = None) -> ColumnSpec | None:
        if table and table in schemas:
            return schemas[table].column(name)
        for s in schemas.values():
            c = s.column(name)
            if c is not None:
                return c
        return None

    if not projections or any(isinstance(p, exp.Star) or p.is_star for p in projections):
        return [by_name(n) for n in names]
    out: list[ColumnSpec | None] = []
    for p in projections:
        inner = p.unalias()
        spec: ColumnSpec | None = None
        if isinstance(inner, exp.Column):
            spec = by_name(inner.name, inner.table or None)
        elif isinstance(inner, exp.Anonymous) and str(inner.this).upper() == "DECSUM":
            arg = inner.expressions[0] if inner.expressions else None
            if isinstance(arg, exp.Column):
                c = by_name(arg.name, arg.table or None)
                spec = c if c is not None and c.is_decimal else None
        out.append(spec)
    if len(out) != len(names):
        return [None] * len(names)
    return out
