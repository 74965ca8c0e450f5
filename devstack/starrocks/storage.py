"""SQLite storage: the catalog, the table data and the durable transaction metadata.

One SQLite file in the data dir holds every StarRocks database; table ``db.t`` is the SQLite
table ``"db.t"``. The file runs in WAL mode, so a reader statement sees one committed snapshot:
a transaction's rows for all its tables are applied in ONE SQLite write transaction at commit,
hence a single SELECT (a join across two tables included) never sees a partial commit, the
guarantee real StarRocks gives per statement.

Writes are serialised by one lock around one connection; loads never touch SQLite (they are
buffered in memory by :mod:`.txns`), so the lock is only held for commits, DDL and metadata.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from devstack.starrocks.catalog import CreateTable, TableSchema, quote_ident
from devstack.starrocks.errors import SqlError

OP_UPSERT = 0
OP_DELETE = 1

Row = tuple[Any, ...]
OpRow = tuple[int, Row]
TableRows = tuple[TableSchema, Sequence[OpRow]]

_META_DDL = (
    "CREATE TABLE IF NOT EXISTS _emu_databases (name TEXT PRIMARY KEY, id INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS _emu_tables (db TEXT NOT NULL, name TEXT NOT NULL,"
    " schema TEXT NOT NULL, PRIMARY KEY (db, name))",
    "CREATE TABLE IF NOT EXISTS _emu_txns (txn_id INTEGER PRIMARY KEY, meta TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS _emu_txn_rows (txn_id INTEGER NOT NULL, db TEXT NOT NULL,"
    " tbl TEXT NOT NULL, rows TEXT NOT NULL, PRIMARY KEY (txn_id, db, tbl))",
)


class DecimalSum:
    """SQLite aggregate that sums DECIMAL TEXT exactly (SQLite's SUM would go through float).

    Integers stay integers and floats stay floats, so it can replace SUM for every column.
    """

    def __init__(self) -> None:
        self.total: Any = None
        self.exact = False

    def step(self, value: Any) -> None:
        """Add one value (called by SQLite per row)."""
        if value is None:
            return
        if isinstance(value, str):
            try:
                value = Decimal(value)
                self.exact = True
            except InvalidOperation:
                value = 0
        if self.total is None:
            self.total = value
        elif isinstance(self.total, float) or isinstance(value, float):
            self.total = float(self.total) + float(value)
        else:
            self.total = self.total + value

    def finalize(self) -> Any:
        """The sum; DECIMAL text in, DECIMAL text out."""
        if isinstance(self.total, Decimal):
            return str(self.total)
        return self.total


def connect_reader(path: Path) -> sqlite3.Connection:
    """Open a read connection (one per query-port session) with the emulator's functions."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.create_aggregate("DECSUM", 1, DecimalSum)
    return conn


class Storage:
    """The catalog and table data of one emulator data dir."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / "starrocks.sqlite"
        self.lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode: durable across process crashes, which is what tests simulate.
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute("PRAGMA busy_timeout = 10000")
        self._conn.execute("PRAGMA cache_size = -65536")  # 64 MiB: large commits stay in memory
        for ddl in _META_DDL:
            self._conn.execute(ddl)
        self.databases: dict[str, int] = dict(
            self._conn.execute("SELECT name, id FROM _emu_databases").fetchall()
        )
        self.tables: dict[tuple[str, str], TableSchema] = {}
        # Tables whose committed rows are dropped instead of written (``discard_rows``).
        self.discarded: frozenset[tuple[str, str]] = frozenset()
        for db, name, schema in self._conn.execute("SELECT db, name, schema FROM _emu_tables"):
            self.tables[(db, name)] = TableSchema.from_json(db, name, json.loads(schema))

    def close(self) -> None:
        """Close the write connection."""
        with self.lock:
            self._conn.close()

    # -- catalog ---------------------------------------------------------------------------

    def create_database(self, name: str, if_not_exists: bool) -> None:
        """CREATE DATABASE; database ids start at 10001 like a fresh StarRocks."""
        with self.lock:
            if name in self.databases:
                if if_not_exists:
                    return
                msg = f"Can't create database '{name}'; database exists"
                raise SqlError(msg, 1007)
            new_id = max(self.databases.values(), default=10000) + 1
            self._conn.execute("INSERT INTO _emu_databases VALUES (?, ?)", (name, new_id))
            self.databases[name] = new_id

    def drop_database(self, name: str, if_exists: bool) -> None:
        """DROP DATABASE with all its tables."""
        with self.lock:
            if name not in self.databases:
                if if_exists:
                    return
                msg = f"Can't drop database '{name}'; database doesn't exist"
                raise SqlError(msg, 1008)
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for key in [k for k in self.tables if k[0] == name]:
                    self._conn.execute(f"DROP TABLE IF EXISTS {self.tables[key].sqlite_name}")
                    del self.tables[key]
                self._conn.execute("DELETE FROM _emu_tables WHERE db = ?", (name,))
                self._conn.execute("DELETE FROM _emu_databases WHERE name = ?", (name,))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            del self.databases[name]

    def create_table(self, ct: CreateTable, db: str, ddl: str) -> None:
        """CREATE TABLE in ``db``."""
        with self.lock:
            if db not in self.databases:
                msg = f"Unknown database '{db}'"
                raise SqlError(msg, 1049)
            if (db, ct.name) in self.tables:
                if ct.if_not_exists:
                    return
                msg = f"Table '{ct.name}' already exists"
                raise SqlError(msg, 1050)
            schema = TableSchema(db, ct.name, ct.columns, ct.keys_type, ct.key_columns, ddl)
            cols = ", ".join(f"{quote_ident(c.name)} {c.sqlite_type}" for c in ct.columns)
            pk = ""
            if schema.is_primary:
                pk = ", PRIMARY KEY (" + ", ".join(quote_ident(k) for k in ct.key_columns) + ")"
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                # WITHOUT ROWID: the primary key is the clustered key, one B-tree per table
                # instead of two, which roughly halves the cost of a large upsert commit.
                suffix = " WITHOUT ROWID" if schema.is_primary else ""
                self._conn.execute(f"CREATE TABLE {schema.sqlite_name} ({cols}{pk}){suffix}")
                self._conn.execute(
                    "INSERT INTO _emu_tables VALUES (?, ?, ?)",
                    (db, ct.name, json.dumps(schema.to_json())),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self.tables[(db, ct.name)] = schema

    def drop_table(self, db: str, name: str, if_exists: bool) -> None:
        """DROP TABLE."""
        with self.lock:
            schema = self.tables.get((db, name))
            if schema is None:
                if if_exists:
                    return
                msg = f"Unknown table '{db}.{name}'"
                raise SqlError(msg, 1051)
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute(f"DROP TABLE {schema.sqlite_name}")
                self._conn.execute("DELETE FROM _emu_tables WHERE db = ? AND name = ?", (db, name))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            del self.tables[(db, name)]

    def truncate_table(self, db: str, name: str) -> None:
        """TRUNCATE TABLE."""
        with self.lock:
            schema = self.tables.get((db, name))
            if schema is None:
                msg = f"Unknown table '{db}.{name}'"
                raise SqlError(msg, 1051)
            self._conn.execute(f"DELETE FROM {schema.sqlite_name}")

    def execute_write(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one already-rewritten DML statement (query-port INSERT/UPDATE/DELETE)."""
        with self.lock:
            try:
                cur = self._conn.execute(sql, params)
            except sqlite3.Error as e:
                raise SqlError(str(e), 1064) from e
            return cur.rowcount

    # -- transactions ----------------------------------------------------------------------

    def discard_rows(self, tables: Iterable[tuple[str, str]]) -> None:
        """From now on, commits drop the rows of ``tables`` (``(db, table)``) unwritten.

        Not StarRocks behaviour: a benchmark knob. StarRocks applies a commit's rows on its
        own nodes; the emulator does it in SQLite on the machine under test, and this shows
        what that costs the pipeline there. The transactions themselves are unchanged.
        """
        with self.lock:
            self.discarded = frozenset(tables)

    def commit_rows(
        self,
        changes: Iterable[TableRows],
        txn_meta: dict[str, Any] | None = None,
    ) -> None:
        """Apply every table's rows in load order, atomically, and record the txn's new state.

        Raises:
            sqlite3.Error: nothing was applied.
        """
        with self.lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for schema, rows in changes:
                    if (schema.db, schema.name) not in self.discarded:
                        _apply(self._conn, schema, rows)
                if txn_meta is not None:
                    self._save_meta(txn_meta)
                    self._conn.execute(
                        "DELETE FROM _emu_txn_rows WHERE txn_id = ?", (txn_meta["txn_id"],)
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def save_txn(self, txn_meta: dict[str, Any], rows: Iterable[TableRows] | None = None) -> None:
        """Persist a txn's metadata; with ``rows``, also its buffered rows (PREPARED txns)."""
        with self.lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._save_meta(txn_meta)
                self._conn.execute(
                    "DELETE FROM _emu_txn_rows WHERE txn_id = ?", (txn_meta["txn_id"],)
                )
                for schema, table_rows in rows or ():
                    self._conn.execute(
                        "INSERT INTO _emu_txn_rows VALUES (?, ?, ?, ?)",
                        (
                            txn_meta["txn_id"],
                            schema.db,
                            schema.name,
                            json.dumps([[op, list(r)] for op, r in table_rows]),
                        ),
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def delete_txns(self, txn_ids: Sequence[int]) -> None:
        """Forget expired labels."""
        with self.lock:
            self._conn.executemany(
                "DELETE FROM _emu_txns WHERE txn_id = ?", [(t,) for t in txn_ids]
            )
            self._conn.executemany(
                "DELETE FROM _emu_txn_rows WHERE txn_id = ?", [(t,) for t in txn_ids]
            )

    def load_txns(self) -> list[tuple[dict[str, Any], dict[tuple[str, str], list[OpRow]]]]:
        """Every persisted txn with its persisted rows, oldest first."""
        with self.lock:
            out = []
            rows_by_txn: dict[int, dict[tuple[str, str], list[OpRow]]] = {}
            for txn_id, db, tbl, rows in self._conn.execute(
                "SELECT txn_id, db, tbl, rows FROM _emu_txn_rows"
            ):
                rows_by_txn.setdefault(txn_id, {})[(db, tbl)] = [
                    (op, tuple(r)) for op, r in json.loads(rows)
                ]
            for txn_id, meta in self._conn.execute(
                "SELECT txn_id, meta FROM _emu_txns ORDER BY txn_id"
            ):
                out.append((json.loads(meta), rows_by_txn.get(txn_id, {})))
            return out

    def _save_meta(self, txn_meta: dict[str, Any]) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO _emu_txns VALUES (?, ?)",
            (txn_meta["txn_id"], json.dumps(txn_meta)),
        )


def _apply(conn: sqlite3.Connection, schema: TableSchema, rows: Sequence[OpRow]) -> None:
    """Apply rows in load order, batching runs of the same op into one executemany."""
    names = ", ".join(quote_ident(c.name) for c in schema.columns)
    marks = ", ".join("?" for _ in schema.columns)
    verb = "INSERT OR REPLACE INTO" if schema.is_primary else "INSERT INTO"
    insert_sql = f"{verb} {schema.sqlite_name} ({names}) VALUES ({marks})"
    key_idx = [i for i, c in enumerate(schema.columns) if c.name in schema.key_columns]
    delete_sql = f"DELETE FROM {schema.sqlite_name} WHERE " + " AND ".join(
        f"{quote_ident(schema.columns[i].name)} = ?" for i in key_idx
    )
    start = 0
    n = len(rows)
    while start < n:
        op = rows[start][0]
        end = start
        while end < n and rows[end][0] == op:
            end += 1
        if op == OP_DELETE and schema.is_primary:
            conn.executemany(delete_sql, [tuple(r[1][i] for i in key_idx) for r in rows[start:end]])
        else:
            conn.executemany(insert_sql, [r[1] for r in rows[start:end]])
        start = end
