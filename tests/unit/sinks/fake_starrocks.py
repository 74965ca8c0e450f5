"""A fake StarRocks behind the committer's ``TxnApi``: a dict of label -> state, as the FE keeps it.

It answers with the server's own JSON (``docs/starrocks-txn-protocol.md`` §3-§4, checked
against ``StreamLoadMultiStmtTask``, ``StreamLoadMgr``, ``GetStreamLoadState``) and runs
every answer through the product's :func:`sinks.starrocks.errors.classify`, so the
committer sees exactly the exceptions it would see over HTTP. Two registries, as in the FE:

* ``tasks``: ``StreamLoadMgr``'s multi-table tasks (BEGIN, COMMITED, ABORTING, CANCELLED),
  keyed by label only (labels are global there);
* ``txns``: the transaction manager that ``get_load_state`` reads. A single-table label is
  registered at begin; a multi-table label at commit (``registration="commit"``, 4.0) or at
  its first load (``"first_load"``, newest), never if it loads nothing.

Knobs: ``ok_but_failed_commits`` (4.0.x builds that answer OK to a failed multi-table
commit), ``publish_wait`` (commit OK, label COMMITTED before VISIBLE), :meth:`restart` (FE
restart: open tasks cancelled, BE contexts gone). :class:`ScriptedApi` adds failures per
call: an error before the call, a lost answer after it, or a crash before/after it. As the
real BE and ``devstack/starrocks/txns.py`` do, a single-table label that no load reached is
refused at prepare and commit (INTERNAL_ERROR "hasn't send any data yet") and rolled back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devstack.starrocks.faults import write_lock_timeout
from sinks.starrocks.errors import StarRocksError, classify
from sinks.starrocks.protocol import LoadState, TxnOp
from sinks.starrocks.txnapi import LoadFailure, LoadJob, LoadReport

EXC = "class com.starrocks.common.StarRocksException: "


class Crash(BaseException):
    """kill -9 of the driver: not an Exception, so no cleanup path runs."""


@dataclass
class Task:
    """A multi-table task in ``StreamLoadMgr``."""

    txn_id: int
    state: str = "BEGIN"
    rows: dict[str, list[Any]] = field(default_factory=dict)
    registered: bool = False
    aborting_left: int = 0  # requests that still see ABORTING before the rollback lands


@dataclass
class Single:
    """A single-table transaction (FE status plus whether the BE context still exists)."""

    txn_id: int
    table: str
    status: str = "PREPARE"
    be_alive: bool = True
    rows: list[Any] = field(default_factory=list)
    loads: int = 0  # load requests the BE context took (an empty body counts, as on the BE)


class FakeStarRocks:
    """The server: what ``TxnApi`` calls do to it, and what it answers."""

    def __init__(
        self,
        *,
        registration: str = "first_load",
        ok_but_failed_commits: int = 0,
        publish_wait: bool = False,
        slow_abort: int = 0,
    ) -> None:
        self.registration = registration
        self.slow_abort = slow_abort
        self.ok_but_failed_commits = ok_but_failed_commits
        self.publish_wait = publish_wait
        self.tasks: dict[str, Task] = {}
        self.singles: dict[str, Single] = {}
        self.txns: dict[str, str] = {}  # the transaction manager: label -> TransactionStatus
        self.visible: dict[str, list[Any]] = {}  # table -> rows applied, in commit order
        self.committed_labels: list[str] = []
        self._next_id = 100

    # -- answers --------------------------------------------------------------------------

    def _answer(
        self, op: TxnOp, label: str, table: str | None, status: str, msg: str = "", **extra: Any
    ) -> None:
        body = json.dumps({"Status": status, "Message": msg, **extra})
        result = classify(op, 200, body, label=label, table=table)
        if isinstance(result, StarRocksError):
            raise result

    def _task(self, label: str) -> Task | None:
        """The task, its background rollback advanced by one step (ABORTING -> CANCELLED)."""
        task = self.tasks.get(label)
        if task is not None and task.state == "ABORTING":
            task.aborting_left -= 1
            if task.aborting_left <= 0:
                task.state = "CANCELLED"
        return task

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _apply(self, label: str, rows: Mapping[str, list[Any]]) -> None:
        for table, table_rows in rows.items():
            self.visible.setdefault(table, []).extend(table_rows)
        self.committed_labels.append(label)

    # -- operations -----------------------------------------------------------------------

    def begin(self, label: str, table: str | None) -> None:
        op = TxnOp.BEGIN
        if table is None:
            task = self._task(label)
            if task is not None:
                if task.state in ("COMMITED", "FINISHED"):
                    return self._answer(
                        op,
                        label,
                        table,
                        "LABEL_ALREADY_EXISTS",
                        f"Label [{label}] has already been used.",
                        ExistingJobStatus=task.state,
                    )
                return self._answer(
                    op,
                    label,
                    table,
                    "LABEL_ALREADY_EXISTS",
                    f"Transaction already started with label [{label}], txnId: {task.txn_id}",
                    ExistingJobStatus=task.state,
                    TxnId=task.txn_id,
                )
            status = self.txns.get(label)
            if status is not None and status != "ABORTED":
                return self._answer(
                    op,
                    label,
                    table,
                    "LABEL_ALREADY_EXISTS",
                    f"Label [{label}] has already been used.",
                    ExistingJobStatus=status,
                )
            self.tasks[label] = Task(self._id())
            return self._answer(op, label, table, "OK")
        single = self.singles.get(label)
        if single is not None and single.status != "ABORTED":
            existing = "FINISHED" if single.status in ("COMMITTED", "VISIBLE") else "RUNNING"
            return self._answer(
                op,
                label,
                table,
                "LABEL_ALREADY_EXISTS",
                f"Label [{label}] has already been used.",
                ExistingJobStatus=existing,
            )
        self.singles[label] = Single(self._id(), table)
        self.txns[label] = "PREPARE"
        return self._answer(op, label, table, "OK", Label=label)

    def load(self, label: str, table: str, rows: Sequence[Any], *, multi: bool) -> None:
        op = TxnOp.LOAD
        if multi:
            task = self._task(label)
            if task is None:
                return self._answer(
                    op, label, table, "FAILED", EXC + f"stream load task {label} does not exist"
                )
            if task.state in ("COMMITED", "COMMITING", "FINISHED"):
                return self._answer(
                    op,
                    label,
                    table,
                    "FAILED",
                    EXC + f"stream load task {label} has already been commited",
                )
            if task.state == "CANCELLED":
                return self._answer(
                    op,
                    label,
                    table,
                    "FAILED",
                    EXC + f"stream load task {label} has already been cancelled: x",
                )
            if task.state == "ABORTING":
                return self._answer(
                    op, label, table, "FAILED", EXC + f"stream load task {label} is aborting: x"
                )
            task.rows.setdefault(table, []).extend(rows)
            if self.registration == "first_load" and not task.registered:
                task.registered = True
                self.txns[label] = "PREPARE"
            return self._answer(op, label, table, "OK", Label=label, TxnId=task.txn_id)
        single = self.singles.get(label)
        if single is None:
            return self._answer(
                op,
                label,
                table,
                "FAILED",
                EXC + f"Can't find the transaction with db [d] and label[{label}].",
            )
        if single.status != "PREPARE" or not single.be_alive:
            return self._answer(
                op, label, table, "TXN_NOT_EXISTS", f"Transaction with label {label} not exists"
            )
        single.rows.extend(rows)
        single.loads += 1
        return self._answer(op, label, table, "OK", Label=label, TxnId=single.txn_id)

    def prepare(self, label: str, table: str) -> None:
        op = TxnOp.PREPARE
        single = self.singles.get(label)
        if single is None:
            return self._answer(
                op,
                label,
                table,
                "FAILED",
                EXC + f"No transaction found with db[d] and label[{label}]",
            )
        if single.status != "PREPARE" or not single.be_alive:
            return self._answer(
                op, label, table, "TXN_NOT_EXISTS", f"transaction with label {label} not exists"
            )
        if not single.loads:
            return self._no_data(op, label, single)
        single.status = "PREPARED"
        single.be_alive = False
        self.txns[label] = "PREPARED"
        return self._answer(op, label, table, "OK", Label=label, TxnId=single.txn_id)

    def commit(self, label: str, table: str | None) -> None:
        op = TxnOp.COMMIT
        if table is None:
            return self._commit_multi(label)
        single = self.singles.get(label)
        if single is None:
            return self._answer(
                op,
                label,
                table,
                "FAILED",
                EXC + f"No transaction found with db[d] and label[{label}]",
            )
        n = single.txn_id
        if single.status in ("COMMITTED", "VISIBLE"):
            return self._answer(
                op, label, table, "OK", f"Transaction {n} has already committed, label is {label}"
            )
        if single.status == "ABORTED":
            return self._answer(
                op,
                label,
                table,
                "FAILED",
                EXC + f"Can not commit ABORTED transaction {n}, label is {label}",
            )
        if single.status == "PREPARE" and not single.be_alive:
            return self._answer(
                op, label, table, "TXN_NOT_EXISTS", f"transaction with label {label} not exists"
            )
        if single.status == "PREPARE" and not single.loads:
            return self._no_data(op, label, single)
        single.status = "VISIBLE"
        single.be_alive = False
        self.txns[label] = "VISIBLE"
        self._apply(label, {single.table: single.rows})
        return self._answer(op, label, table, "OK", Label=label, TxnId=n)

    def _no_data(self, op: TxnOp, label: str, single: Single) -> None:
        """A single-table label no load reached: the BE refuses and rolls it back (§4.2)."""
        single.status = "ABORTED"
        single.be_alive = False
        self.txns[label] = "ABORTED"
        msg = (
            f"transaction id=x, job_id=-1, txn_id: {single.txn_id}, label={label}, db=d "
            "hasn't send any data yet"
        )
        return self._answer(op, label, single.table, "INTERNAL_ERROR", msg)

    def _commit_multi(self, label: str) -> None:
        op = TxnOp.COMMIT
        task = self._task(label)
        if task is None:
            return self._answer(
                op, label, None, "FAILED", EXC + f"stream load task {label} does not exist"
            )
        n = task.txn_id
        if task.state in ("COMMITED", "FINISHED"):
            return self._answer(
                op,
                label,
                None,
                "OK",
                f"Transaction {n} has already committed, label is {label}",
                Label=label,
                TxnId=n,
            )
        if task.state == "CANCELLED":
            return self._answer(
                op,
                label,
                None,
                "FAILED",
                f"Can not commit CANCELLED transaction {n}, label is {label}",
            )
        if task.state == "ABORTING":
            return self._answer(
                op,
                label,
                None,
                "FAILED",
                f"Transaction {n} is aborting (reason: x), label is {label}",
            )
        if task.rows and not task.registered:
            task.registered = True  # commitTxn -> loadData registers the label (4.0)
        if self.ok_but_failed_commits > 0:
            # 4.0.x: commitStmt failed, only commitErrorMsg was set, the task rolled back,
            # and the answer still says OK.
            self.ok_but_failed_commits -= 1
            task.state = "CANCELLED"
            if task.registered:
                self.txns[label] = "ABORTED"
            return self._answer(op, label, None, "OK", Label=label, TxnId=n)
        task.state = "COMMITED"
        if task.registered:
            self.txns[label] = "COMMITTED" if self.publish_wait else "VISIBLE"
        self._apply(label, task.rows)
        return self._answer(op, label, None, "OK", Label=label, TxnId=n)

    def rollback(self, label: str, table: str | None) -> None:
        op = TxnOp.ROLLBACK
        if table is None:
            task = self._task(label)
            if task is None:
                return self._answer(
                    op, label, None, "FAILED", EXC + f"stream load task{label}does not exist"
                )
            n = task.txn_id
            if task.state in ("COMMITED", "FINISHED"):
                return self._answer(
                    op,
                    label,
                    None,
                    "FAILED",
                    f"Can not abort VISIBLE transaction {n}, label is {label}",
                )
            if task.state == "CANCELLED":
                return self._answer(
                    op, label, None, "OK", f"Transaction {n} has already aborted, label is {label}"
                )
            if task.state == "ABORTING":
                return self._answer(
                    op,
                    label,
                    None,
                    "OK",
                    f"Transaction {n} abort is already in progress, label is "
                    f"{label}. Background retry will continue.",
                )
            if self.slow_abort > 0:
                # tryRollbackNow failed: the task stays ABORTING, a background retry finishes
                # it (StreamLoadMultiStmtTask.manualCancelTask / retryAbortIfNeeded).
                task.state = "ABORTING"
                task.aborting_left = self.slow_abort
                if task.registered:
                    self.txns[label] = "ABORTED"
                return self._answer(
                    op, label, None, "OK", f"stream load {label} abort initiated, rollback pending"
                )
            task.state = "CANCELLED"
            if task.registered:
                self.txns[label] = "ABORTED"
            return self._answer(op, label, None, "OK", f"stream load {label} abort")
        single = self.singles.get(label)
        if single is None:
            return self._answer(
                op,
                label,
                table,
                "FAILED",
                EXC + f"No transaction found with db[d] and label[{label}]",
            )
        n = single.txn_id
        if single.status == "ABORTED":
            return self._answer(
                op, label, table, "OK", f"Transaction {n} has already aborted, label is {label}"
            )
        if single.status in ("COMMITTED", "VISIBLE"):
            return self._answer(
                op,
                label,
                table,
                "FAILED",
                EXC + f"Can not abort VISIBLE transaction {n}, label is {label}",
            )
        if single.status == "PREPARE" and not single.be_alive:
            # The FE 307s a PREPARE label to its BE, whose context is gone (spec §3.3).
            return self._answer(
                op, label, table, "TXN_NOT_EXISTS", f"transaction with label {label} not exists"
            )
        single.status = "ABORTED"
        single.be_alive = False
        self.txns[label] = "ABORTED"
        return self._answer(op, label, table, "OK", Label=label)

    def cancel(self, label: str, table: str) -> None:
        single = self.singles.get(label)
        if single is not None and single.status == "PREPARED":
            # DatabaseTransactionMgr.abortTransaction(label) looks for a PREPARE one only.
            body = json.dumps(
                {"status": "FAILED", "msg": f"running transaction not found, label={label}"}
            )
        else:
            if single is not None and single.status == "PREPARE":
                single.status = "ABORTED"
                single.be_alive = False
                self.txns[label] = "ABORTED"
            body = json.dumps({"status": "OK", "msg": "Success"})
        result = classify(TxnOp.ROLLBACK, 200, body, label=label, table=table)
        if isinstance(result, StarRocksError):
            raise result

    def get_load_state(self, label: str) -> LoadState:
        return LoadState.parse(self.txns.get(label, "UNKNOWN"))

    def restart(self, *, from_journal: bool = False) -> None:
        """FE restart: open multi-table tasks are cancelled, BE contexts vanish.

        ``from_journal``: the FE replays the journal with no image since the tasks' commits.
        The journal has only a multi-table task's creation, so every task comes back
        CANCELLED, committed ones too; the transaction manager keeps their outcome.
        """
        for label, task in self.tasks.items():
            if from_journal and task.state in ("COMMITED", "FINISHED"):
                task.state = "CANCELLED"
                continue
            if task.state == "BEGIN":
                task.state = "CANCELLED"
                if task.registered:
                    self.txns[label] = "ABORTED"
        for single in self.singles.values():
            if single.status == "PREPARE":
                single.be_alive = False

    def open_labels(self) -> list[str]:
        """Labels that could still commit (multi BEGIN tasks, single PREPARE/PREPARED)."""
        return [lbl for lbl, t in self.tasks.items() if t.state == "BEGIN"] + [
            lbl for lbl, s in self.singles.items() if s.status in ("PREPARE", "PREPARED")
        ]


#: Per-call failures: before the call (nothing happens on the server), after it (it
#: happened, the answer is lost), a crash before/after it, or an FE restart before it.
FAULTS = (
    "error_before",  # connection refused: nothing happened
    "busy_before",  # HTTP 500 without a body: nothing happened
    "in_processing",  # TXN_IN_PROCESSING: nothing happened
    # FAILED "get database write lock timeout": a single-table txn is left as it was; a
    # multi-table commit rolls its task back (``commitTxn`` when ``commitStmt`` fails)
    "lock_timeout",
    "lost_after",  # it happened; the answer was lost (read timeout)
    "crash_before",
    "crash_after",
    "restart",  # FE restart just before the call
)


class ScriptedApi:
    """``TxnApi`` over a :class:`FakeStarRocks`, failing the n-th call as scripted.

    Rows travel as Python lists (the body's JSON is the loader's business, tested elsewhere);
    ``load`` takes ``bytes`` like the real API and decodes them.
    """

    def __init__(self, server: FakeStarRocks, script: Mapping[int, str] | None = None) -> None:
        self.server = server
        self.script = dict(script or {})
        self.calls: list[tuple[str, str, str | None]] = []

    def _call(self, name: str, label: str, table: str | None, fn: Any) -> Any:
        index = len(self.calls)
        self.calls.append((name, label, table))
        fault = self.script.get(index)
        if fault == "crash_before":
            raise Crash(f"{name} {label}")
        if fault == "restart":
            self.server.restart()
        if fault in ("error_before", "busy_before", "in_processing", "lock_timeout"):
            op = TxnOp(name)
            if fault == "error_before":
                detail = "ConnectionError: refused"
                err = classify(op, None, None, label=label, table=table, detail=detail)
            elif fault == "busy_before":
                err = classify(op, 500, b"<html>oops</html>", label=label, table=table)
            elif fault == "lock_timeout":
                if name == "commit" and table is None and self.server.tasks.get(label):
                    self.server.rollback(label, None)
                body = json.dumps(
                    {"Status": "FAILED", "Label": label, "Message": write_lock_timeout("d")}
                )
                err = classify(op, 200, body, label=label, table=table)
            else:
                msg = "Transaction in processing, please retry later"
                body = json.dumps({"Status": "TXN_IN_PROCESSING", "Label": label, "Message": msg})
                err = classify(op, 200, body, label=label, table=table)
            assert isinstance(err, StarRocksError)
            raise err
        result = fn()
        if fault == "crash_after":
            raise Crash(f"after {name} {label}")
        if fault == "lost_after":
            detail = "ReadTimeout: lost"
            err = classify(TxnOp(name), None, None, label=label, table=table, detail=detail)
            assert isinstance(err, StarRocksError)
            raise err
        return result

    def begin(self, label: str, table: str | None) -> None:
        self._call("begin", label, table, lambda: self.server.begin(label, table))

    def load(self, label: str, table: str, body: bytes, *, multi: bool) -> None:
        rows = json.loads(body)
        self._call("load", label, table, lambda: self.server.load(label, table, rows, multi=multi))

    def prepare(self, label: str, table: str) -> None:
        self._call("prepare", label, table, lambda: self.server.prepare(label, table))

    def commit(self, label: str, table: str | None) -> None:
        self._call("commit", label, table, lambda: self.server.commit(label, table))

    def rollback(self, label: str, table: str | None) -> None:
        self._call("rollback", label, table, lambda: self.server.rollback(label, table))

    def cancel(self, label: str, table: str) -> None:
        self._call("rollback", label, table, lambda: self.server.cancel(label, table))

    def get_load_state(self, label: str) -> LoadState:
        state: LoadState = self._call(
            "get_load_state", label, None, lambda: self.server.get_load_state(label)
        )
        return state


def load_job(api: ScriptedApi, rows: Mapping[str, list[Any]]) -> LoadJob:
    """The executors' side: one load per table through ``api``; errors become reports.

    A table without rows sends nothing and reports nothing, as ``PartitionLoader`` does for
    an empty Spark partition.
    """

    def run(labels: Mapping[str, str], multi: bool) -> Sequence[LoadReport]:
        reports = []
        for table, label in labels.items():
            if not rows.get(table):
                continue
            body = json.dumps(rows[table]).encode()
            try:
                api.load(label, table, body, multi=multi)
            except StarRocksError as e:
                failure = LoadFailure(
                    type(e).__name__,
                    str(e),
                    transient=_transient(e),
                    error_url=str(e.context.get("error_url") or ""),
                )
                reports.append(LoadReport(table, failure=failure))
                continue
            reports.append(LoadReport(table, rows=len(rows.get(table, [])), requests=1))
        return reports

    return run


def _transient(error: StarRocksError) -> bool:
    from common.errors import Transient

    return isinstance(error, Transient)
