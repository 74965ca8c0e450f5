"""Protocol steps both committers share: each is one server call plus the retry policy.

Used by :mod:`sinks.starrocks.committer` (multi-table) and :mod:`sinks.starrocks.per_table`.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping

from common.errors import Transient
from sinks.exceptions import SinkError, SinkTransientError
from sinks.starrocks.batch import raise_load_failures
from sinks.starrocks.errors import (
    StarRocksError,
    TransactionCommittedError,
    TransactionNotFoundError,
)
from sinks.starrocks.protocol import LoadState
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.txnapi import LoadJob, LoadReport, TxnApi

logger = logging.getLogger(__name__)

#: Recovery walks attempts 0, 1, ...; a batch needing more than this many is a crash loop.
MAX_ATTEMPT_NUMBER = 1000
#: Later attempts checked when an attempt's label is free: an old label may have expired
#: from the server (label_keep_max_second) while a later attempt of the batch is still known.
LOOKAHEAD = 2


class Verdict(enum.Enum):
    """The server's final word on one label."""

    COMMITTED = "committed"
    ABORTED = "aborted"


def retryable(error: BaseException) -> bool:
    """Transient sink errors and failed Spark jobs are retried under a new attempt."""
    if isinstance(error, SinkError):
        return isinstance(error, Transient)
    # Anything else from the load job is a failed Spark job (task error, lost executor).
    return True


class Steps:
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

    def rollback(self, label: str, table: str | None) -> Verdict:
        """Roll ``label`` back until the server shows it cannot commit any more.

        Returns COMMITTED if the label turned out committed. Never swallows an unknown
        outcome: the error propagates, so no new attempt begins while this one may commit.
        """
        retry = 0
        while True:
            try:
                self.api.rollback(label, table)
                logger.info("starrocks rolled back label=%s table=%s", label, table)
                return Verdict.ABORTED
            except TransactionCommittedError:
                return Verdict.COMMITTED
            except TransactionNotFoundError as e:
                return self._rollback_gone(label, table, e)
            except StarRocksError as e:
                if not isinstance(e, Transient):
                    raise
                state = self.state(label)
                if state.is_committed:
                    return Verdict.COMMITTED
                if state == LoadState.ABORTED:
                    return Verdict.ABORTED
                if retry >= self.policy.max_retries:
                    msg = (
                        f"StarRocks rollback of label {label} failed ({e}) and the label is "
                        f"{state}; the query stops so that no new attempt starts before it "
                        "is aborted (on restart, recovery rolls it back)"
                    )
                    raise SinkTransientError(msg, label=label, table=table) from e
            self.policy.pause(retry)
            retry += 1

    def _rollback_gone(self, label: str, table: str | None, error: StarRocksError) -> Verdict:
        """Rollback said "no such transaction": decide from the label state."""
        state = self.state(label)
        if state.is_committed:
            return Verdict.COMMITTED
        if table is None or state in (LoadState.UNKNOWN, LoadState.ABORTED):
            # Multi-table: no task and not registered, nothing left that could commit.
            return Verdict.ABORTED
        if state == LoadState.PREPARED:
            # Its prepare finished since: the FE rolls a PREPARED label back itself, and its
            # cancel API aborts only PREPARE ones (abortTransaction by label finds no other).
            try:
                self.api.rollback(label, table)
            except TransactionCommittedError:
                return Verdict.COMMITTED
            logger.info("starrocks rolled back label=%s table=%s", label, table)
            return Verdict.ABORTED
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
            return Verdict.COMMITTED
        if after in (LoadState.ABORTED, LoadState.UNKNOWN):
            return Verdict.ABORTED
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
