"""The exactly-once protocol, with no Spark and no HTTP: one class per transaction mode.

A committer gets a :class:`~sinks.starrocks.txnapi.TxnApi`, a
:class:`~sinks.starrocks.txnapi.LoadJob` and a :class:`~sinks.starrocks.retry.RetryPolicy`,
and its ``run()`` is the numbered protocol of ``docs/DESIGN.md`` §5, recovery included. The
Spark adapter (:mod:`sinks.starrocks.sink`) only prepares a :class:`BatchPlan` and a load job.

What the server can tell us, and what it cannot (``docs/starrocks-txn-protocol.md``):

* ``get_load_state`` reads the FE transaction manager only. A single-table label is there
  from ``begin``; a multi-table label only from commit (4.0) or from its first load (newest),
  so a begun, rolled-back, cancelled or zero-load multi-table label answers UNKNOWN while the
  label stays blocked in ``StreamLoadMgr`` (§4.3a). In multi-table mode ``get_load_state`` is
  therefore asked "committed?" only, and ``begin`` itself is the probe.
* Some 4.0.x FE builds answer OK to a multi-table commit that failed (§4.3a): an OK commit is
  confirmed through ``get_load_state`` before the batch counts as applied.
* A multi-table task in ABORTING may still end COMMITED (the FE reconciles with its
  transaction manager, ``StreamLoadMultiStmtTask``): it is waited out, never skipped.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from common.errors import Transient
from sinks.exceptions import SinkError, SinkTerminalError, SinkTransientError
from sinks.starrocks import errors as sr_errors
from sinks.starrocks.errors import (
    CommitOutcomeUnknownError,
    LabelAlreadyExistsError,
    StarRocksError,
    StarRocksTerminalError,
    TransactionAbortedError,
    TransactionCommittedError,
    TransactionNotFoundError,
)
from sinks.starrocks.labels import make_label
from sinks.starrocks.loader import progress_body
from sinks.starrocks.protocol import LoadState
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.transaction import SinkTransaction, TxnStatus, from_state
from sinks.starrocks.txnapi import LoadFailure, LoadJob, LoadReport, TxnApi

logger = logging.getLogger(__name__)

# Recovery walks attempts 0, 1, ...; a batch needing more than this many is a crash loop.
MAX_ATTEMPT_NUMBER = 1000
# Later attempts checked when an attempt's label is free: an old label may have expired
# from the server (label_keep_max_second) while a later attempt of the batch is still known.
LOOKAHEAD = 2

# ``ExistingJobStatus`` of a multi-table begin on a used label (StreamLoadMultiStmtTask
# state names, spelling included, or a TransactionStatus name from the label history). A
# PREPARE/PREPARED history entry with no task is a single-table transaction: another writer.
_APPLIED_JOBS = frozenset({"COMMITED", "COMMITTED", "VISIBLE", "FINISHED"})
_CRASHED_JOBS = frozenset({"BEGIN", "CANCELLED", "ABORTED"})
_SETTLING_JOBS = frozenset({"ABORTING", "COMMITING"})


class Outcome(enum.StrEnum):
    """What ``run()`` did with the batch."""

    COMMITTED = "committed"  # loaded and committed now
    ALREADY_APPLIED = "already_applied"  # an earlier run committed it (a replay)
    RECOVERED = "recovered"  # per-table: an earlier run prepared it, this run committed
    EMPTY = "empty"  # nothing to write, no transaction opened


class _Verdict(enum.Enum):
    """The server's final word on one label."""

    COMMITTED = "committed"
    ABORTED = "aborted"


class _Probe(enum.Enum):
    """What a multi-table ``begin`` on a label said about it."""

    OURS = "ours"  # begin OK: this attempt is open and ours
    APPLIED = "applied"  # an earlier attempt under this label committed
    CRASHED = "crashed"  # an earlier attempt is open or cancelled: roll back, next attempt
    SETTLING = "settling"  # committing or aborting right now: wait


@dataclass(frozen=True)
class BatchPlan:
    """One micro-batch as the committer sees it (no rows: those are the load job's).

    Attributes:
        prefix: ``sink.label-prefix``.
        query_id: Persistent streaming query id.
        batch_id: Spark batch id.
        tables: Data tables with rows in this batch, sorted.
        progress_table: The sink's progress table (loaded in the same transaction).
        progress_rows: One row per source partition, without ``label`` (added per attempt).
    """

    prefix: str
    query_id: str
    batch_id: int
    tables: tuple[str, ...]
    progress_table: str
    progress_rows: tuple[Mapping[str, Any], ...] = ()

    def label(self, attempt: int, table: str | None = None) -> str:
        """The label rule (:func:`sinks.starrocks.labels.make_label`)."""
        return make_label(self.prefix, self.query_id, self.batch_id, attempt, table)

    def progress(self, label: str) -> bytes:
        """Progress rows of this attempt as a load body."""
        return progress_body([{**row, "label": label} for row in self.progress_rows])


@dataclass(frozen=True)
class CommitResult:
    """The committer's typed answer."""

    outcome: Outcome
    labels: tuple[str, ...] = ()
    attempt: int = 0
    reports: tuple[LoadReport, ...] = field(default_factory=tuple)
    commit_ms: float = 0.0


def load_error(failure: LoadFailure, label: str, table: str) -> StarRocksError:
    """Rebuild a load task's error on the driver, same class, with label/table/error URL."""
    cls = getattr(sr_errors, failure.error_class, None)
    if not (isinstance(cls, type) and issubclass(cls, StarRocksError)):
        cls = sr_errors.StarRocksTransientError if failure.transient else StarRocksTerminalError
    context: dict[str, Any] = {"label": label, "table": table}
    if failure.error_url:
        context["error_url"] = failure.error_url
    return cls(f"load of table {table} under label {label} failed: {failure.message}", **context)


def raise_load_failures(reports: Sequence[LoadReport], labels: Mapping[str, str]) -> None:
    """Raise the first terminal load failure, else the first transient one, if any."""
    failed = [(r.table, r.failure) for r in reports if r.failure is not None]
    if not failed:
        return
    table, failure = min(failed, key=lambda item: item[1].transient)
    label = labels.get(table) or next(iter(labels.values()), "?")
    raise load_error(failure, label, table)


def _retryable(error: BaseException) -> bool:
    """Transient sink errors and failed Spark jobs are retried under a new attempt."""
    if isinstance(error, SinkError):
        return isinstance(error, Transient)
    # Anything else from the load job is a failed Spark job (task error, lost executor).
    return True


class _Steps:
    """Protocol steps shared by both modes; each step is one server call plus its retries."""

    def __init__(self, api: TxnApi, load_job: LoadJob, policy: RetryPolicy) -> None:
        self.api = api
        self.load_job = load_job
        self.policy = policy

    def state(self, label: str) -> LoadState:
        """``get_load_state`` with the policy's retries (raises when it stays unreachable)."""
        retry = 0
        while True:
            try:
                return self.api.get_load_state(label)
            except StarRocksError as e:
                if not isinstance(e, Transient) or retry >= self.policy.max_retries:
                    raise
            self.policy.pause(retry)
            retry += 1

    def rollback(self, label: str, table: str | None) -> _Verdict:
        """Roll ``label`` back until the server shows it cannot commit any more.

        Returns COMMITTED if the label turned out committed. Never swallows an unknown
        outcome: the error propagates, so no new attempt begins while this one may commit.
        """
        retry = 0
        while True:
            try:
                self.api.rollback(label, table)
                logger.info("starrocks rolled back label=%s table=%s", label, table)
                return _Verdict.ABORTED
            except TransactionCommittedError:
                return _Verdict.COMMITTED
            except TransactionNotFoundError as e:
                return self._rollback_gone(label, table, e)
            except StarRocksError as e:
                if not isinstance(e, Transient):
                    raise
                state = self.state(label)
                if state.is_committed:
                    return _Verdict.COMMITTED
                if state == LoadState.ABORTED:
                    return _Verdict.ABORTED
                if retry >= self.policy.max_retries:
                    msg = (
                        f"StarRocks rollback of label {label} failed ({e}) and the label is "
                        f"{state}; the query stops so that no new attempt starts before it "
                        "is aborted (on restart, recovery rolls it back)"
                    )
                    raise SinkTransientError(msg, label=label, table=table) from e
            self.policy.pause(retry)
            retry += 1

    def _rollback_gone(self, label: str, table: str | None, error: StarRocksError) -> _Verdict:
        """Rollback said "no such transaction": decide from the label state."""
        state = self.state(label)
        if state.is_committed:
            return _Verdict.COMMITTED
        if table is None or state in (LoadState.UNKNOWN, LoadState.ABORTED):
            # Multi-table: no task and not registered, nothing left that could commit.
            return _Verdict.ABORTED
        # Single-table PREPARE/PREPARED whose BE context is gone: the BE answers
        # TXN_NOT_EXISTS until the FE times it out; the FE's cancel API aborts it now, as
        # the Flink connector's lingering-transaction aborter does (spec §2.5).
        logger.warning(
            "starrocks rollback found no BE context label=%s table=%s state=%s; cancelling "
            "through the FE",
            label,
            table,
            state,
        )
        self.api.cancel(label, table)
        after = self.state(label)
        if after.is_committed:
            return _Verdict.COMMITTED
        if after in (LoadState.ABORTED, LoadState.UNKNOWN):
            return _Verdict.ABORTED
        msg = (
            f"StarRocks label {label} (table {table}) is {after} after rollback and cancel "
            f"({error}); the query stops until StarRocks aborts it (transaction timeout)"
        )
        raise SinkTransientError(msg, label=label, table=table) from error

    def run_loads(self, labels: Mapping[str, str], multi: bool) -> tuple[LoadReport, ...]:
        """Step "load": the load job on the executors, failures re-raised on the driver."""
        reports = tuple(self.load_job(labels, multi))
        raise_load_failures(reports, labels)
        return reports


class MultiTableCommitter:
    """Multi-table mode (StarRocks 4.0+): one transaction per micro-batch, atomic.

    Called on the driver once per micro-batch; ``run()`` may be called again for the same
    batch (after a crash or an exception) and then neither duplicates nor loses it.
    """

    def __init__(self, api: TxnApi, load_job: LoadJob, policy: RetryPolicy) -> None:
        self._steps = _Steps(api, load_job, policy)
        self._api = api
        self._policy = policy

    def run(self, plan: BatchPlan) -> CommitResult:
        """Write ``plan`` exactly once (``docs/DESIGN.md`` §5, multi-table mode).

        For attempt 0, 1, ... with ``label = {prefix}-{query id}-{batch id}-{attempt}``:

        1. ``get_load_state(label)`` COMMITTED/VISIBLE: already applied, return.
        2. ``begin(label)``, the probe. OK: this attempt is ours. LABEL_ALREADY_EXISTS with
           COMMITED/FINISHED/VISIBLE: already applied, return. BEGIN/CANCELLED: a crashed
           attempt, roll it back, next attempt. ABORTING/COMMITING: wait until it settles.
        3. A label that was free: if a later attempt is committed (this one expired on the
           server), roll ours back and return already applied.
        4. Load every data table (executors), then the progress rows (driver).
        5. ``commit``, confirmed by ``get_load_state`` COMMITTED/VISIBLE. ABORTED, or the
           task cancelled: next attempt. Unclear past ``check_timeout_s``: raise transient.
        6. Failure before commit: roll back; transient: next attempt (at most
           ``batch_max_attempts`` failures per run); terminal: raise.
        """
        if not plan.tables and not plan.progress_rows:
            return CommitResult(Outcome.EMPTY)
        attempt = 0
        failures = 0
        last_error: BaseException | None = None
        while attempt < MAX_ATTEMPT_NUMBER:
            label = plan.label(attempt)
            # 1.
            if self._steps.state(label).is_committed:
                return self._applied(plan, label, attempt)
            # 2.
            probe = self._probe(label)
            if probe is _Probe.APPLIED:
                return self._applied(plan, label, attempt)
            if probe is _Probe.CRASHED:
                logger.warning("starrocks rolling back crashed attempt label=%s", label)
                if self._steps.rollback(label, None) is _Verdict.COMMITTED:
                    return self._applied(plan, label, attempt)
                attempt += 1
                continue
            # 3.
            later = self._later_committed(plan, attempt)
            if later is not None:
                self._steps.rollback(label, None)
                return self._applied(plan, plan.label(later), later)
            # 4.
            try:
                reports = self._steps.run_loads(dict.fromkeys(plan.tables, label), True)
                self._api.load(label, plan.progress_table, plan.progress(label), multi=True)
            except Exception as e:
                # 6.
                last_error = e
                if self._steps.rollback(label, None) is _Verdict.COMMITTED:
                    return self._applied(plan, label, attempt)
                if not _retryable(e):
                    raise
                failures += 1
                logger.warning(
                    "starrocks batch retry batch_id=%s label=%s error=%s", plan.batch_id, label, e
                )
                if failures >= self._policy.batch_max_attempts:
                    break
                attempt += 1
                continue
            # 5.
            started = self._policy.clock()
            verdict = self._commit(label)
            if verdict is _Verdict.COMMITTED:
                commit_ms = (self._policy.clock() - started) * 1000
                return CommitResult(Outcome.COMMITTED, (label,), attempt, reports, commit_ms)
            last_error = TransactionAbortedError(
                f"StarRocks label {label} was aborted at commit", label=label
            )
            failures += 1
            if failures >= self._policy.batch_max_attempts:
                break
            attempt += 1
        msg = (
            f"StarRocks batch {plan.batch_id} failed {failures} times (last attempt "
            f"{attempt}): {last_error}. Every attempt was rolled back; fix the cause and "
            "restart the query (the batch is replayed from the checkpoint)"
        )
        raise SinkTerminalError(msg, batch_id=plan.batch_id) from last_error

    def _applied(self, plan: BatchPlan, label: str, attempt: int) -> CommitResult:
        logger.info("starrocks batch already applied batch_id=%s label=%s", plan.batch_id, label)
        return CommitResult(Outcome.ALREADY_APPLIED, (label,), attempt)

    def _later_committed(self, plan: BatchPlan, attempt: int) -> int | None:
        for ahead in range(attempt + 1, attempt + 1 + LOOKAHEAD):
            if self._steps.state(plan.label(ahead)).is_committed:
                return ahead
        return None

    def _probe(self, label: str) -> _Probe:
        """Step 2: ``begin`` as the probe; waits out a label that is settling."""
        deadline = self._policy.deadline()
        retry = 0
        while True:
            probe = self._begin_once(label)
            if probe is not None and probe is not _Probe.SETTLING:
                return probe
            if self._policy.expired(deadline):
                msg = (
                    f"StarRocks label {label} is still committing or aborting after "
                    f"{self._policy.check_timeout_s:.0f}s; the query stops and the next run "
                    "probes it again"
                )
                raise SinkTransientError(msg, label=label)
            self._policy.pause(retry)
            retry += 1

    def _begin_once(self, label: str) -> _Probe | None:
        """One begin; ``None`` after a transient error (the next begin decides)."""
        try:
            self._api.begin(label, None)
        except LabelAlreadyExistsError as e:
            existing = str(e.context.get("existing_status") or "").upper()
            if existing in _APPLIED_JOBS:
                return _Probe.APPLIED
            if existing in _CRASHED_JOBS:
                return _Probe.CRASHED
            if existing in _SETTLING_JOBS:
                return _Probe.SETTLING
            msg = (
                f"StarRocks label {label} is in use by another writer (existing job status "
                f"{existing or 'none'}): {e}. Run exactly one query per checkpoint and give "
                "every pipeline its own sink.label-prefix"
            )
            raise SinkTerminalError(msg, label=label) from e
        except StarRocksError as e:
            if not isinstance(e, Transient):
                raise
            logger.warning("starrocks begin unclear label=%s error=%s", label, e)
            return None
        return _Probe.OURS

    def _commit(self, label: str) -> _Verdict:
        """Step 5: commit, then let the server confirm (raises when it stays unclear)."""
        said_ok = False
        first: StarRocksError | None = None
        try:
            self._api.commit(label, None)
            said_ok = True
        except TransactionCommittedError:
            return _Verdict.COMMITTED
        except StarRocksError as e:
            if isinstance(e, StarRocksTerminalError):
                # Filtered rows and the like: the FE has cancelled the task already.
                if self._steps.rollback(label, None) is _Verdict.COMMITTED:
                    return _Verdict.COMMITTED
                raise
            first = e
            if isinstance(e, TransactionAbortedError) and "cancelled" in str(e).lower():
                return _Verdict.ABORTED
        return self._confirm(label, said_ok, first)

    def _confirm(self, label: str, said_ok: bool, first: StarRocksError | None) -> _Verdict:
        deadline = self._policy.deadline()
        retry = 0
        while True:
            try:
                state: LoadState | None = self._api.get_load_state(label)
            except StarRocksError as e:
                if not isinstance(e, Transient):
                    raise
                first, state = e, None
            if state is not None and state.is_committed:
                return _Verdict.COMMITTED
            if state == LoadState.ABORTED:
                return _Verdict.ABORTED
            if state is not None:
                # Not registered (or not yet committed): the commit may never have arrived,
                # or (some 4.0.x builds) failed behind an OK. Re-sending it is safe: the
                # task answers "already committed", commits now, or says it is cancelled.
                verdict = self._recommit(label)
                if verdict is not None:
                    return verdict
            if self._policy.expired(deadline):
                msg = (
                    f"StarRocks commit outcome of label {label} is still unknown after "
                    f"{self._policy.check_timeout_s:.0f}s (state {state}, commit answered "
                    f"{'OK' if said_ok else first}). The query stops; on restart the label "
                    "decides (nothing is duplicated or lost)"
                )
                raise CommitOutcomeUnknownError(msg, label=label) from first
            self._policy.pause(retry)
            retry += 1

    def _recommit(self, label: str) -> _Verdict | None:
        try:
            self._api.commit(label, None)
        except TransactionCommittedError:
            return _Verdict.COMMITTED
        except TransactionAbortedError as e:
            # "is aborting" may still end COMMITED (FE reconcile): keep watching.
            return _Verdict.ABORTED if "cancelled" in str(e).lower() else None
        except TransactionNotFoundError:
            # No task and (just checked) not registered as committed: nothing can commit.
            return _Verdict.ABORTED
        except StarRocksError as e:
            if not isinstance(e, Transient):
                raise
        return None


class PerTableCommitter:
    """Per-table mode (StarRocks 2.4-3.x): one label per table, prepare all, commit all.

    Exactly-once per table, NOT atomic across tables: a reader may see table A of a batch
    before table B. Single-table labels are registered at ``begin``, so here
    ``get_load_state`` is a full answer and recovery reads it.
    """

    def __init__(self, api: TxnApi, load_job: LoadJob, policy: RetryPolicy) -> None:
        self._steps = _Steps(api, load_job, policy)
        self._api = api
        self._policy = policy

    def run(self, plan: BatchPlan) -> CommitResult:
        """Write ``plan`` exactly once per table (``docs/DESIGN.md`` §5, per-table mode).

        1. Recovery, attempt 0, 1, ...: the state of every table's label
           ``{prefix}-{query id}-{batch id}-{attempt}-{table}``. All UNKNOWN (and no later
           attempt known): this attempt is free. All PREPARED/COMMITTED/VISIBLE: commit the
           PREPARED ones, return recovered. Some committed, others not prepared: terminal.
           Otherwise roll back every PREPARE/PREPARED label of the attempt, next attempt.
        2. ``begin`` every table (data tables and the progress table).
        3. Load the data tables (executors), then the progress rows.
        4. ``prepare`` every table (a prepared transaction survives a crash).
        5. ``commit`` every table; an unclear commit is decided by the label state and
           re-sent on the same label, never reloaded.
        6. Failure before every table is PREPARED: roll back all labels of the attempt;
           transient: next attempt; terminal: raise.
        """
        if not plan.tables and not plan.progress_rows:
            return CommitResult(Outcome.EMPTY)
        tables = (*plan.tables, plan.progress_table)
        recovered = self._recover(plan, tables)
        if isinstance(recovered, CommitResult):
            return recovered
        attempt = recovered
        last_error: BaseException | None = None
        for _ in range(self._policy.batch_max_attempts):
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
                if not _retryable(e):
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
        attempt = 0
        while attempt < MAX_ATTEMPT_NUMBER:
            labels = {t: plan.label(attempt, t) for t in tables}
            txns = {t: from_state(labels[t], t, self._steps.state(labels[t])) for t in tables}
            statuses = {t: txn.status for t, txn in txns.items()}
            if all(s == TxnStatus.NEW for s in statuses.values()):
                later = self._later_known(plan, attempt, tables[-1])
                if later is None:
                    return attempt
                attempt = later
                continue
            done = {t for t, s in statuses.items() if s == TxnStatus.COMMITTED}
            prepared = {t for t, s in statuses.items() if s == TxnStatus.PREPARED}
            if done | prepared == set(tables):
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
                    f"{sorted(done)} but not prepared for {sorted(set(tables) - done - prepared)} "
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
            if self._commit(txn) is _Verdict.ABORTED:
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

    def _commit(self, txn: SinkTransaction) -> _Verdict:
        """Commit one prepared label; success is COMMITTED/VISIBLE as the server reports."""
        table = txn.table or ""
        try:
            self._api.commit(txn.label, table)
            return _Verdict.COMMITTED
        except TransactionCommittedError:
            return _Verdict.COMMITTED
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
                return _Verdict.COMMITTED
            if state == LoadState.ABORTED:
                if not isinstance(first, Transient):
                    raise first
                return _Verdict.ABORTED
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
            if state in (LoadState.PREPARE, LoadState.PREPARED) and not isinstance(
                first, CommitOutcomeUnknownError
            ):
                # The commit may never have arrived: re-sending it on the same label is safe.
                try:
                    self._api.commit(txn.label, table)
                    return _Verdict.COMMITTED
                except TransactionCommittedError:
                    return _Verdict.COMMITTED
                except StarRocksError as e:
                    first = e
