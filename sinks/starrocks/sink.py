"""Exactly-once StarRocks sink over the Stream Load transaction API.

Multi-table mode (default, StarRocks 4.0+): one transaction per micro-batch spanning every
target table and the progress table, so a micro-batch becomes visible atomically.
Per-table mode (``sink.transaction.multi-table.enabled=false``, StarRocks 2.4-3.x): one
label per table, prepare all, then commit all: exactly-once per table, NOT atomic across
tables. See ``docs/starrocks-sink.md``.

This module is the thin Spark adapter: it validates the batch's targets, builds a
:class:`~sinks.starrocks.batch.BatchPlan` and a :class:`SparkLoadJob`, and hands both to the
committer of the configured mode (:mod:`sinks.starrocks.committer`), which holds the
protocol and imports neither Spark nor HTTP.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from common.spark_hash import partition_keys
from sinks.base import (
    Sink,
    Tally,
    TargetStats,
    collect_target_stats,
    decode_tally,
    merge_target_stats,
)
from sinks.exceptions import SinkStoppedError, SinkTerminalError
from sinks.starrocks.behind import CommitBehind, PendingCommit, PendingStore
from sinks.starrocks.client import StarRocksClient
from sinks.starrocks.committer import (
    BatchPlan,
    CommitResult,
    MultiTableCommitter,
    Outcome,
    PerTableCommitter,
)
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.errors import FilteredRowsError, InvalidRequestError
from sinks.starrocks.filtered_rows import (
    SourceTxn,
    only,
    retry_plan,
    source_txns,
    with_dead_letters,
)
from sinks.starrocks.fit import fit_utf8
from sinks.starrocks.httpapi import HttpTxnApi
from sinks.starrocks.intask import TaskBatch, TaskLoader, task_batch
from sinks.starrocks.isolate import (
    ProbeLabelUsedError,
    find_filtered,
    probe_load,
    why_filtered,
)
from sinks.starrocks.labels import make_label
from sinks.starrocks.loader import (
    ANY_TABLE,
    LOADER_COLUMNS,
    LoadPlan,
    PartitionLoader,
    TableReport,
    parse_reports,
    report_schema,
)
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.sql import StarRocksSql, dead_letter_table_ddl, progress_table_ddl
from sinks.starrocks.steps import MAX_ATTEMPT_NUMBER, Verdict
from sinks.starrocks.txnapi import Instrument, LoadJob, LoadReport, TxnApi

if TYPE_CHECKING:
    from pyspark import SparkContext
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
#: Job tag of a batch's load job (with the batch id and a unique suffix): how the sink finds
#: the job's stages afterwards, to see whether Spark re-ran one.
LOAD_JOB_TAG = "txn-cdc-load"


@dataclass(frozen=True)
class BatchResult:
    """What :meth:`StarRocksSink.write_batch` did, for logs and the app's progress display."""

    batch_id: int
    outcome: Outcome
    labels: tuple[str, ...] = ()
    attempt: int = 0
    rows_per_table: Mapping[str, int] = field(default_factory=dict)
    bytes_per_table: Mapping[str, int] = field(default_factory=dict)
    load_requests: int = 0
    source_partitions: int = 0
    commit_latency_ms: float = 0.0
    total_ms: float = 0.0
    # sink.filtered-rows=dead-letter: source transactions (and their rows) dead-lettered here.
    filtered_txns: int = 0
    filtered_rows: int = 0
    # The caller's tally rows (write_batch's ``tally``), counted by the load job.
    tally_rows: tuple[Mapping[str, Any], ...] = ()

    @property
    def label(self) -> str | None:
        """The batch's label (multi-table mode) or the first one (per-table mode)."""
        return self.labels[0] if self.labels else None

    @property
    def skipped(self) -> bool:
        """True when the batch had already been applied by an earlier run (a replay)."""
        return self.outcome is Outcome.ALREADY_APPLIED

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
        instrument: Optional hook given ``(batch id, TxnApi, load job)`` per batch, returning
            the pair to use instead (fault injection and tracing wrap them from outside the
            product, e.g. ``devstack/starrocks/crashpoints.py``).
        sleep: Injected for tests of backoff timing.
    """

    def __init__(
        self,
        config: StarRocksSinkConfig,
        query_id_provider: Callable[[], str],
        *,
        instrument: Instrument | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._query_id_provider = query_id_provider
        self.instrument = instrument
        self._sleep = sleep
        self._policy = RetryPolicy(
            max_retries=config.max_retries,
            base_s=config.retry_backoff_s,
            cap_s=config.retry_max_backoff_s,
            check_timeout_s=config.commit_check_timeout_s,
            batch_max_attempts=config.batch_max_attempts,
            sleep=sleep,
        )
        self._client: StarRocksClient | None = None
        self._known_tables: set[str] | None = None
        self._primary_checked: set[str] = set()  # table-name: *, checked on first sight
        # (query id, batch id) of the last batch written, None once another write began.
        self._settled: tuple[str, int] | None = None
        # The query's tasks load their own rows (task_loader): its batches are report rows.
        self._in_task = False
        # Set by commit_behind(): each batch commits while Spark starts the next one.
        self._behind: CommitBehind | None = None
        self.last_result: BatchResult | None = None
        # Each topic's Kafka topic id, kept in its progress rows (set_topic_ids); None when the
        # progress table predates the column.
        self._topic_ids: dict[str, str] | None = None

    @property
    def counts_in_load(self) -> bool:
        """Multi-table mode loads a batch in one job, which can count it too."""
        return self.config.multi_table

    def task_loader(self) -> TaskLoader | None:
        """The loader the query's assembling tasks run, or ``None`` (driver, before the query).

        Multi-table mode only, where every table of a batch shares one label that the tasks
        can be given (``sinks/starrocks/intask.py``), with ``sink.load-in-task`` (default),
        and not with ``sink.filtered-rows: dead-letter``, which probes the batch's rows again
        on the driver's side. Once given, every ``write_batch`` takes the query's report rows and a
        ``tally`` (the tasks count the batch; the tally only says so).
        """
        cfg = self.config
        if not (cfg.multi_table and cfg.load_in_task) or cfg.filtered_rows == "dead-letter":
            return None
        self._in_task = True
        return TaskLoader(cfg)

    def commit_behind(self, store: PendingStore) -> bool:
        """Commit every batch behind (``sinks/starrocks/behind.py``); whether it now does.

        Only where the tasks load (:meth:`task_loader` was given) and ``sink.commit-behind``
        is on. ``store`` keeps the note of the pending commit before Spark's commit log.
        """
        self.stop_commit_behind()  # an earlier query's, on the same sink
        if not (self._in_task and self.config.commit_behind):
            return False
        self._behind = CommitBehind(store)
        return True

    def commit_behind_failure(self) -> Exception | None:
        """The commit behind that did not commit, as soon as it is known (else ``None``)."""
        return self._behind.failure if self._behind is not None else None

    def stop_commit_behind(self) -> float | None:
        """Wait for the commit in flight (bounded), then commit in ``write_batch`` again.

        When the last commit behind ended (epoch seconds), or ``None`` if there was none.
        """
        if self._behind is None:
            return None
        self._behind.close(self.config.commit_check_timeout_s)
        ended = self._behind.last_commit_end or None
        self._behind = None
        return ended

    def settle_pending(self, pending: PendingCommit) -> Verdict:
        """Finish a commit behind that an earlier run left (driver, before the query starts).

        COMMITTED: the label is committed (now or before). ABORTED: its transaction is gone,
        and the batch must be loaded again.
        """
        api = HttpTxnApi(self._get_client(), txn_timeout_s=self.config.txn_timeout_s)
        committer = MultiTableCommitter(api, _no_load, self._policy)
        verdict = committer.settle(pending.label)
        logger.info(
            "starrocks commit behind of an earlier run batch_id=%s label=%s verdict=%s",
            pending.batch_id,
            pending.label,
            verdict.value,
        )
        return verdict

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
        self._settled = None
        # A 36-character UUID query id and large counters must still fit the label rule.
        probe_qid = "00000000-0000-0000-0000-000000000000"
        longest_table = max((*(cfg.tables or ()), *cfg.system_tables()), key=len)
        make_label(
            cfg.label_prefix, probe_qid, 10**12, 999, longest_table if not cfg.multi_table else None
        )
        if cfg.filtered_rows == "dead-letter":  # the probes' labels (sinks/starrocks/isolate.py)
            make_label(f"{cfg.label_prefix}-probe", probe_qid, 10**12, 999, longest_table)

        with StarRocksSql(cfg) as sql:
            self._check_version(sql)
            for note in cfg.caveats():
                logger.warning("starrocks sink caveat: %s", note)
            existing = sql.tables(cfg.database)
            if cfg.tables is not None:
                missing = sorted(set(cfg.tables) - existing)
                if missing:
                    msg = (
                        f"StarRocks tables {', '.join(missing)} do not exist in database "
                        f"{cfg.database}: create them (PRIMARY KEY tables) or fix table-name"
                    )
                    raise SinkTerminalError(msg, tables=missing)
                self._require_primary_keys(sql, cfg.tables)
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
            if "topic_id" in sql.columns(cfg.database, cfg.progress_table):
                self._topic_ids = self._topic_ids or {}
            else:
                self._topic_ids = None
                logger.warning(
                    "starrocks progress table %s.%s has no topic_id column (made before "
                    "12-08): a topic re-created while the checkpoint is lost cannot be told "
                    "from the one the progress rows were written for; add it with ALTER TABLE "
                    "%s.%s ADD COLUMN topic_id VARCHAR(64)",
                    cfg.database,
                    cfg.progress_table,
                    cfg.database,
                    cfg.progress_table,
                )

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
        self,
        batch_df: DataFrame,
        batch_id: int,
        stats: Sequence[TargetStats] | None = None,
        tally: Tally | None = None,
    ) -> BatchResult:
        """Write one micro-batch exactly once (driver, from ``foreachBatch``).

        An empty batch writes nothing and opens no transaction (the progress table then
        keeps the previous cut, which is still correct). See the module docstring for the
        two modes and :mod:`sinks.starrocks.committer` for the steps.
        ``stats`` (see :class:`sinks.base.TargetStats`) saves the sink's own aggregate job.
        ``tally`` (multi-table mode) makes the load job count the batch: then one Spark job
        per batch, nothing cached, and the transaction is begun before the batch is known
        to have rows (an empty one is rolled back).
        """
        started = time.monotonic()
        if self._behind is not None:
            # Commits stay in batch order; one that failed stops the query here, before this
            # batch begins (the next start replays the failed one).
            self._behind.settle()
        query_id = self._query_id_provider()
        make_label(self.config.label_prefix, query_id, batch_id, 0)  # fail fast on a bad id
        # Spark starts batch b + 1 only once b is in its commit log: the batch after the one
        # this sink just wrote has never been tried (``BatchPlan.fresh``, 3 FE calls fewer).
        fresh = self._settled == (query_id, batch_id - 1)
        self._settled = None
        if tally is not None and not self.counts_in_load:
            msg = "a tally is counted by the load job only in multi-table mode"
            raise ValueError(msg)
        if self._in_task and tally is None:
            msg = "a batch its tasks load is counted by them: write_batch needs the tally"
            raise ValueError(msg)
        from pyspark import StorageLevel

        if tally is None:
            # A filtered transaction's dead letters are keyed and timed like the assembler's.
            extra = [c for c in ("first_offset", "source_ts_ms") if c in batch_df.columns]
            df = batch_df.select(*INPUT_COLUMNS, *extra)
        else:
            # Read once, by the load job, which selects what it reads: no Dataset of its own
            # here (each costs ~10 ms of the driver's time per batch, analysis included).
            df = batch_df
        # Read twice (stats, then load): cache unless the caller already did, so the
        # upstream (stateful) plan is not recomputed. A counted batch is read once.
        level = batch_df.storageLevel
        cached_here = stats is None and tally is None and not (level.useMemory or level.useDisk)
        if cached_here:
            df = df.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if tally is not None:
                result = self._commit(df, batch_id, query_id, None, fresh, tally)
            else:
                targets = list(stats) if stats is not None else collect_target_stats(df)
                if not targets:
                    result = BatchResult(batch_id=batch_id, outcome=Outcome.EMPTY)
                else:
                    self._validate_targets(targets)
                    result = self._commit(df, batch_id, query_id, targets, fresh)
        finally:
            if cached_here:
                df.unpersist()
        result = _with_total(result, (time.monotonic() - started) * 1000)
        self._settled = (query_id, batch_id)
        self.last_result = result
        logger.log(
            logging.DEBUG if result.outcome is Outcome.EMPTY else logging.INFO,
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
        self.stop_commit_behind()
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- the protocol ------------------------------------------------------------------------

    def _commit(
        self,
        df: DataFrame,
        batch_id: int,
        query_id: str,
        targets: list[TargetStats] | None,
        fresh: bool,
        tally: Tally | None = None,
    ) -> BatchResult:
        """Hand the batch to the committer of the configured mode (its ``run()`` has the steps).

        ``targets`` is ``None`` when the load job counts the batch with ``tally``: the plan
        then learns its targets and progress rows from the job (``BatchPlan.counted``).
        """
        cfg = self.config
        http: TxnApi = HttpTxnApi(self._get_client(), txn_timeout_s=cfg.txn_timeout_s)
        committer = MultiTableCommitter if cfg.multi_table else PerTableCommitter
        load = SparkLoadJob(df, cfg, batch_id, tally, in_task=self._in_task)
        plan = self._plan(batch_id, query_id, targets, load, fresh)
        behind = self._behind if tally is not None else None
        if behind is not None:
            plan = replace(plan, defer_commit=True)
        api, job = self._seams(batch_id, http, load)
        try:
            running = committer(api, job, self._policy)
            done = running.run(plan)
            if done.outcome is Outcome.LOADED and behind is not None:
                assert isinstance(running, MultiTableCommitter)
                label = done.labels[0]
                behind.submit(
                    PendingCommit(query_id, batch_id, label), partial(running.commit, label)
                )
        except FilteredRowsError as e:
            if cfg.filtered_rows != "dead-letter":
                raise
            # Probing reads the batch again and again: a counted batch, read once so far, is
            # cached now (any other one already is, here or by the caller).
            cache = targets is None
            if cache:
                df = df.persist()
            try:
                txns = source_txns(df, cfg)
                bad = self._find_filtered(df, txns, batch_id, query_id, api, e)
                load = SparkLoadJob(with_dead_letters(df, bad, cfg), cfg, batch_id, tally)
                # Not fresh any more: the attempt just rolled back is an earlier one.
                plan = self._plan(batch_id, query_id, targets, load, fresh=False)
                if targets is not None:
                    plan = retry_plan(plan, txns, bad, cfg.dead_letter_table)
                api, job = self._seams(batch_id, http, load)
                done = committer(api, job, self._policy).run(plan)
            finally:
                if cache:
                    df.unpersist()
            return replace(
                _result(batch_id, done, targets, load),
                filtered_txns=len(bad),
                filtered_rows=sum(t.rows for t, _ in bad),
            )
        if not load.ran and targets is None:
            # A counted batch is read only by its load; with targets, whoever counted read it.
            _read_through(df, batch_id, self._in_task)
        return _result(batch_id, done, targets, load)

    def _plan(
        self,
        batch_id: int,
        query_id: str,
        targets: list[TargetStats] | None,
        load: SparkLoadJob,
        fresh: bool,
    ) -> BatchPlan:
        cfg = self.config
        plan = BatchPlan(
            prefix=cfg.label_prefix,
            query_id=query_id,
            batch_id=batch_id,
            tables=tuple(sorted({s.table for s in targets or () if s.table})),
            progress_table=cfg.progress_table,
            progress_rows=tuple(self._progress_rows(targets or [], batch_id)),
            fresh=fresh,
            applied=partial(self._progress_labels, batch_id) if cfg.multi_table else None,
            # The retry after filtered rows adds it; a replay's rows do not name it.
            optional_tables=(
                (cfg.dead_letter_table,) if cfg.filtered_rows == "dead-letter" else ()
            ),
        )
        if targets is not None:
            return plan

        def counted() -> list[dict[str, Any]]:
            # Checked after the load and before the commit: a bad target's rows are in a
            # transaction that is rolled back, never visible.
            if load.targets:
                self._validate_targets(load.targets)
            return self._progress_rows(load.targets, batch_id)

        return replace(plan, counted=counted)

    def _seams(self, batch_id: int, api: TxnApi, job: LoadJob) -> tuple[TxnApi, LoadJob]:
        return self.instrument(batch_id, api, job) if self.instrument is not None else (api, job)

    def _find_filtered(
        self,
        df: DataFrame,
        txns: Sequence[SourceTxn],
        batch_id: int,
        query_id: str,
        api: TxnApi,
        error: FilteredRowsError,
    ) -> list[tuple[SourceTxn, str]]:
        """Which of ``txns``, the batch's, have rows StarRocks filters (probed, rolled back)."""
        cfg = self.config
        number = -1

        def probe(part: Sequence[SourceTxn]) -> str | None:
            # Numbered per batch: a run after a crash meets its crashed probes' labels (used
            # ones stay blocked on the server), rolls them back and takes the next number.
            nonlocal number
            tables = sorted({t for txn in part for t in txn.tables})
            job = SparkLoadJob(only(df, part), cfg, batch_id)
            while number < MAX_ATTEMPT_NUMBER - 1:
                number += 1
                prefix = f"{cfg.label_prefix}-probe"
                labels = {t: make_label(prefix, query_id, batch_id, number, t) for t in tables}
                try:
                    return probe_load(api, self._policy, labels, lambda lb: job(lb, False))
                except ProbeLabelUsedError as e:
                    logger.warning("starrocks rolled back a crashed run's probe label=%s", e)
            msg = f"batch {batch_id} used {MAX_ATTEMPT_NUMBER} probe labels"
            raise SinkTerminalError(msg)

        logger.warning(
            "starrocks batch has rows StarRocks filters batch_id=%s transactions=%s; probing "
            "for them (sink.filtered-rows=dead-letter): %s",
            batch_id,
            len(txns),
            error,
        )
        started = time.monotonic()
        # Every transaction named failed in a probe. Should the rows fail only together, the
        # retry below fails as before.
        bad, probes = find_filtered(txns, why_filtered(error), probe, cfg.filtered_rows_max_txns)
        for txn, why in bad:
            logger.warning(
                "starrocks dead-lettered a transaction with filtered rows batch_id=%s topic=%s "
                "partition=%s txn_id=%s rows=%s: %s",
                batch_id,
                txn.topic,
                txn.partition,
                txn.txn_id,
                txn.rows,
                why,
            )
        logger.info(
            "starrocks isolated filtered rows batch_id=%s transactions=%s probes=%s ms=%.0f",
            batch_id,
            len(bad),
            probes,
            (time.monotonic() - started) * 1000,
        )
        return bad

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
            if cfg.tables is None and s.table not in self._primary_checked:
                with StarRocksSql(cfg) as sql:
                    self._require_primary_keys(sql, [s.table])
                self._primary_checked.add(s.table)

    def _require_primary_keys(self, sql: StarRocksSql, tables: Sequence[str]) -> None:
        cfg = self.config
        others = [t for t in tables if not sql.is_primary_key_table(cfg.database, t)]
        if others:
            msg = (
                f"StarRocks tables {', '.join(others)} of {cfg.database} are not PRIMARY KEY "
                "tables: CDC upserts and deletes by key need one (a DUPLICATE KEY table would "
                "keep every version and never delete); recreate them with PRIMARY KEY"
            )
            raise SinkTerminalError(msg, tables=others)

    def committed_progress(
        self,
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]:
        """This pipeline's progress rows: their ``last_offset``, and their topic id (driver).

        The last source offset whose transaction is visible (or dead-lettered) in StarRocks,
        committed in the same transaction as the rows themselves; and the Kafka topic id it
        was written under, where the row has one (not before the column, or
        :meth:`set_topic_ids`).
        """
        cfg = self.config
        with StarRocksSql(cfg) as sql:
            rows = sql.query(
                # Identifiers are validated plain names (config.py); the value is bound.
                f"SELECT topic, kafka_partition, last_offset"  # noqa: S608
                f"{', topic_id' if self._topic_ids is not None else ''} FROM "
                f"`{cfg.database}`.`{cfg.progress_table}` WHERE pipeline = %s",
                (cfg.pipeline_name,),
            )
        offsets = {(str(r[0]), int(r[1])): int(r[2]) for r in rows if r[2] is not None}
        ids = {(str(r[0]), int(r[1])): str(r[3]) for r in rows if len(r) > 3 and r[3]}
        return offsets, ids

    def set_topic_ids(self, topic_ids: Mapping[str, str]) -> None:
        """Each subscribed topic's Kafka topic id, written with its progress rows (driver).

        So that a start without a checkpoint can tell a re-created topic from the one the
        progress rows' offsets belong to (``app/resume.py``).
        """
        if self._topic_ids is not None:
            self._topic_ids = dict(topic_ids)

    def _progress_labels(self, batch_id: int) -> list[str]:
        """The labels this pipeline's progress rows of ``batch_id`` hold (driver).

        Committed in the same transaction as the batch's rows, so they name the attempt that
        committed, whatever the server still remembers of the labels (``BatchPlan.applied``,
        whose committer picks this query's label by the label rule).
        """
        cfg = self.config
        with StarRocksSql(cfg) as sql:
            rows = sql.query(
                # Identifiers are validated plain names (config.py); the values are bound.
                f"SELECT label FROM `{cfg.database}`.`{cfg.progress_table}` "  # noqa: S608
                "WHERE pipeline = %s AND batch_id = %s",
                (cfg.pipeline_name, batch_id),
            )
        return sorted({str(label) for (label,) in rows if label})

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
                "last_txn_id": fit_utf8(s.last_txn_id, 255),
                "batch_id": batch_id,
                "commit_time": now,
                **(
                    {"topic_id": self._topic_ids[s.topic]}
                    if self._topic_ids and s.topic in self._topic_ids
                    else {}
                ),
            }
            for s in sorted(best.values(), key=lambda s: (s.topic, s.partition))
        ]

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


class SparkLoadJob:
    """The load step on the executors: one task per table, rows in source order.

    Called by the committer on the driver with ``table -> label``; runs one Spark job whose
    tasks (:class:`sinks.starrocks.loader.PartitionLoader`) stream rows into the open labels
    and return typed reports (error class and error URL kept). With a ``tally`` the tasks
    also count the rows; its rows and the batch's targets are here after each run.
    ``in_task``: ``df`` holds the report rows of tasks that assemble and load
    (``sinks/starrocks/intask.py``); the job runs them with the label.
    """

    def __init__(
        self,
        df: DataFrame,
        config: StarRocksSinkConfig,
        batch_id: int,
        tally: Tally | None = None,
        *,
        in_task: bool = False,
    ) -> None:
        self._df = df
        self._config = config
        self._batch_id = batch_id
        self._tally = tally
        self._in_task = in_task
        self.tally_rows: tuple[dict[str, Any], ...] = ()
        self.targets: list[TargetStats] = []
        self.ran = False

    def __call__(self, labels: Mapping[str, str], multi: bool) -> list[LoadReport]:
        """Run the load job (driver; the work happens on executors)."""
        self.ran = True
        sc = self._df.sparkSession.sparkContext
        context: AbstractContextManager[None] = nullcontext()
        if self._in_task:
            # ``df`` is the report rows of tasks that load what they assemble, into the one
            # label of a counted multi-table batch, given to them by a local property.
            label = labels.get(ANY_TABLE)
            if label is None or not multi:
                msg = f"tasks that load their rows need one label for every table, not {labels}"
                raise ValueError(msg)
            loading = self._df
            context = task_batch(sc, TaskBatch(self._batch_id, label))
        else:
            loading = self._load_rows(labels, multi)
        # A tag of its own finds this job's stages afterwards. Listing the query's job group
        # instead cost one py4j call per job Spark keeps (spark.ui.retainedJobs, 1,000):
        # 80-200 ms, twice a batch, once a query had run that many jobs.
        tag = f"{LOAD_JOB_TAG}-{self._batch_id}-{uuid.uuid4().hex}"
        sc.addJobTag(tag)
        try:
            with context:
                rows = [row.asDict() for row in loading.collect()]
        except Exception as e:
            if _interrupted(e):
                # The query is stopping (Spark interrupts its batch thread): the committer
                # rolls the label back and stops; the next start replays the batch.
                msg = f"the load job of batch {self._batch_id} was interrupted: the query stops"
                raise SinkStoppedError(msg, batch_id=self._batch_id) from e
            raise
        finally:
            sc.removeJobTag(tag)
        if self._tally is not None:
            self.tally_rows = tuple(decode_tally(r["tally"] for r in rows))
            self.targets = merge_target_stats(
                TargetStats.from_row(r) for r in self.tally_rows if "_ts_rows" in r
            )
        reports = parse_reports(r for r in rows if r["tally"] is None)
        rerun = rerun_stages(sc.statusTracker(), tagged_job_ids(sc, tag))
        if rerun:
            # A stage re-run (a fetch failure) starts its tasks at attempt 0 again, so the
            # executors' own guard cannot see it, and a re-run task may have sent its chunks
            # into the label a second time: the batch is retried under a new label.
            report = TableReport(
                table="",
                error_kind="transient",
                error=f"Spark re-ran stage(s) {rerun} of the load job of batch "
                f"{self._batch_id}; the batch is retried under a new label",
            )
            reports.append(report.typed())
        return reports

    def _load_rows(self, labels: Mapping[str, str], multi: bool) -> DataFrame:
        """The job that loads the batch's rows: by table, sorted, through the loader."""
        df = self._df
        cfg = self._config
        tables: tuple[str, ...] | None
        if ANY_TABLE in labels:
            # Tables known only afterwards: the configured ones and the dead-letter table.
            tables = (*cfg.tables, cfg.dead_letter_table) if cfg.tables else None
        else:
            tables = tuple(sorted(labels))
            df = df.where(df["table"].isin(list(tables)))
        columns = (*LOADER_COLUMNS, *self._tally.columns) if self._tally else LOADER_COLUMNS
        plan = LoadPlan(cfg, dict(labels), multi, self._batch_id, self._tally)
        return (
            by_table(df, tables)
            .sortWithinPartitions("table", "partition", "txn_seq", "row_seq")
            .select(*dict.fromkeys(columns))
            .mapInArrow(PartitionLoader(plan), report_schema())
        )


def by_table(df: DataFrame, tables: Sequence[str] | None) -> DataFrame:
    """``df`` in one Spark partition per table, so that a task loads each table it has alone.

    Known ``tables`` each get a partition of their own (a row of any other table goes with the
    last one). Partitioned by the table's name, two of them would share a task about as often
    as not (``orders`` and ``order_items`` do, in two partitions), and that task would load
    both while a core idled. With the tables unknown (``table-name: *``): one partition per
    core, by the name's hash, so colliding tables load one after the other.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    if tables is None:
        return df.repartition(df.sparkSession.sparkContext.defaultParallelism, "table")
    tables = tuple(dict.fromkeys(tables))  # each table once, with one key
    if not tables:
        return df.repartition(1)
    keys = partition_keys(len(tables))
    # One SQL expression, one py4j call: built from Column functions, one literal each, the
    # plan took ~5 ms more a batch (PySpark 4 makes several calls per function).
    whens = " ".join(f"WHEN {_sql_string(t)} THEN {k}" for t, k in zip(tables, keys, strict=True))
    task = F.expr(f"CASE `table` {whens} ELSE {keys[-1]} END")
    return df.repartition(len(tables), task)


def _sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal.

    Backslash escapes, as Spark parses them unless ``spark.sql.parser.escapedStringLiterals``
    is on (off by default).
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _read_through(df: DataFrame, batch_id: int, in_task: bool) -> None:
    """Run a batch nobody read to its end, keeping nothing (driver).

    A replayed batch whose label is already committed loads nothing, but its plan must still
    run: Spark 4.2+ fails a stateful query whose ``foreachBatch`` left a state store partition
    uncommitted (``STATE_STORE_COMMIT_VALIDATION_FAILED``), and Spark's own recovery expects
    the replay to write the state version again (the same state: same records, same batch
    timestamp). One extra job, on a replay only.
    """
    logger.info("starrocks batch batch_id=%s already applied: reading it through", batch_id)
    # Tasks that would load are told there is no label: they keep their state, load nothing.
    no_label = task_batch(df.sparkSession.sparkContext, TaskBatch(batch_id, None))
    with no_label if in_task else nullcontext():
        df.write.format("noop").mode("overwrite").save()


def _no_load(labels: Mapping[str, str], multi: bool) -> list[LoadReport]:
    """The load job of a committer that only settles an earlier run's label."""
    msg = f"settling a commit behind loads nothing (labels {dict(labels)}, multi {multi})"
    raise RuntimeError(msg)


def _interrupted(error: BaseException) -> bool:
    """A Spark job whose driver thread was interrupted (a Java InterruptedException cause)."""
    cause = getattr(error, "java_exception", None)
    try:
        while cause is not None:
            if cause.getClass().getName() == "java.lang.InterruptedException":
                return True
            cause = cause.getCause()
    except Exception:  # a gateway that cannot answer proves nothing
        return False
    return False


def tagged_job_ids(sc: SparkContext, tag: str) -> set[int]:
    """Ids of the jobs Spark ran under job tag ``tag`` (driver).

    PySpark's ``StatusTracker`` (and the Java API's) has no ``getJobIdsForTag``; the Scala
    ``SparkStatusTracker`` has, since Spark 3.5.
    """
    jsc: Any = sc._jsc
    return {int(job_id) for job_id in jsc.sc().statusTracker().getJobIdsForTag(tag)}


def rerun_stages(tracker: Any, job_ids: set[int]) -> list[int]:
    """Stages of ``job_ids`` that Spark ran more than once (driver, Spark's status tracker)."""
    rerun = []
    for job_id in sorted(job_ids):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is not None and stage.currentAttemptId > 0:
                rerun.append(int(stage_id))
    return rerun


def _result(
    batch_id: int, done: CommitResult, targets: list[TargetStats] | None, load: SparkLoadJob
) -> BatchResult:
    """``targets``: the caller's, or ``None`` when the load job counted them."""
    stats = load.targets if targets is None else targets
    rows: dict[str, int] = {}
    size: dict[str, int] = {}
    for r in done.reports:
        if r.table:
            rows[r.table] = rows.get(r.table, 0) + r.rows
            size[r.table] = size.get(r.table, 0) + r.bytes
    return BatchResult(
        batch_id=batch_id,
        outcome=done.outcome,
        labels=done.labels,
        attempt=done.attempt,
        rows_per_table=rows,
        bytes_per_table=size,
        load_requests=sum(r.requests for r in done.reports),
        source_partitions=len({(s.topic, s.partition) for s in stats}),
        commit_latency_ms=done.commit_ms,
        tally_rows=load.tally_rows,
    )


def _with_total(result: BatchResult, total_ms: float) -> BatchResult:
    return replace(result, total_ms=total_ms)
