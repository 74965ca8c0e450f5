"""Exactly-once StarRocks sink over the Stream Load transaction API.

Multi-table mode (default, StarRocks 4.0+): one transaction per micro-batch spanning every
target table and the progress table, so a micro-batch becomes visible atomically.
Per-table mode (``sink.transaction.multi-table.enabled=false``, StarRocks 2.4-3.x): one
label per table, prepare all, then commit all: exactly-once per table, NOT atomic across
tables. See ``docs/starrocks-sink.md``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from common.errors import Terminal, Transient
from sinks.base import Sink, TargetStats, collect_target_stats
from sinks.exceptions import SinkError, SinkTerminalError, SinkTransientError
from sinks.starrocks.client import Backoff, StarRocksClient
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.errors import (
    CommitOutcomeUnknownError,
    InvalidRequestError,
    LabelAlreadyExistsError,
    StarRocksError,
    StarRocksTerminalError,
    TransactionAbortedError,
    TransactionCommittedError,
)
from sinks.starrocks.labels import make_label
from sinks.starrocks.loader import (
    LOADER_COLUMNS,
    REPORT_SCHEMA,
    LoadPlan,
    PartitionLoader,
    TableReport,
    parse_reports,
    progress_body,
)
from sinks.starrocks.protocol import LoadState
from sinks.starrocks.sql import StarRocksSql, dead_letter_table_ddl, progress_table_ddl
from sinks.starrocks.transaction import SinkTransaction, TxnStatus

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)

#: Columns of the input contract this sink reads (extra columns are ignored).
INPUT_COLUMNS = (
    "topic",
    "partition",
    "txn_id",
    "txn_seq",
    "row_seq",
    "database",
    "table",
    "op",
    "row",
    "last_offset",
)
# Recovery walks attempts 0, 1, ...; a batch needing more than this many is a crash loop.
_MAX_ATTEMPT_NUMBER = 1000
# Extra attempts checked after the first free one: an old label may have expired from the
# server (label_keep_max_second) while a later attempt of the same batch is still known.
_LOOKAHEAD = 2
#: Named points where a test (or the fault-injection harness) may simulate a crash.
FAULT_POINTS = (
    "after_begin",
    "after_load",
    "before_commit",
    "after_prepare",
    "after_first_commit",
    "after_commit",
    "during_recovery",
)


@dataclass(frozen=True)
class BatchResult:
    """What :meth:`StarRocksSink.write_batch` did, for logs and the app's progress display."""

    batch_id: int
    outcome: str  # "committed" | "already_applied" | "recovered" | "empty"
    labels: tuple[str, ...] = ()
    attempt: int = 0
    rows_per_table: Mapping[str, int] = field(default_factory=dict)
    bytes_per_table: Mapping[str, int] = field(default_factory=dict)
    load_requests: int = 0
    source_partitions: int = 0
    commit_latency_ms: float = 0.0
    total_ms: float = 0.0

    @property
    def label(self) -> str | None:
        """The batch's label (multi-table mode) or the first one (per-table mode)."""
        return self.labels[0] if self.labels else None

    @property
    def skipped(self) -> bool:
        """True when the batch had already been applied by an earlier run (a replay)."""
        return self.outcome == "already_applied"

    @property
    def rows(self) -> int:
        """Rows written in this batch (progress rows excluded)."""
        return sum(self.rows_per_table.values())

    @property
    def bytes(self) -> int:
        """JSON bytes sent for data tables."""
        return sum(self.bytes_per_table.values())


class StarRocksSink(Sink):
    """Exactly-once, per-micro-batch-atomic sink into StarRocks.

    Args:
        config: Parsed sink settings.
        query_id_provider: Returns the persistent streaming query id (the same after a
            restart from the same checkpoint). Called on the driver at each ``write_batch``.
        fault_hook: Test/fault-injection hook called at each point of :data:`FAULT_POINTS`
            with the point name; raising a ``BaseException`` there simulates a crash (no
            cleanup runs, exactly like ``kill -9``).
        sleep: Injected for tests of backoff timing.
    """

    def __init__(
        self,
        config: StarRocksSinkConfig,
        query_id_provider: Callable[[], str],
        *,
        fault_hook: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._query_id_provider = query_id_provider
        self._fault_hook = fault_hook
        self._sleep = sleep
        self._backoff = Backoff(config.retry_backoff_s, config.retry_max_backoff_s)
        self._client: StarRocksClient | None = None
        self._known_tables: set[str] | None = None
        self.last_result: BatchResult | None = None

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], query_id_provider: Callable[[], str]
    ) -> StarRocksSink:
        """Build from connector-style options (raises ``ConfigError`` naming the key)."""
        return cls(StarRocksSinkConfig.from_options(options), query_id_provider)

    # -- contract -----------------------------------------------------------------------------

    def open(self) -> None:
        """Validate the target before the first batch (driver).

        Checks, in order: label rule with this prefix; the query port answers with these
        credentials; the server version supports the chosen mode; the database exists;
        every configured table exists; the progress and dead-letter tables exist (created
        with ``CREATE TABLE IF NOT EXISTS`` unless ``sink.create-system-tables=false``);
        the FE answers the transaction API (``get_load_state`` on a probe label).

        Raises:
            SinkTerminalError: With a message naming what is wrong and what to do.
            SinkTransientError: StarRocks is unreachable.
        """
        cfg = self.config
        # A 36-character UUID query id and large counters must still fit the label rule.
        probe_qid = "00000000-0000-0000-0000-000000000000"
        longest_table = max((*(cfg.tables or ()), *cfg.system_tables()), key=len)
        make_label(
            cfg.label_prefix, probe_qid, 10**12, 999, longest_table if not cfg.multi_table else None
        )

        with StarRocksSql(cfg) as sql:
            self._check_version(sql)
            existing = sql.tables(cfg.database)
            if cfg.tables is not None:
                missing = sorted(set(cfg.tables) - existing)
                if missing:
                    msg = (
                        f"StarRocks tables {', '.join(missing)} do not exist in database "
                        f"{cfg.database}: create them (PRIMARY KEY tables) or fix table-name"
                    )
                    raise SinkTerminalError(msg, tables=missing)
            for name, ddl in (
                (cfg.progress_table, progress_table_ddl(cfg)),
                (cfg.dead_letter_table, dead_letter_table_ddl(cfg)),
            ):
                if name in existing:
                    continue
                if not cfg.create_system_tables:
                    msg = (
                        f"StarRocks table {cfg.database}.{name} is missing and "
                        "sink.create-system-tables=false: create it (see docs/starrocks-sink.md)"
                    )
                    raise SinkTerminalError(msg, table=name)
                sql.query(ddl)
                logger.info("starrocks created table db=%s table=%s", cfg.database, name)
            self._known_tables = sql.tables(cfg.database)

        state = self._get_client().get_load_state(f"{cfg.label_prefix}-probe-{int(time.time())}")
        logger.info(
            "starrocks sink open db=%s tables=%s mode=%s fe=%s probe_state=%s",
            cfg.database,
            ",".join(cfg.tables) if cfg.tables else "*",
            "multi-table" if cfg.multi_table else "per-table",
            ",".join(cfg.load_urls),
            state,
        )

    def write_batch(
        self, batch_df: DataFrame, batch_id: int, stats: Sequence[TargetStats] | None = None
    ) -> BatchResult:
        """Write one micro-batch exactly once (driver, from ``foreachBatch``).

        An empty batch writes nothing and opens no transaction (the progress table then
        keeps the previous cut, which is still correct). See the module docstring for the
        two modes and :meth:`_write_multi` / :meth:`_write_per_table` for the steps.
        ``stats`` (see :class:`sinks.base.TargetStats`) saves the sink's own aggregate job.
        """
        started = time.monotonic()
        query_id = self._query_id_provider()
        make_label(self.config.label_prefix, query_id, batch_id, 0)  # fail fast on a bad id
        from pyspark import StorageLevel

        # Multi-table recovery needs no data: an already-applied batch costs one HTTP call.
        attempt, applied = (
            self._recover_multi(query_id, batch_id) if self.config.multi_table else (0, None)
        )
        if applied is not None:
            result = BatchResult(
                batch_id=batch_id, outcome="already_applied", labels=(applied,), attempt=attempt
            )
        else:
            # Read twice (stats, then load): cache unless the caller already did, so the
            # upstream (stateful) plan is not recomputed.
            level = batch_df.storageLevel
            df = batch_df.select(*INPUT_COLUMNS)
            cached_here = stats is None and not (level.useMemory or level.useDisk)
            if cached_here:
                df = df.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                targets = list(stats) if stats is not None else collect_target_stats(df)
                if not targets:
                    result = BatchResult(batch_id=batch_id, outcome="empty")
                else:
                    self._validate_targets(targets)
                    if self.config.multi_table:
                        result = self._write_multi(df, batch_id, query_id, targets, attempt)
                    else:
                        result = self._write_per_table(df, batch_id, query_id, targets)
            finally:
                if cached_here:
                    df.unpersist()
        result = _with_total(result, (time.monotonic() - started) * 1000)
        self.last_result = result
        logger.info(
            "starrocks batch batch_id=%s outcome=%s labels=%s attempt=%s rows=%s bytes=%s "
            "requests=%s partitions=%s commit_ms=%.0f total_ms=%.0f",
            batch_id,
            result.outcome,
            ",".join(result.labels),
            result.attempt,
            dict(result.rows_per_table),
            result.bytes,
            result.load_requests,
            result.source_partitions,
            result.commit_latency_ms,
            result.total_ms,
        )
        return result

    def close(self) -> None:
        """Close the HTTP client (driver). Open transactions are left to recovery."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- multi-table mode -----------------------------------------------------------------

    def _write_multi(
        self, df: DataFrame, batch_id: int, query_id: str, stats: list[TargetStats], attempt: int
    ) -> BatchResult:
        """Multi-table mode: one transaction for the whole batch (DESIGN.md §5).

        1. Recovery (:meth:`_recover_multi`, before any Spark job): for attempt 0, 1, ...
           ask ``get_load_state`` of ``{prefix}-{query id}-{batch id}-{attempt}``.
           COMMITTED/VISIBLE: the batch is already applied, return. PREPARE/PREPARED: a
           crashed attempt, roll it back and go on. ABORTED: go on. UNKNOWN: this attempt
           is free (a rolled-back multi-table label stays blocked, hence the counter).
        2. ``begin`` with ``transaction_type: multi`` and ``timeout``. An ambiguous begin is
           settled by the label state, never by guessing.
        3. Load on the executors: repartition by table, sort by (partition, txn_seq,
           row_seq), one in-flight JSON-array load per table, chunked by
           ``sink.buffer-flush.max-bytes``; each task reports rows/bytes/errors.
        4. In the same transaction, upsert one progress row per source (topic, partition):
           last offset, last txn id, batch id, label, commit time.
        5. ``commit``. On an error or a lost response ``get_load_state`` decides (bounded):
           COMMITTED/VISIBLE is success; ABORTED means retry the batch.
        6. Any failure before commit: roll back the label, and once it is known ABORTED retry
           the batch under attempt + 1 (at most ``sink.batch.max-attempts`` times per call)
           if the failure is transient; raise at once if it is terminal.
        """
        cfg = self.config
        tables = sorted({s.table for s in stats if s.table})
        progress = self._progress_rows(stats, batch_id)
        last_error: BaseException | None = None
        label = ""
        for _try in range(cfg.batch_max_attempts):
            label = make_label(cfg.label_prefix, query_id, batch_id, attempt)
            txn = SinkTransaction(label)
            try:
                self._begin(txn)
                self._fault("after_begin")
                reports = self._run_load_job(
                    df, LoadPlan(cfg, dict.fromkeys(tables, label), True, batch_id)
                )
                self._raise_load_errors(reports, label)
                prows = [{**row, "label": label} for row in progress]
                self._load_progress(txn, prows, multi=True)
                txn.mark_loaded(set(tables))
                self._fault("after_load")
            except Exception as e:
                last_error = e
                self._rollback(txn)
                if not _batch_retryable(e):
                    raise
                logger.warning(
                    "starrocks batch retry batch_id=%s label=%s attempt=%s error=%s",
                    batch_id,
                    label,
                    attempt,
                    e,
                )
                if txn.status != TxnStatus.NEW:
                    attempt += 1  # the label was used: it stays blocked, take the next one
                continue
            self._fault("before_commit")
            commit_started = time.monotonic()
            try:
                self._commit(txn)
            except TransactionAbortedError as e:
                # The label is known ABORTED (checked by _commit): a new attempt is safe.
                last_error = e
                attempt += 1
                continue
            commit_ms = (time.monotonic() - commit_started) * 1000
            self._fault("after_commit")
            return _result(batch_id, "committed", (label,), attempt, reports, stats, commit_ms)
        msg = (
            f"StarRocks batch {batch_id} failed {cfg.batch_max_attempts} times "
            f"(last label {label}): "
            f"{last_error}. Every attempt was rolled back; fix the cause and restart the query "
            "(the batch is replayed from the checkpoint)"
        )
        raise SinkTerminalError(msg, batch_id=batch_id) from last_error

    def _recover_multi(self, query_id: str, batch_id: int) -> tuple[int, str | None]:
        """Step 1: (first free attempt, None), or (attempt, label) if already applied."""
        cfg = self.config
        attempt = 0
        while attempt < _MAX_ATTEMPT_NUMBER:
            label = make_label(cfg.label_prefix, query_id, batch_id, attempt)
            state = self._state(label)
            if state.is_committed:
                logger.info(
                    "starrocks batch already applied batch_id=%s label=%s state=%s",
                    batch_id,
                    label,
                    state,
                )
                return attempt, label
            if state in (LoadState.PREPARE, LoadState.PREPARED):
                logger.warning(
                    "starrocks rolling back crashed attempt label=%s state=%s", label, state
                )
                self._fault("during_recovery")
                if self._rollback(SinkTransaction(label, status=TxnStatus.OPEN)):
                    return attempt, label  # it turned out committed
            elif state == LoadState.UNKNOWN:
                later = self._later_known_attempt(query_id, batch_id, attempt, None)
                if later is None:
                    return attempt, None
                attempt = later
                continue
            attempt += 1
        msg = f"StarRocks batch {batch_id} has more than {_MAX_ATTEMPT_NUMBER} attempts"
        raise SinkTerminalError(msg, batch_id=batch_id)

    def _later_known_attempt(
        self, query_id: str, batch_id: int, attempt: int, table: str | None
    ) -> int | None:
        cfg = self.config
        for ahead in range(attempt + 1, attempt + 1 + _LOOKAHEAD):
            label = make_label(cfg.label_prefix, query_id, batch_id, ahead, table)
            if self._state(label) != LoadState.UNKNOWN:
                return ahead
        return None

    # -- per-table mode --------------------------------------------------------------------

    def _write_per_table(
        self, df: DataFrame, batch_id: int, query_id: str, stats: list[TargetStats]
    ) -> BatchResult:
        """Per-table mode: one label per table; prepare all, then commit all.

        Exactly-once per table, not atomic across tables (StarRocks 2.4-3.x have no
        multi-table transactions): a reader may see table A of a batch before table B.

        1. Recovery, for attempt 0, 1, ...: read the state of every table's label
           ``{prefix}-{query id}-{batch id}-{attempt}-{table}``. All UNKNOWN: free, use it.
           All PREPARED/COMMITTED/VISIBLE: the batch was fully prepared before a crash,
           commit the PREPARED ones (no reload) and return. Otherwise roll back every
           PREPARE/PREPARED label of that attempt and go on.
        2. ``begin`` every table (data tables and the progress table).
        3. Load on the executors as in multi-table mode, then the progress rows.
        4. ``prepare`` every table (a prepared transaction survives a crash until
           ``prepared_timeout``).
        5. ``commit`` every table; a failed/lost commit is decided by the label state and
           retried on the same label, never reloaded.
        6. Failure before every table is PREPARED: roll back all labels of the attempt and
           retry under attempt + 1 (transient) or raise (terminal).
        """
        cfg = self.config
        data_tables = sorted({s.table for s in stats if s.table})
        all_tables = [*data_tables, cfg.progress_table]
        recovered = self._recover_per_table(query_id, batch_id, all_tables)
        if isinstance(recovered, BatchResult):
            return recovered
        attempt = recovered
        progress = self._progress_rows(stats, batch_id)
        last_error: BaseException | None = None
        for _try in range(cfg.batch_max_attempts):
            labels = {
                t: make_label(cfg.label_prefix, query_id, batch_id, attempt, t) for t in all_tables
            }
            txns = {t: SinkTransaction(labels[t], table=t) for t in all_tables}
            try:
                for t in all_tables:
                    self._begin(txns[t])
                self._fault("after_begin")
                reports = self._run_load_job(
                    df, LoadPlan(cfg, {t: labels[t] for t in data_tables}, False, batch_id)
                )
                self._raise_load_errors(reports, labels[data_tables[0]])
                prows = [{**row, "label": labels[cfg.progress_table]} for row in progress]
                self._load_progress(txns[cfg.progress_table], prows, multi=False)
                for t in all_tables:
                    txns[t].mark_loaded({t})
                self._fault("after_load")
                for t in all_tables:
                    self._prepare(txns[t])
            except Exception as e:
                last_error = e
                for txn in txns.values():
                    if txn.status != TxnStatus.NEW:
                        self._rollback(txn)
                if not _batch_retryable(e):
                    raise
                logger.warning(
                    "starrocks batch retry batch_id=%s attempt=%s error=%s", batch_id, attempt, e
                )
                if any(txn.status != TxnStatus.NEW for txn in txns.values()):
                    attempt += 1
                continue
            self._fault("after_prepare")
            commit_ms = self._commit_all(txns)
            return _result(
                batch_id, "committed", tuple(labels.values()), attempt, reports, stats, commit_ms
            )
        msg = (
            f"StarRocks batch {batch_id} failed {cfg.batch_max_attempts} times: {last_error}. "
            "Every attempt was rolled back; fix the cause and restart the query"
        )
        raise SinkTerminalError(msg, batch_id=batch_id) from last_error

    def _recover_per_table(
        self, query_id: str, batch_id: int, tables: list[str]
    ) -> int | BatchResult:
        cfg = self.config
        attempt = 0
        while attempt < _MAX_ATTEMPT_NUMBER:
            labels = {
                t: make_label(cfg.label_prefix, query_id, batch_id, attempt, t) for t in tables
            }
            states = {t: self._state(labels[t]) for t in tables}
            if all(s == LoadState.UNKNOWN for s in states.values()):
                later = self._later_known_attempt(query_id, batch_id, attempt, tables[-1])
                if later is None:
                    return attempt
                attempt = later
                continue
            done = {t for t, s in states.items() if s.is_committed}
            prepared = {t for t, s in states.items() if s == LoadState.PREPARED}
            if done | prepared == set(tables):
                logger.warning(
                    "starrocks recovering prepared batch batch_id=%s attempt=%s committed=%s "
                    "prepared=%s",
                    batch_id,
                    attempt,
                    sorted(done),
                    sorted(prepared),
                )
                txns = {
                    t: SinkTransaction(
                        labels[t],
                        table=t,
                        status=TxnStatus.COMMITTED if t in done else TxnStatus.PREPARED,
                    )
                    for t in tables
                }
                commit_ms = self._commit_all(txns)
                return BatchResult(
                    batch_id=batch_id,
                    outcome="recovered" if prepared else "already_applied",
                    labels=tuple(labels.values()),
                    attempt=attempt,
                    commit_latency_ms=commit_ms,
                )
            if done:
                msg = (
                    f"StarRocks batch {batch_id} attempt {attempt} is committed for "
                    f"{sorted(done)} but not prepared for {sorted(set(tables) - done - prepared)} "
                    "(prepared transactions expired?). Per-table mode cannot repair this "
                    "automatically: check those tables, raise sink.prepared-timeout-s, and "
                    "restart from a checkpoint you trust"
                )
                raise SinkTerminalError(msg, batch_id=batch_id)
            for t, s in states.items():
                if s in (LoadState.PREPARE, LoadState.PREPARED):
                    self._rollback(SinkTransaction(labels[t], table=t, status=TxnStatus.OPEN))
            attempt += 1
        msg = f"StarRocks batch {batch_id} has more than {_MAX_ATTEMPT_NUMBER} attempts"
        raise SinkTerminalError(msg, batch_id=batch_id)

    def _commit_all(self, txns: Mapping[str, SinkTransaction]) -> float:
        started = time.monotonic()
        first = True
        for txn in txns.values():
            if txn.status == TxnStatus.COMMITTED:
                continue
            try:
                self._commit(txn)
            except TransactionAbortedError as e:
                msg = (
                    f"StarRocks prepared label {txn.label} was aborted before commit "
                    f"({e}); per-table mode: table {txn.table} misses this batch while other "
                    "tables may have it. Raise sink.prepared-timeout-s and restart from a "
                    "checkpoint you trust"
                )
                raise SinkTerminalError(msg, label=txn.label, table=txn.table) from e
            if first:
                first = False
                self._fault("after_first_commit")
        self._fault("after_commit")
        return (time.monotonic() - started) * 1000

    # -- protocol steps ----------------------------------------------------------------------

    def _begin(self, txn: SinkTransaction) -> None:
        """Begin ``txn``; an ambiguous answer is settled by the label's state."""
        client = self._get_client()
        multi = txn.table is None
        for retry in range(self.config.max_retries + 1):
            try:
                client.begin(
                    txn.label, multi=multi, table=txn.table, timeout_s=self.config.txn_timeout_s
                )
                txn.mark_open()
                return
            except LabelAlreadyExistsError as e:
                if retry > 0 and self._state(txn.label) == LoadState.PREPARE:
                    txn.mark_open()  # our earlier begin landed; its answer was lost
                    return
                msg = (
                    f"StarRocks label {txn.label} is already in use by another writer: {e}. "
                    "Run exactly one query per checkpoint and give every pipeline its own "
                    "sink.label-prefix"
                )
                raise SinkTerminalError(msg, label=txn.label) from e
            except SinkTransientError:
                state = self._state(txn.label)
                if state == LoadState.PREPARE:
                    txn.mark_open()
                    return
                if state != LoadState.UNKNOWN or retry >= self.config.max_retries:
                    raise
                self._sleep(self._backoff.delay(retry))

    def _prepare(self, txn: SinkTransaction) -> None:
        """Single-table prepare; TXN_NOT_EXISTS/lost answers are settled by the state."""
        client = self._get_client()
        for retry in range(self.config.max_retries + 1):
            try:
                client.prepare(txn.label, table=txn.table)
                txn.mark_prepared()
                return
            except SinkTransientError:
                state = self._state(txn.label)
                if state == LoadState.PREPARED:
                    txn.mark_prepared()
                    return
                if state != LoadState.PREPARE or retry >= self.config.max_retries:
                    raise
                self._sleep(self._backoff.delay(retry))

    def _commit(self, txn: SinkTransaction) -> None:
        """Commit ``txn``; success is COMMITTED/VISIBLE as reported by the server.

        Raises:
            TransactionAbortedError: The label is known ABORTED (safe to use a new attempt).
            SinkTerminalError: The commit was refused for a reason retrying cannot fix; the
                label has been rolled back.
            SinkTransientError: The outcome is still unknown after
                ``sink.commit.check-timeout-ms``; recovery decides on the next run.
        """
        client = self._get_client()
        multi = txn.table is None
        txn.mark_committing()
        try:
            client.commit(txn.label, multi=multi, table=txn.table)
            txn.mark_committed()
            return
        except TransactionCommittedError:
            txn.mark_committed()
            return
        except StarRocksError as e:
            first_error: StarRocksError = e
        logger.warning(
            "starrocks commit unclear label=%s error=%s; asking the label state",
            txn.label,
            first_error,
        )
        deadline = time.monotonic() + self.config.commit_check_timeout_s
        retry = 0
        while True:
            state = self._state(txn.label)
            if state.is_committed:
                txn.mark_committed()
                return
            if state == LoadState.ABORTED:
                txn.mark_aborted()
                if isinstance(first_error, Terminal):
                    raise first_error
                msg = f"StarRocks label {txn.label} was aborted at commit: {first_error}"
                raise TransactionAbortedError(msg, label=txn.label) from first_error
            if isinstance(first_error, StarRocksTerminalError):
                self._rollback(txn)
                raise first_error
            if time.monotonic() >= deadline:
                msg = (
                    f"StarRocks commit outcome of label {txn.label} is still unknown after "
                    f"{self.config.commit_check_timeout_s:.0f}s (state {state}): {first_error}. "
                    "The query stops; on restart the label state decides (nothing is "
                    "duplicated or lost)"
                )
                raise SinkTransientError(msg, label=txn.label) from first_error
            self._sleep(self._backoff.delay(retry))
            retry += 1
            if state in (LoadState.PREPARE, LoadState.PREPARED) and not isinstance(
                first_error, CommitOutcomeUnknownError
            ):
                # The commit may never have arrived: re-sending it on the same label is safe.
                try:
                    client.commit(txn.label, multi=multi, table=txn.table)
                    txn.mark_committed()
                    return
                except TransactionCommittedError:
                    txn.mark_committed()
                    return
                except StarRocksError as e:
                    first_error = e

    def _rollback(self, txn: SinkTransaction) -> bool:
        """Roll ``txn`` back until the server says ABORTED; True if it is in fact committed.

        Never swallows an unknown outcome: if the label cannot be shown ABORTED the error
        propagates, so no new attempt begins while the old one may still commit.
        """
        if txn.status == TxnStatus.NEW or txn.finished:
            return txn.status == TxnStatus.COMMITTED
        client = self._get_client()
        try:
            client.rollback(txn.label, multi=txn.table is None, table=txn.table)
        except TransactionCommittedError:
            txn.mark_committed()
            return True
        except SinkTransientError as e:
            state = self._state(txn.label)
            if state.is_committed:
                txn.mark_committed()
                return True
            if state not in (LoadState.ABORTED, LoadState.UNKNOWN):
                msg = (
                    f"StarRocks rollback of label {txn.label} failed ({e}) and the label is "
                    f"{state}; the query stops so that no new attempt starts before it is "
                    "aborted (restart: recovery rolls it back)"
                )
                raise SinkTransientError(msg, label=txn.label) from e
        txn.mark_aborted()
        logger.info("starrocks rolled back label=%s", txn.label)
        return False

    def _state(self, label: str) -> LoadState:
        client = self._get_client()
        return client.get_load_state(label)

    def _load_progress(
        self, txn: SinkTransaction, rows: list[dict[str, Any]], *, multi: bool
    ) -> None:
        table = self.config.progress_table
        self._get_client().load(
            txn.label,
            table,
            progress_body(rows),
            multi=multi,
            properties=self.config.properties_for(table),
        )

    # -- Spark side --------------------------------------------------------------------------

    def _validate_targets(self, stats: list[TargetStats]) -> None:
        cfg = self.config
        for s in stats:
            where = (
                f"(first seen at topic={s.topic} partition={s.partition} txn_id={s.sample_txn_id})"
            )
            if s.database != cfg.database:
                msg = (
                    f"rows target database {s.database!r} {where} but this sink writes "
                    f"database-name={cfg.database!r} (one transaction cannot span databases): "
                    "route that database to its own pipeline or fix the producer mapping"
                )
                raise SinkTerminalError(msg, table=s.table, topic=s.topic, partition=s.partition)
            if not s.table or not cfg.allows_table(s.table):
                msg = (
                    f"rows target table {cfg.database}.{s.table} {where}, which is not in "
                    f"table-name ({','.join(cfg.tables or ('*',))}): add it to table-name or "
                    "reject such rows upstream"
                )
                raise SinkTerminalError(msg, table=s.table, topic=s.topic, partition=s.partition)
            if (
                cfg.tables is None
                and s.table not in self._table_names()
                and s.table not in self._table_names(refresh=True)
            ):
                msg = (
                    f"rows target table {cfg.database}.{s.table} {where}, which does not "
                    "exist in StarRocks: create it (PRIMARY KEY table)"
                )
                raise SinkTerminalError(msg, table=s.table, topic=s.topic, partition=s.partition)

    def _table_names(self, refresh: bool = False) -> set[str]:
        if self._known_tables is None or refresh:
            with StarRocksSql(self.config) as sql:
                self._known_tables = sql.tables(self.config.database)
        return self._known_tables

    def _progress_rows(self, stats: list[TargetStats], batch_id: int) -> list[dict[str, Any]]:
        best: dict[tuple[str, int], TargetStats] = {}
        for s in stats:
            key = (s.topic, s.partition)
            if key not in best or s.last_offset > best[key].last_offset:
                best[key] = s
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        return [
            {
                "pipeline": self.config.pipeline_name,
                "topic": s.topic,
                "kafka_partition": s.partition,
                "last_offset": s.last_offset,
                "last_txn_id": s.last_txn_id,
                "batch_id": batch_id,
                "commit_time": now,
            }
            for s in sorted(best.values(), key=lambda s: (s.topic, s.partition))
        ]

    def _run_load_job(self, df: DataFrame, plan: LoadPlan) -> list[TableReport]:
        """Step 3 on the executors: one task per table group, rows in source order."""
        tables = sorted(plan.labels)
        loading = (
            df.where(df["table"].isin(tables))
            .repartition(max(1, len(tables)), "table")
            .sortWithinPartitions("table", "partition", "txn_seq", "row_seq")
            .select(*LOADER_COLUMNS)
            .mapInArrow(PartitionLoader(plan), REPORT_SCHEMA)
        )
        return parse_reports(row.asDict() for row in loading.collect())

    def _raise_load_errors(self, reports: list[TableReport], label: str) -> None:
        failures = [r for r in reports if r.error_kind]
        if not failures:
            return
        detail = "; ".join(f"table={r.table or '?'}: {r.error}" for r in failures)
        if any(r.error_kind == "terminal" for r in failures):
            msg = f"StarRocks load failed for label {label}: {detail}"
            raise SinkTerminalError(msg, label=label)
        msg = f"StarRocks load failed for label {label} (will retry the batch): {detail}"
        raise SinkTransientError(msg, label=label)

    # -- helpers --------------------------------------------------------------------------------

    def _check_version(self, sql: StarRocksSql) -> None:
        try:
            major, minor = sql.server_version()
        except (InvalidRequestError, IndexError) as e:
            logger.warning("starrocks version unknown error=%s", e)
            return
        if self.config.multi_table and major < 4:
            msg = (
                f"StarRocks {major}.{minor} has no multi-table transactions (4.0+): set "
                "sink.transaction.multi-table.enabled=false (per-table mode: exactly-once per "
                "table, not atomic across tables) or upgrade"
            )
            raise SinkTerminalError(msg)
        if (major, minor) < (2, 4):
            msg = f"StarRocks {major}.{minor} has no Stream Load transaction API (2.4+)"
            raise SinkTerminalError(msg)

    def _get_client(self) -> StarRocksClient:
        if self._client is None:
            self._client = StarRocksClient(self.config, sleep=self._sleep)
        return self._client

    def _fault(self, point: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(point)


def _batch_retryable(error: BaseException) -> bool:
    """Transient sink errors and failed Spark jobs are retried under a new attempt."""
    if isinstance(error, SinkError):
        return isinstance(error, Transient)
    # Anything else here is a failed Spark job (task error, lost executor): a new attempt
    # with a fresh label is safe once the old one is rolled back.
    return True


def _result(
    batch_id: int,
    outcome: str,
    labels: tuple[str, ...],
    attempt: int,
    reports: list[TableReport],
    stats: list[TargetStats],
    commit_ms: float,
) -> BatchResult:
    rows: dict[str, int] = {}
    size: dict[str, int] = {}
    for r in reports:
        if r.table:
            rows[r.table] = rows.get(r.table, 0) + r.rows
            size[r.table] = size.get(r.table, 0) + r.bytes
    return BatchResult(
        batch_id=batch_id,
        outcome=outcome,
        labels=labels,
        attempt=attempt,
        rows_per_table=rows,
        bytes_per_table=size,
        load_requests=sum(r.requests for r in reports),
        source_partitions=len({(s.topic, s.partition) for s in stats}),
        commit_latency_ms=commit_ms,
    )


def _with_total(result: BatchResult, total_ms: float) -> BatchResult:
    from dataclasses import replace

    return replace(result, total_ms=total_ms)
