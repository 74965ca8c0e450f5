"""Settings of the StarRocks sink, parsed once into a frozen, typed object.

Option names follow the StarRocks Flink connector where the meaning is the same (DESIGN.md §6),
so a user coming from Flink recognises them. Every option is documented in
``docs/starrocks-sink.md``. Unknown ``sink.*`` keys are rejected (a typo must not silently
fall back to a default).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NoReturn
from urllib.parse import urlsplit

from common.errors import ConfigError
from common.options import Options, Secret

__all__ = ["LABEL_SAFE", "Secret", "StarRocksSinkConfig"]

#: StarRocks label rule: at most 128 characters of ``[A-Za-z0-9_-]``.
LABEL_SAFE = re.compile(r"^[A-Za-z0-9_-]+$")
#: StarRocks' default session ``query_timeout`` (seconds).
QUERY_TIMEOUT_S = 300
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Load headers the sink owns: changing them would break the wire contract (JSON arrays with
# ``__op``) or the transaction (label/db/table/transaction_type are set per request).
_RESERVED_HEADERS = frozenset(
    {"label", "db", "table", "transaction_type", "authorization", "timeout", "expect"}
)
_FIXED_HEADERS = {"format": "json", "strip_outer_array": "true"}
# strict_mode: a value StarRocks cannot convert fails the load instead of loading as NULL
# (spec §5); filtered rows then fail the commit unless max_filter_ratio allows them.
_DEFAULT_PROPERTIES = {
    "format": "json",
    "strip_outer_array": "true",
    "ignore_json_size": "true",
    "strict_mode": "true",
}


@dataclass(frozen=True)
class StarRocksSinkConfig:
    """Typed StarRocks sink settings (see ``docs/starrocks-sink.md`` for each option)."""

    load_urls: tuple[str, ...]
    jdbc_host: str
    jdbc_port: int
    database: str
    tables: tuple[str, ...] | None  # None = every table of ``database`` (``table-name: *``)
    username: str
    password: Secret = field(repr=True)
    label_prefix: str = "cdc"
    pipeline_name: str = "cdc"
    multi_table: bool = True
    load_properties: Mapping[str, str] = field(default_factory=lambda: dict(_DEFAULT_PROPERTIES))
    table_properties: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    max_bytes_per_load: int = 64 * 1024 * 1024
    connect_timeout_s: float = 10.0
    socket_timeout_s: float = 300.0
    call_deadline_s: float = 300.0
    max_retries: int = 5
    retry_backoff_s: float = 0.5
    retry_max_backoff_s: float = 10.0
    txn_timeout_s: int = QUERY_TIMEOUT_S
    prepared_timeout_s: int | None = None
    commit_check_timeout_s: float = 60.0
    batch_max_attempts: int = 3
    progress_table: str = "_cdc_progress"
    dead_letter_table: str = "_cdc_dead_letter"
    create_system_tables: bool = True
    replication_num: int | None = None
    # Hosts a 307/308 may send this client (and its Authorization) to, besides the FEs of
    # load-url; "*" = any. StarRocks' FE redirects loads to a BE chosen by the FE.
    redirect_hosts: frozenset[str] = frozenset()
    # max_filter_ratio > 0 drops rows StarRocks rejects: only with this explicit consent.
    allow_filtered_rows: bool = False
    # "fail": a batch with rows StarRocks filters fails (every replay too); "dead-letter":
    # their source transactions are found by probing and dead-lettered (sinks/starrocks/isolate.py).
    filtered_rows: str = "fail"
    filtered_rows_max_txns: int = 10
    # Multi-table mode: the task that assembles a slot loads its rows (sinks/starrocks/intask.py);
    # false: a load job of its own takes them by table (one more stage and Python pass).
    load_in_task: bool = True
    # With load_in_task: a batch's commit runs while Spark starts the next batch
    # (sinks/starrocks/behind.py); false: write_batch returns once StarRocks committed.
    # Off by default: on the 2-core bench host it did not pay (docs/benchmarks.md, "Tried").
    commit_behind: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> StarRocksSinkConfig:
        """Parse connector-style string options.

        Args:
            options: Flat ``key -> string`` mapping (YAML section, ``--set`` overrides).

        Raises:
            common.errors.ConfigError: An option is missing, unknown or invalid; the message
                names the key and the accepted values.
        """
        return _parse(options)

    def properties_for(self, table: str) -> dict[str, str]:
        """Load headers for ``table``: ``sink.properties.*`` overlaid by per-table ones."""
        headers = dict(self.load_properties)
        headers.update(self.table_properties.get(table, {}))
        return headers

    def system_tables(self) -> tuple[str, str]:
        """The sink's own tables: (progress table, dead-letter table)."""
        return (self.progress_table, self.dead_letter_table)

    def caveats(self) -> list[str]:
        """Settings that work but deserve a warning at ``open()`` (logged, never fatal)."""
        notes = []
        if self.multi_table and self.txn_timeout_s > QUERY_TIMEOUT_S:
            # Audit finding 5 (inferred from StreamLoadMultiStmtTask.beginTxn): older 4.0
            # builds time the multi-table transaction out after the session query_timeout.
            notes.append(
                f"sink.transaction.timeout-s={self.txn_timeout_s} is above {QUERY_TIMEOUT_S}s: "
                "older StarRocks 4.0 builds may abort a multi-table transaction after the "
                "session query_timeout (300 s) whatever timeout says; keep micro-batches short"
            )
        return notes

    def allows_redirect_to(self, host: str) -> bool:
        """Whether a redirect may carry this client's credentials to ``host``."""
        if "*" in self.redirect_hosts:
            return True
        fe_hosts = {urlsplit(u).hostname for u in self.load_urls}
        return host.lower() in fe_hosts or host.lower() in self.redirect_hosts

    def allows_table(self, table: str) -> bool:
        """Whether input rows may target ``table`` (progress table is the sink's own)."""
        if table == self.progress_table:
            return False
        if table == self.dead_letter_table or self.tables is None:
            return True
        return table in self.tables


_KNOWN = frozenset(
    {
        "load-url",
        "jdbc-url",
        "database-name",
        "table-name",
        "username",
        "password",
        "sink.label-prefix",
        "sink.pipeline-name",
        "sink.transaction.multi-table.enabled",
        "sink.buffer-flush.max-bytes",
        "sink.buffer-flush.interval-ms",
        "sink.connect.timeout-ms",
        "sink.socket.timeout-ms",
        "sink.call.deadline-ms",
        "sink.max-retries",
        "sink.retry.backoff-ms",
        "sink.retry.max-backoff-ms",
        "sink.transaction.timeout-s",
        "sink.prepared-timeout-s",
        "sink.commit.check-timeout-ms",
        "sink.batch.max-attempts",
        "sink.progress-table",
        "sink.dead-letter-table",
        "sink.create-system-tables",
        "sink.ddl.replication-num",
        "sink.redirect.allowed-hosts",
        "sink.allow-filtered-rows",
        "sink.filtered-rows",
        "sink.filtered-rows.max-transactions",
        "sink.load-in-task",
        "sink.commit-behind",
    }
)
_PROPERTIES_PREFIX = "sink.properties."


_WHAT = "StarRocks sink option"


def _msg(key: str, problem: str) -> str:
    return f"{_WHAT} {key!r}: {problem}"


def _fail(key: str, problem: str) -> NoReturn:
    raise ConfigError(_msg(key, problem))


def _required(options: Mapping[str, str], key: str) -> str:
    value = Options(options, what=_WHAT).raw(key)
    if value is None:
        _fail(key, "is required (see docs/starrocks-sink.md)")
    return value


def _ident(key: str, value: str) -> str:
    if not _IDENT.match(value) or len(value) > 64:
        _fail(key, f"{value!r} is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)")
    return value


def _load_urls(raw: str) -> tuple[str, ...]:
    urls = []
    for part in raw.split(","):
        host = part.strip()
        if not host:
            continue
        url = host if "://" in host else f"http://{host}"
        try:
            parsed = urlsplit(url)
            port = parsed.port
        except ValueError as e:  # a port out of 0-65535 or not a number, a broken [IPv6]
            raise ConfigError(_msg("load-url", f"{host!r} is not host:port ({e})")) from e
        if parsed.scheme not in ("http", "https") or not parsed.hostname or not port:
            _fail("load-url", f"{host!r} is not host:port (FE HTTP address)")
        urls.append(f"{parsed.scheme}://{parsed.hostname}:{port}")
    if not urls:
        _fail("load-url", "lists no FE address")
    return tuple(urls)


def _jdbc(raw: str) -> tuple[str, int]:
    if not raw.startswith("jdbc:mysql://"):
        _fail("jdbc-url", f"must look like jdbc:mysql://host:port, got {raw!r}")
    # One address is enough for validation/DDL; the first one of a list is used.
    first = raw[len("jdbc:") :].split(",")[0]
    try:
        parsed = urlsplit(first)
        port = parsed.port
    except ValueError as e:
        raise ConfigError(_msg("jdbc-url", f"has an invalid port: {raw!r}")) from e
    if not parsed.hostname or not port:
        _fail("jdbc-url", f"must look like jdbc:mysql://host:port, got {raw!r}")
    return parsed.hostname, port


def _tables(raw: str, database: str) -> tuple[str, ...] | None:
    if raw.strip() == "*":
        return None
    tables: list[str] = []
    for part in raw.split(","):
        name = part.strip()
        if not name:
            continue
        if "." in name:
            # ``db.table`` is accepted for Flink users, but a multi-table transaction is
            # database-scoped (protocol spec §2.3): every table must live in database-name.
            db, _, name = name.partition(".")
            if db != database:
                _fail(
                    "table-name",
                    f"table {part.strip()!r} is in database {db!r} but database-name is "
                    f"{database!r}; one sink writes one database (StarRocks transactions "
                    "are database-scoped): run one pipeline per database",
                )
        tables.append(_ident("table-name", name))
    if not tables:
        _fail("table-name", "lists no table (use '*' for every table)")
    return tuple(dict.fromkeys(tables))


def _properties(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    common_props = dict(_DEFAULT_PROPERTIES)
    per_table: dict[str, dict[str, str]] = {}
    for key, value in options.items():
        if not key.startswith(_PROPERTIES_PREFIX):
            continue
        rest = key[len(_PROPERTIES_PREFIX) :]
        # Stream Load header names never contain a dot, so ``<table>.<header>`` is unambiguous.
        table, dot, header = rest.rpartition(".")
        header = header.strip().lower()
        if not header:
            _fail(key, "names no load header")
        if header in _RESERVED_HEADERS:
            _fail(key, f"header {header!r} is set by the sink itself and cannot be changed")
        fixed = _FIXED_HEADERS.get(header)
        if fixed is not None and str(value).strip().lower() != fixed:
            _fail(key, f"the sink sends JSON arrays, so {header!r} must be {fixed!r}")
        if dot:
            per_table.setdefault(_ident(key, table), {})[header] = str(value)
        else:
            common_props[header] = str(value)
    return common_props, per_table


def _parse(options: Mapping[str, str]) -> StarRocksSinkConfig:
    for key in options:
        if key not in _KNOWN and not key.startswith(_PROPERTIES_PREFIX):
            _fail(key, "is not a StarRocks sink option (see docs/starrocks-sink.md)")
    database = _ident("database-name", _required(options, "database-name"))
    jdbc_host, jdbc_port = _jdbc(_required(options, "jdbc-url"))
    prefix = str(options.get("sink.label-prefix", "cdc")).strip()
    if not prefix or not LABEL_SAFE.match(prefix) or len(prefix) > 32:
        _fail("sink.label-prefix", f"must be 1-32 chars of [A-Za-z0-9_-], got {prefix!r}")
    pipeline = str(options.get("sink.pipeline-name", prefix)).strip()
    if not pipeline or len(pipeline) > 128:
        _fail("sink.pipeline-name", "must be 1-128 characters")
    props, per_table = _properties(options)
    progress = _ident(
        "sink.progress-table", str(options.get("sink.progress-table", "_cdc_progress"))
    )
    dead_letter = _ident(
        "sink.dead-letter-table", str(options.get("sink.dead-letter-table", "_cdc_dead_letter"))
    )
    if progress == dead_letter:
        _fail("sink.dead-letter-table", "must differ from sink.progress-table")
    tables = _tables(_required(options, "table-name"), database)
    if tables is not None and progress in tables:
        _fail("table-name", f"must not list the sink's progress table {progress!r}")
    opt = Options(options, what=_WHAT)
    prepared = opt.duration_s("sink.prepared-timeout-s", 0, unit="s", minimum=0)
    replication = opt.integer("sink.ddl.replication-num", 0, minimum=0)
    backoff_s = opt.duration_s("sink.retry.backoff-ms", 0.5, unit="ms", minimum=0)
    max_backoff_s = opt.duration_s("sink.retry.max-backoff-ms", 10.0, unit="ms", minimum=0)
    if max_backoff_s < backoff_s:
        _fail("sink.retry.max-backoff-ms", "must be >= sink.retry.backoff-ms")
    # sink.buffer-flush.interval-ms is the app's trigger interval (one transaction per
    # micro-batch); the sink itself only checks its spelling.
    opt.duration_s("sink.buffer-flush.interval-ms", 0, unit="ms", minimum=0)
    socket_timeout_s = opt.duration_s("sink.socket.timeout-ms", 300.0, unit="ms", minimum=0.001)
    allow_filtered = opt.boolean("sink.allow-filtered-rows", False)
    for table, headers in (("", props), *per_table.items()):
        ratio = headers.get("max_filter_ratio", "0")
        try:
            drops = float(ratio) > 0
        except ValueError:
            drops = True  # StarRocks refuses it at load time; say so here, by key
        if drops and not allow_filtered:
            key = f"sink.properties.{table + '.' if table else ''}max_filter_ratio"
            _fail(
                key,
                f"={ratio} lets StarRocks drop rows it cannot load, silently; set "
                "sink.allow-filtered-rows=true to accept that (dropped rows are then logged "
                "per batch), or leave it at 0",
            )
    multi_table = opt.boolean("sink.transaction.multi-table.enabled", True)
    if allow_filtered and multi_table:
        # A multi-table commit answers without NumberFilteredRows (StreamLoadMultiStmtTask):
        # drops there could never be reported.
        _fail(
            "sink.allow-filtered-rows",
            "needs sink.transaction.multi-table.enabled=false: a multi-table transaction's "
            "answers do not say how many rows StarRocks dropped, so drops could not be reported",
        )
    filtered_rows = str(options.get("sink.filtered-rows", "fail")).strip()
    if filtered_rows not in ("fail", "dead-letter"):
        _fail("sink.filtered-rows", f"must be fail or dead-letter, got {filtered_rows!r}")
    redirect_hosts = frozenset(
        h.strip().lower()
        for h in str(options.get("sink.redirect.allowed-hosts", "")).split(",")
        if h.strip()
    )
    return StarRocksSinkConfig(
        load_urls=_load_urls(_required(options, "load-url")),
        jdbc_host=jdbc_host,
        jdbc_port=jdbc_port,
        database=database,
        tables=tables,
        username=_required(options, "username"),
        password=opt.secret("password"),
        label_prefix=prefix,
        pipeline_name=pipeline,
        multi_table=multi_table,
        load_properties=props,
        table_properties=per_table,
        max_bytes_per_load=opt.size("sink.buffer-flush.max-bytes", 64 * 1024 * 1024, minimum=1024),
        connect_timeout_s=opt.duration_s("sink.connect.timeout-ms", 10.0, unit="ms", minimum=0.001),
        socket_timeout_s=socket_timeout_s,
        call_deadline_s=opt.duration_s(
            "sink.call.deadline-ms", max(300.0, socket_timeout_s), unit="ms", minimum=0.001
        ),
        max_retries=opt.integer("sink.max-retries", 5, minimum=0),
        retry_backoff_s=backoff_s,
        retry_max_backoff_s=max_backoff_s,
        txn_timeout_s=round(
            opt.duration_s("sink.transaction.timeout-s", QUERY_TIMEOUT_S, unit="s", minimum=1)
        ),
        prepared_timeout_s=round(prepared) or None,
        commit_check_timeout_s=opt.duration_s(
            "sink.commit.check-timeout-ms", 60.0, unit="ms", minimum=0
        ),
        batch_max_attempts=opt.integer("sink.batch.max-attempts", 3, minimum=1),
        progress_table=progress,
        dead_letter_table=dead_letter,
        create_system_tables=opt.boolean("sink.create-system-tables", True),
        replication_num=replication or None,
        redirect_hosts=redirect_hosts,
        allow_filtered_rows=allow_filtered,
        filtered_rows=filtered_rows,
        filtered_rows_max_txns=opt.integer("sink.filtered-rows.max-transactions", 10, minimum=1),
        load_in_task=opt.boolean("sink.load-in-task", True),
        commit_behind=opt.boolean("sink.commit-behind", False),
    )
