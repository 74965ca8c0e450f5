"""Per-table mode (StarRocks 2.4-3.x): one label per table, prepare all, then commit all."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from common.errors import Transient
from sinks.exceptions import SinkTerminalError
from sinks.starrocks.batch import BatchPlan, CommitResult, Outcome
from sinks.starrocks.errors import (
    CommitOutcomeUnknownError,
    LabelAlreadyExistsError,
    StarRocksError,
    TransactionCommittedError,
)
from sinks.starrocks.protocol import LoadState
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.steps import LOOKAHEAD, MAX_ATTEMPT_NUMBER, Steps, Verdict, retryable
from sinks.starrocks.transaction import SinkTransaction, TxnStatus, from_state
from sinks.starrocks.txnapi import LoadJob, TxnApi

logger = logging.getLogger(__name__)


class PerTableCommitter:
    """Per-table mode (StarRocks 2.4-3.x): one label per table, prepare all, commit all.

    Exactly-once per table, NOT atomic across tables: a reader may see table A of a batch
    before table B. Single-table labels are registered at ``begin``, so here
    ``get_load_state`` is a full answer and recovery reads it.
    """

    def __init__(self, api: TxnApi, load_job: LoadJob, policy: RetryPolicy) -> None:
        self._steps = Steps(api, load_job, policy)
        self._api = api
        self._policy = policy

    def run(self, plan: BatchPlan) -> CommitResult:
        """Write ``plan`` exactly once per table (``docs/DESIGN.md`` §5, per-table mode).

        1. Recovery, attempt 0, 1, ...: the state of every table's label
           ``{prefix}-{query id}-{batch id}-{attempt}-{table}`` (``plan.optional_tables``
           too). All UNKNOWN (and no later attempt known): this attempt is free. Once the
           progress label (begun last) is known, a data label that is not was never begun:
           that table had no rows in the attempt and is no part of it. All the attempt's
           labels PREPARED/COMMITTED/VISIBLE: commit the PREPARED ones, return recovered.
           Some committed, others not prepared: terminal. Otherwise roll back every
           PREPARE/PREPARED label of the attempt, next attempt. A ``plan.fresh`` batch has
           no earlier attempt: it starts at attempt 0.
        2. ``begin`` every table (data tables, each with rows, then the progress table: a
           label no load reached cannot be prepared, spec §4.2).
        3. Load the data tables (executors), then the progress rows.
        4. ``prepare`` every table (a prepared transaction survives a crash).
        5. ``commit`` every table; an unclear commit is decided by the label state and
           re-sent on the same label, never reloaded.
        6. Failure before every table is PREPARED: roll back all labels of the attempt;
           transient: next attempt after the retry backoff; terminal: raise.
        """
        if not plan.tables and not plan.progress_rows:
            return CommitResult(Outcome.EMPTY)
        tables = (*plan.tables, plan.progress_table)
        # A fresh batch has no earlier attempt to recover: its attempt 0 is free.
        recovered = 0 if plan.fresh else self._recover(plan, tables)
        if isinstance(recovered, CommitResult):
            return recovered
        attempt = recovered
        last_error: BaseException | None = None
        for tried in range(self._policy.batch_max_attempts):
            if tried:
                self._policy.pause(tried - 1)  # let a struggling server recover
            labels = {t: plan.label(attempt, t) for t in tables}
            txns = {t: SinkTransaction(labels[t], table=t) for t in tables}
            # Labels a begin was sent for: an unclear begin may have opened one, so the
            # failure path rolls back all of these, not only those that answered OK.
            sent: set[str] = set()
            try:
                for t in tables:
                    sent.add(labels[t])
                    self._begin(txns[t])
                reports = self._steps.run_loads({t: labels[t] for t in plan.tables}, False)
                body = plan.progress(labels[plan.progress_table])
                self._api.load(labels[plan.progress_table], plan.progress_table, body, multi=False)
                for txn in txns.values():
                    txn.mark_loaded({txn.table or ""})
                for txn in txns.values():
                    self._prepare(txn)
            except Exception as e:
                last_error = e
                for txn in txns.values():
                    if txn.label in sent:
                        self._steps.rollback(txn.label, txn.table)
                        txn.mark_aborted()
                if not retryable(e):
                    raise
                logger.warning(
                    "starrocks batch retry batch_id=%s attempt=%s error=%s",
                    plan.batch_id,
                    attempt,
                    e,
                )
                if sent:
                    attempt += 1
                continue
            commit_ms = self._commit_all(plan, txns)
            return CommitResult(
                Outcome.COMMITTED, tuple(labels.values()), attempt, reports, commit_ms
            )
        msg = (
            f"StarRocks batch {plan.batch_id} failed {self._policy.batch_max_attempts} times: "
            f"{last_error}. Every attempt was rolled back; fix the cause and restart the query"
        )
        raise SinkTerminalError(msg, batch_id=plan.batch_id) from last_error

    def _recover(self, plan: BatchPlan, tables: tuple[str, ...]) -> int | CommitResult:
        """Step 1: the first free attempt, or the result of finishing a prepared one."""
        # Every table an attempt of this batch may have begun: a replay's tables and those
        # only the retry after filtered rows loads (sorted: the progress table stays last).
        candidates = (*sorted({*tables[:-1], *plan.optional_tables}), tables[-1])
        attempt = 0
        while attempt < MAX_ATTEMPT_NUMBER:
            txns = {t: self._known(plan.label(attempt, t), t) for t in candidates}
            if all(txn.status == TxnStatus.NEW for txn in txns.values()):
                later = self._later_known(plan, attempt, tables[-1])
                if later is None:
                    return attempt
                attempt = later
                continue
            if txns[tables[-1]].status != TxnStatus.NEW:
                # The progress label is begun last, once every table the attempt loads is:
                # a data label the server does not know was no part of it (a table left
                # without rows by the filtered-rows retry gets none, spec §4.2).
                txns = {t: txn for t, txn in txns.items() if txn.status != TxnStatus.NEW}
            labels = {t: txn.label for t, txn in txns.items()}
            statuses = {t: txn.status for t, txn in txns.items()}
            done = {t for t, s in statuses.items() if s == TxnStatus.COMMITTED}
            prepared = {t for t, s in statuses.items() if s == TxnStatus.PREPARED}
            if done | prepared == set(txns):
                logger.warning(
                    "starrocks recovering prepared batch batch_id=%s attempt=%s committed=%s "
                    "prepared=%s",
                    plan.batch_id,
                    attempt,
                    sorted(done),
                    sorted(prepared),
                )
                commit_ms = self._commit_all(plan, txns)
                outcome = Outcome.RECOVERED if prepared else Outcome.ALREADY_APPLIED
                return CommitResult(outcome, tuple(labels.values()), attempt, (), commit_ms)
            if done:
                msg = (
                    f"StarRocks batch {plan.batch_id} attempt {attempt} is committed for "
                    f"{sorted(done)} but not prepared for {sorted(set(txns) - done - prepared)} "
                    "(prepared transactions expired?). Per-table mode cannot repair this "
                    "automatically: check those tables, raise sink.prepared-timeout-s, and "
                    "restart from a checkpoint you trust"
                )
                raise SinkTerminalError(msg, batch_id=plan.batch_id)
            for t, txn in txns.items():
                if txn.status in (TxnStatus.OPEN, TxnStatus.PREPARED):
                    self._steps.rollback(txn.label, t)
            attempt += 1
        msg = f"StarRocks batch {plan.batch_id} has more than {MAX_ATTEMPT_NUMBER} attempts"
        raise SinkTerminalError(msg, batch_id=plan.batch_id)

    def _known(self, label: str, table: str) -> SinkTransaction:
        return from_state(label, table, self._steps.state(label))

    def _later_known(self, plan: BatchPlan, attempt: int, table: str) -> int | None:
        for ahead in range(attempt + 1, attempt + 1 + LOOKAHEAD):
            if self._steps.state(plan.label(ahead, table)) != LoadState.UNKNOWN:
                return ahead
        return None

    def _begin(self, txn: SinkTransaction) -> None:
        """Begin; an unclear answer is settled by the label's state (registered at begin)."""
        table = txn.table or ""
        retry = 0
        while True:
            try:
                self._api.begin(txn.label, table)
                txn.mark_open()
                return
            except LabelAlreadyExistsError as e:
                if retry > 0 and self._steps.state(txn.label) == LoadState.PREPARE:
                    txn.mark_open()  # our earlier begin landed; its answer was lost
                    return
                msg = (
                    f"StarRocks label {txn.label} is already in use by another writer: {e}. "
                    "Run exactly one query per checkpoint and give every pipeline its own "
                    "sink.label-prefix"
                )
                raise SinkTerminalError(msg, label=txn.label, table=table) from e
            except StarRocksError as e:
                if not isinstance(e, Transient):
                    raise
                state = self._steps.state(txn.label)
                if state == LoadState.PREPARE:
                    txn.mark_open()
                    return
                if state != LoadState.UNKNOWN or retry >= self._policy.max_retries:
                    raise
            self._policy.pause(retry)
            retry += 1

    def _prepare(self, txn: SinkTransaction) -> None:
        """Prepare; TXN_NOT_EXISTS or a lost answer is settled by the label state."""
        retry = 0
        while True:
            try:
                self._api.prepare(txn.label, txn.table or "")
                txn.mark_prepared()
                return
            except StarRocksError as e:
                if not isinstance(e, Transient):
                    raise
                state = self._steps.state(txn.label)
                if state == LoadState.PREPARED:
                    txn.mark_prepared()
                    return
                if state != LoadState.PREPARE or retry >= self._policy.max_retries:
                    raise
            self._policy.pause(retry)
            retry += 1

    def _commit_all(self, plan: BatchPlan, txns: Mapping[str, SinkTransaction]) -> float:
        started = self._policy.clock()
        for txn in txns.values():
            if txn.status == TxnStatus.COMMITTED:
                continue
            txn.mark_committing()
            if self._commit(txn) is Verdict.ABORTED:
                txn.mark_aborted()
                msg = (
                    f"StarRocks prepared label {txn.label} was aborted before commit; "
                    f"per-table mode: table {txn.table} misses batch {plan.batch_id} while "
                    "other tables may have it. Raise sink.prepared-timeout-s and restart "
                    "from a checkpoint you trust"
                )
                raise SinkTerminalError(msg, label=txn.label, table=txn.table)
            txn.mark_committed()
        return (self._policy.clock() - started) * 1000

    def _commit(self, txn: SinkTransaction) -> Verdict:
        """Commit one prepared label; success is COMMITTED/VISIBLE as the server reports."""
        table = txn.table or ""
        try:
            self._api.commit(txn.label, table)
            return Verdict.COMMITTED
        except TransactionCommittedError:
            return Verdict.COMMITTED
        except StarRocksError as e:
            first: StarRocksError = e
        logger.warning(
            "starrocks commit unclear label=%s error=%s; asking the label state", txn.label, first
        )
        deadline = self._policy.deadline()
        retry = 0
        while True:
            state = self._steps.state(txn.label)
            if state.is_committed:
                return Verdict.COMMITTED
            if state == LoadState.ABORTED:
                if not isinstance(first, Transient):
                    raise first
                return Verdict.ABORTED
            if not isinstance(first, Transient):
                self._steps.rollback(txn.label, table)
                raise first
            if self._policy.expired(deadline):
                msg = (
                    f"StarRocks commit outcome of label {txn.label} is still unknown after "
                    f"{self._policy.check_timeout_s:.0f}s (state {state}): {first}. The "
                    "query stops; on restart the label state decides"
                )
                raise CommitOutcomeUnknownError(msg, label=txn.label) from first
            self._policy.pause(retry)
            retry += 1
            if state in (LoadState.PREPARE, LoadState.PREPARED):
                # The commit may never have arrived, or the FE gave up before committing (a
                # database write-lock timeout; nothing else would commit the label). Sending
                # it again on the same label is safe: a committed label answers so.
                try:
                    self._api.commit(txn.label, table)
                    return Verdict.COMMITTED
                except TransactionCommittedError:
                    return Verdict.COMMITTED
                except StarRocksError as e:
                    first = e
