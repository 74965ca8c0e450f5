"""The exactly-once protocol, with no Spark and no HTTP: one class per transaction mode.

A committer gets a :class:`~sinks.starrocks.txnapi.TxnApi`, a
:class:`~sinks.starrocks.txnapi.LoadJob` and a :class:`~sinks.starrocks.retry.RetryPolicy`,
and its ``run()`` is the numbered protocol of ``docs/DESIGN.md`` §5, recovery included:
:class:`MultiTableCommitter` here, :class:`~sinks.starrocks.per_table.PerTableCommitter` in
its own module, the shared steps in :mod:`sinks.starrocks.steps`, plan and result types in
:mod:`sinks.starrocks.batch`. The Spark adapter (:mod:`sinks.starrocks.sink`) only prepares a
:class:`BatchPlan` and a load job.

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
from dataclasses import replace

from common.errors import Transient
from sinks.exceptions import SinkTerminalError, SinkTransientError
from sinks.starrocks.batch import (
    BatchPlan,
    CommitResult,
    Outcome,
    load_error,
    raise_load_failures,
)
from sinks.starrocks.errors import (
    CommitOutcomeUnknownError,
    LabelAlreadyExistsError,
    StarRocksError,
    StarRocksTerminalError,
    TransactionAbortedError,
    TransactionCommittedError,
    TransactionNotFoundError,
)
from sinks.starrocks.labels import parse_label
from sinks.starrocks.per_table import PerTableCommitter
from sinks.starrocks.protocol import LoadState
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.steps import LOOKAHEAD, MAX_ATTEMPT_NUMBER, Steps, Verdict, retryable
from sinks.starrocks.txnapi import LoadJob, TxnApi

__all__ = [
    "BatchPlan",
    "CommitResult",
    "MultiTableCommitter",
    "Outcome",
    "PerTableCommitter",
    "load_error",
    "raise_load_failures",
]

logger = logging.getLogger(__name__)

# ``ExistingJobStatus`` of a multi-table begin on a used label (StreamLoadMultiStmtTask
# state names, spelling included, or a TransactionStatus name from the label history). A
# PREPARE/PREPARED history entry with no task is a single-table transaction: another writer.
_APPLIED_JOBS = frozenset({"COMMITED", "COMMITTED", "VISIBLE", "FINISHED"})
_CRASHED_JOBS = frozenset({"BEGIN", "CANCELLED", "ABORTED"})
_SETTLING_JOBS = frozenset({"ABORTING", "COMMITING"})


class _Probe(enum.Enum):
    """What a multi-table ``begin`` on a label said about it."""

    OURS = "ours"  # begin OK: this attempt is open and ours
    APPLIED = "applied"  # an earlier attempt under this label committed
    CRASHED = "crashed"  # an earlier attempt is open or cancelled: roll back, next attempt
    SETTLING = "settling"  # committing or aborting right now: wait


class MultiTableCommitter:
    """Multi-table mode (StarRocks 4.0+): one transaction per micro-batch, atomic.

    Called on the driver once per micro-batch; ``run()`` may be called again for the same
    batch (after a crash or an exception) and then neither duplicates nor loses it.
    """

    def __init__(self, api: TxnApi, load_job: LoadJob, policy: RetryPolicy) -> None:
        self._steps = Steps(api, load_job, policy)
        self._api = api
        self._policy = policy

    def run(self, plan: BatchPlan) -> CommitResult:
        """Write ``plan`` exactly once (``docs/DESIGN.md`` §5, multi-table mode).

        For attempt 0, 1, ... with ``label = {prefix}-{query id}-{batch id}-{attempt}``:

        1. ``get_load_state(label)`` COMMITTED/VISIBLE: already applied, return (skipped,
           like step 3, for a ``plan.fresh`` batch: it has no earlier attempt).
        2. ``begin(label)``, the probe. OK: this attempt is ours. LABEL_ALREADY_EXISTS with
           COMMITED/FINISHED/VISIBLE: already applied, return. BEGIN/CANCELLED: a crashed
           attempt, roll it back, next attempt. ABORTING/COMMITING: wait until it settles.
        3. A label that was free: if a later attempt is committed (this one expired on the
           server), roll ours back and return already applied. Past the look-ahead, the
           progress table decides (``plan.applied``, once per run): its rows name the
           committed attempt when the server has dropped the tasks of those before it.
        4. Load every data table (executors), then the progress rows (driver). A load job
           that also counts the batch (``plan.counted``) is followed by the check of its
           targets, then its failures; no progress rows: an empty batch, rolled back.
        5. ``commit``, confirmed by ``get_load_state`` COMMITTED/VISIBLE. ABORTED, or the
           task cancelled: next attempt. Unclear past ``check_timeout_s``: raise transient.
        6. Failure before commit: roll back; transient: next attempt after the retry
           backoff (at most ``batch_max_attempts`` failures per run); terminal: raise.
        """
        if not plan.tables and not plan.progress_rows and plan.counted is None:
            return CommitResult(Outcome.EMPTY)
        attempt = 0
        failures = 0
        last_error: BaseException | None = None
        asked_progress = False
        while attempt < MAX_ATTEMPT_NUMBER:
            label = plan.label(attempt)
            # 1. (A fresh batch has no earlier attempt: steps 1 and 3 would only cost calls.)
            if not plan.fresh and self._steps.state(label).is_committed:
                return self._applied(plan, label, attempt)
            # 2.
            probe = self._probe(label)
            if probe is _Probe.APPLIED:
                return self._applied(plan, label, attempt)
            if probe is _Probe.CRASHED:
                logger.warning("starrocks rolling back crashed attempt label=%s", label)
                if self._steps.rollback(label, None) is Verdict.COMMITTED:
                    return self._applied(plan, label, attempt)
                attempt += 1
                continue
            # 3.
            later = None if plan.fresh else self._later_committed(plan, attempt)
            if later is not None:
                self._steps.rollback(label, None)
                return self._applied(plan, plan.label(later), later)
            if not plan.fresh and plan.applied is not None and not asked_progress:
                asked_progress = True
                found = self._in_progress_table(plan)
                if found is not None:
                    self._steps.rollback(label, None)
                    return self._applied(plan, plan.label(found), found)
            # 4.
            try:
                labels = plan.load_labels(label)
                if plan.counted is None:
                    reports = self._steps.run_loads(labels, True)
                else:
                    reports = tuple(self._steps.load_job(labels, True))
                    # Targets before failures: a row for a table outside table-name fails
                    # as that, not as whatever StarRocks answered its load.
                    plan = replace(plan, progress_rows=tuple(plan.counted()))
                    raise_load_failures(reports, labels)
                if plan.progress_rows:
                    self._api.load(label, plan.progress_table, plan.progress(label), multi=True)
            except Exception as e:
                # 6.
                last_error = e
                if self._steps.rollback(label, None) is Verdict.COMMITTED:
                    return self._applied(plan, label, attempt)
                if not retryable(e):
                    raise
                failures += 1
                logger.warning(
                    "starrocks batch retry batch_id=%s label=%s error=%s", plan.batch_id, label, e
                )
                if failures >= self._policy.batch_max_attempts:
                    break
                self._policy.pause(failures - 1)  # let a struggling server recover
                attempt += 1
                continue
            if not plan.progress_rows:
                return self._empty(plan, label, attempt)
            if plan.defer_commit:
                return CommitResult(Outcome.LOADED, (label,), attempt, reports)
            # 5.
            started = self._policy.clock()
            verdict = self._commit(label)
            if verdict is Verdict.COMMITTED:
                commit_ms = (self._policy.clock() - started) * 1000
                return CommitResult(Outcome.COMMITTED, (label,), attempt, reports, commit_ms)
            last_error = TransactionAbortedError(
                f"StarRocks label {label} was aborted at commit", label=label
            )
            failures += 1
            if failures >= self._policy.batch_max_attempts:
                break
            self._policy.pause(failures - 1)
            attempt += 1
        msg = (
            f"StarRocks batch {plan.batch_id} failed {failures} times (last attempt "
            f"{attempt}): {last_error}. Every attempt was rolled back; fix the cause and "
            "restart the query (the batch is replayed from the checkpoint)"
        )
        raise SinkTerminalError(msg, batch_id=plan.batch_id) from last_error

    def commit(self, label: str) -> Verdict:
        """Step 5 alone, for a label ``run()`` left LOADED (``BatchPlan.defer_commit``).

        COMMITTED, or ABORTED (the server cancelled the task: its batch must be loaded
        again). Raises when the outcome stays unknown past ``check_timeout_s``.
        """
        return self._commit(label)

    def settle(self, label: str) -> Verdict:
        """A LOADED label an earlier run left: committed already, committed now, or gone.

        ABORTED when the server holds no transaction for it any more (timed out, cancelled
        by an FE restart), or refused its commit for good and it is rolled back; its batch
        must be loaded again. Any other terminal error (the rollback or ``get_load_state``
        refused, e.g. credentials) raises: the label may still be open and committable.
        """
        try:
            if self._steps.state(label).is_committed:
                return Verdict.COMMITTED
            outcome = self._commit_or_refusal(label)
        except StarRocksTerminalError as e:
            msg = (
                f"StarRocks label {label}, loaded by an earlier run and left to commit, could "
                f"not be settled: {e}. It may still be open and committable, so the checkpoint "
                "is kept as it is; fix the cause and start again (the next start settles it)"
            )
            raise SinkTerminalError(msg, label=label) from e
        if isinstance(outcome, StarRocksTerminalError):
            logger.warning(
                "starrocks commit refused label=%s answer=%s; rolled back", label, outcome
            )
            return Verdict.ABORTED
        return outcome

    def _empty(self, plan: BatchPlan, label: str, attempt: int) -> CommitResult:
        """A counted load found no rows: its begun label is rolled back, nothing committed."""
        if self._steps.rollback(label, None) is Verdict.COMMITTED:
            return self._applied(plan, label, attempt)
        return CommitResult(Outcome.EMPTY, (), attempt)

    def _applied(self, plan: BatchPlan, label: str, attempt: int) -> CommitResult:
        logger.info("starrocks batch already applied batch_id=%s label=%s", plan.batch_id, label)
        return CommitResult(Outcome.ALREADY_APPLIED, (label,), attempt)

    def _in_progress_table(self, plan: BatchPlan) -> int | None:
        """The attempt whose label the progress table holds for this batch, if any."""
        assert plan.applied is not None
        mine = (plan.query_id, plan.batch_id, None)
        for label in plan.applied():
            parts = parse_label(label, plan.prefix)
            if parts is not None and (parts.query_id, parts.batch_id, parts.table) == mine:
                logger.warning(
                    "starrocks batch found in the progress table batch_id=%s label=%s (the "
                    "server no longer knows the attempts before it)",
                    plan.batch_id,
                    label,
                )
                return parts.attempt
        return None

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

    def _commit(self, label: str) -> Verdict:
        """Step 5: commit, then let the server confirm (raises when it stays unclear)."""
        outcome = self._commit_or_refusal(label)
        if isinstance(outcome, StarRocksTerminalError):
            raise outcome
        return outcome

    def _commit_or_refusal(self, label: str) -> Verdict | StarRocksTerminalError:
        """:meth:`_commit`, answering a refused commit, once rolled back, with the refusal."""
        said_ok = False
        first: StarRocksError | None = None
        try:
            self._api.commit(label, None)
            said_ok = True
        except TransactionCommittedError:
            return Verdict.COMMITTED
        except StarRocksError as e:
            if isinstance(e, StarRocksTerminalError):
                # Filtered rows and the like: the FE has cancelled the task already.
                if self._steps.rollback(label, None) is Verdict.COMMITTED:
                    return Verdict.COMMITTED
                return e
            # Even "Can not commit CANCELLED" goes to the label: an FE restarted from its
            # journal, which keeps only a multi-table task's creation, reloads the task as
            # CANCELLED while its transaction is VISIBLE (StreamLoadMgr
            # .cancelUnDurableTaskAfterRestart), and that is what the client's retry of a
            # commit whose answer was lost hears. Reloading then would apply the batch twice.
            first = e
        return self._confirm(label, said_ok, first)

    def _confirm(self, label: str, said_ok: bool, first: StarRocksError | None) -> Verdict:
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
                return Verdict.COMMITTED
            if state == LoadState.ABORTED:
                return _aborted(label, said_ok, first)
            if state is not None:
                # Not registered (or not yet committed): the commit may never have arrived,
                # or (some 4.0.x builds) failed behind an OK. Re-sending it is safe: the
                # task answers "already committed", commits now, or says it is cancelled.
                verdict = self._recommit(label)
                if verdict is Verdict.ABORTED:
                    return _aborted(label, said_ok, first)
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

    def _recommit(self, label: str) -> Verdict | None:
        try:
            self._api.commit(label, None)
        except TransactionCommittedError:
            return Verdict.COMMITTED
        except TransactionAbortedError as e:
            # "is aborting" may still end COMMITED (FE reconcile): keep watching.
            return Verdict.ABORTED if _cancelled(e) else None
        except TransactionNotFoundError:
            # No task and (just checked) not registered as committed: nothing can commit.
            return Verdict.ABORTED
        except StarRocksError as e:
            if not isinstance(e, Transient):
                raise
        return None


def _aborted(label: str, said_ok: bool, answer: StarRocksError | None) -> Verdict:
    """An attempt that did not commit: say why (its batch goes to the next attempt)."""
    logger.warning(
        "starrocks commit aborted label=%s answer=%s; nothing of this attempt is applied",
        label,
        "OK" if said_ok else answer,
    )
    return Verdict.ABORTED


def _cancelled(error: StarRocksError) -> bool:
    """The task is CANCELLED (final): ``Can not commit CANCELLED ...`` / ``... cancelled: ``.

    Not ``is aborting``: an ABORTING task may still end COMMITED when the FE reconciles it.
    """
    text = error.message.lower()
    return isinstance(error, TransactionAbortedError) and (
        "can not commit cancelled" in text or "has already been cancelled" in text
    )
