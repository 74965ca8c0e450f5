"""The transaction state machines of spec §4.2 (single-table) and §4.3 (multi-table).

One :class:`TxnManager` plays both the FE (label registry, txn status, timeouts, multi-table
tasks) and the BE (stream-load contexts holding the rows of a running load channel). Every
public ``fe_*``/``be_*`` method returns a :class:`Reply` shaped exactly as the node that answers
on a real cluster (spec §3), or a redirect the HTTP layer turns into a 307.

Locking: a channel lock (one per BE load context) is taken *before* the manager lock, never
after, and only with ``acquire(blocking=False)`` on request paths, which is how the real BE
produces ``TXN_IN_PROCESSING``. The manager lock guards status transitions only; parsing and
SQLite writes run outside it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from devstack.starrocks.catalog import TableSchema
from devstack.starrocks.loadformat import LoadPlan, LoadPlanError, plan_key
from devstack.starrocks.storage import OpRow, Storage, TableRows

log = logging.getLogger(__name__)

EXC = "class com.starrocks.common.StarRocksException: "

# Single-table FE statuses.
PREPARE, PREPARED, COMMITTED, VISIBLE, ABORTED = (
    "PREPARE",
    "PREPARED",
    "COMMITTED",
    "VISIBLE",
    "ABORTED",
)
# Multi-table task states (spelling as in StreamLoadMultiStmtTask).
BEGIN, COMMITING, COMMITED, ABORTING, CANCELLED = (
    "BEGIN",
    "COMMITING",
    "COMMITED",
    "ABORTING",
    "CANCELLED",
)
TIMEOUT_REASON = "timeout by txn manager"
RESTART_REASON = "cancelled after FE restart"
SINGLE_DEFAULT_TIMEOUT_S = 600.0
MULTI_DEFAULT_TIMEOUT_S = 20.0
PREPARED_DEFAULT_TIMEOUT_S = 86400.0
PUBLISH_DELAY_S = 0.5
# When a multi-table label enters the FE transaction manager (what get_load_state reads):
# "commit" as 4.0 does (commitTxn -> loadData), "first_load" as the newest code does.
MULTI_REGISTRATION = ("commit", "first_load")


@dataclass
class Reply:
    """A response as one node would send it.

    ``style`` picks the JSON producer of spec §3.1: ``be`` (4-space), ``fe`` (2-space
    TransactionResult), ``rest`` (lower-case RestBaseResult).
    """

    body: dict[str, Any] = field(default_factory=dict)
    style: str = "be"
    http_status: int = 200
    redirect: bool = False
    drop: bool = False
    text: str | None = None


REDIRECT = Reply(redirect=True)


def be(status: str, message: str = "", **extra: Any) -> Reply:
    """A BE reply: Status, then Message, then the OK-only keys (spec §3.1 a)."""
    body: dict[str, Any] = {"Status": status}
    if status == "TXN_IN_PROCESSING" and "Label" in extra:
        body["Label"] = extra.pop("Label")
    if "ExistingJobStatus" in extra:
        body["ExistingJobStatus"] = extra.pop("ExistingJobStatus")
    body["Message"] = message
    body.update(extra)
    return Reply(body, "be")


def fe(status: str, message: str = "", **extra: Any) -> Reply:
    """An FE TransactionResult reply."""
    body: dict[str, Any] = {}
    if "Label" in extra:
        body["Label"] = extra.pop("Label")
    body["Status"] = status
    if "TxnId" in extra:
        body["TxnId"] = extra.pop("TxnId")
    body.update(extra)
    body["Message"] = message
    return Reply(body, "fe")


@dataclass
class Channel:
    """A BE load context for one (label, table): the buffered rows and counters."""

    schema: TableSchema
    plan: LoadPlan | None = None
    rows: list[OpRow] = field(default_factory=list)
    total: int = 0
    filtered: int = 0
    unselected: int = 0
    load_bytes: int = 0
    loads: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Txn:
    """One label's transaction (single-table) or multi-statement task (multi-table)."""

    txn_id: int
    label: str
    db: str
    multi: bool
    status: str
    table: str | None
    timeout_s: float
    created: float
    idle_timeout_s: float | None = None
    prepared_timeout_s: float | None = None
    prepared_at: float | None = None
    finished_at: float | None = None
    visible_at: float | None = None
    last_activity: float = 0.0
    reason: str = ""
    be_alive: bool = False
    busy: bool = False
    # Multi-table: whether the label is in the FE transaction manager yet. BEGIN registers
    # nothing there (StreamLoadMultiStmtTask.beginTxn -> TransactionStmtExecutor.beginStmt);
    # 4.0 registers at commit (loadData), the newest code at the first load (spec §4.3a).
    registered: bool = False
    # Multi-table, committed: the FE came back from its journal, which holds only the task's
    # creation, so the task is CANCELLED (StreamLoadMgr.cancelUnDurableTaskAfterRestart)
    # while the transaction manager keeps the label VISIBLE (:attr:`task_status`).
    replayed_cancelled: bool = False
    channels: dict[str, Channel] = field(default_factory=dict)
    # Rows each table's loads brought, as stored before a process restart (channels of a
    # committed label are not rebuilt).
    recovered_loaded_rows: dict[str, int] = field(default_factory=dict)

    @property
    def task_status(self) -> str:
        """The multi-table task's state, which begin, load, commit and rollback answer by."""
        return CANCELLED if self.replayed_cancelled else self.status

    @property
    def load_state(self) -> str:
        """What ``get_load_state`` answers: UNKNOWN for an unregistered multi-table label."""
        if self.multi and not self.registered:
            return "UNKNOWN"
        return self.fe_status

    @property
    def fe_status(self) -> str:
        """The label's status as an operator sees it (task state mapped to TransactionStatus)."""
        if not self.multi:
            return self.status
        if self.status == COMMITED:
            return VISIBLE if self.visible_at is None else COMMITTED
        if self.status in (CANCELLED, ABORTING):
            return ABORTED
        return PREPARE

    def meta(self) -> dict[str, Any]:
        """The durable part, stored on every state change."""
        return {
            "txn_id": self.txn_id,
            "label": self.label,
            "db": self.db,
            "multi": self.multi,
            "status": self.status,
            "table": self.table,
            "tables": sorted(self.channels),
            "timeout_s": self.timeout_s,
            "created": self.created,
            "idle_timeout_s": self.idle_timeout_s,
            "prepared_timeout_s": self.prepared_timeout_s,
            "prepared_at": self.prepared_at,
            "finished_at": self.finished_at,
            "reason": self.reason,
            "be_alive": self.be_alive,
            "registered": self.registered,
            "rows": {t: len(c.rows) for t, c in self.channels.items()},
            # NumberLoadedRows summed over the label's loads, kept after the commit.
            "loaded_rows": {
                **self.recovered_loaded_rows,
                **{t: c.total - c.filtered - c.unselected for t, c in self.channels.items()},
            },
        }


def _stats(txn: Txn, ch: Channel, started: float) -> dict[str, Any]:
    return {
        "Label": txn.label,
        "TxnId": txn.txn_id,
        "NumberTotalRows": ch.total,
        "NumberLoadedRows": ch.total - ch.filtered - ch.unselected,
        "NumberFilteredRows": ch.filtered,
        "NumberUnselectedRows": ch.unselected,
        "LoadBytes": ch.load_bytes,
        "LoadTimeMs": int((time.time() - txn.created) * 1000),
        "StreamLoadPlanTimeMs": 1,
        "ReceivedDataTimeMs": 0,
        "WriteDataTimeMs": int((time.time() - started) * 1000),
        "CommitAndPublishTimeMs": 0,
    }


#: ``ErrorCode.ERR_NO_PARTITIONS_HAVE_DATA_LOAD``: a multi-table sub-task that loaded no row.
NO_ROWS_LOADED = (
    "No partitions have data available for loading. If you are sure there may be no data to be "
    "loaded, you can use `ADMIN SET FRONTEND CONFIG ('empty_load_as_error' = 'false')` to "
    "ensure such load jobs can succeed"
)


def _too_filtered(ch: Channel) -> bool:
    """Spec §5: filtered / (total - unselected) > max_filter_ratio."""
    denom = ch.total - ch.unselected
    ratio = ch.plan.max_filter_ratio if ch.plan is not None else 0.0
    return denom > 0 and ch.filtered / denom > ratio


def _parse_seconds(value: str | None, default: float | None) -> float | None:
    """Parse a seconds header; raises ValueError on junk (the caller picks the message)."""
    if value is None or value.strip() == "":
        return default
    return float(int(value.strip()))


class TxnManager:
    """FE + BE transaction logic over one :class:`Storage`."""

    def __init__(
        self,
        storage: Storage,
        *,
        be_address: str,
        max_running_txns: int = 100,
        label_keep_s: float = 3 * 86400.0,
        multi_registration: str = "commit",
        publish_gap_s: float = 0.0,
    ) -> None:
        if multi_registration not in MULTI_REGISTRATION:
            msg = f"multi_registration must be one of {MULTI_REGISTRATION}"
            raise ValueError(msg)
        self.multi_registration = multi_registration
        self.publish_gap_s = publish_gap_s
        self.storage = storage
        self.be_address = be_address
        self.max_running_txns = max_running_txns
        self.label_keep_s = label_keep_s
        self.lock = threading.RLock()
        self.by_label: dict[tuple[str, str], list[Txn]] = {}
        # Each retained label's databases, in by_label's order: a multi-table begin looks its
        # label up in every database (StreamLoadMgr's map by label), and a soak retains days
        # of labels.
        self._label_dbs: dict[str, list[str]] = {}
        self.by_id: dict[int, Txn] = {}
        self.error_logs: dict[str, str] = {}
        # Txns the checker must look at (not final, or final but not yet VISIBLE); scanning
        # only these keeps a 0.2 s checker cheap when thousands of labels are retained.
        self._active: dict[int, Txn] = {}
        self._last_sweep = 0.0
        self._next_id = 1000
        self._recover()

    # -- recovery / restart ----------------------------------------------------------------

    def _recover(self) -> None:
        """Rebuild the FE state from the data dir, as a restarted FE replays its edit log."""
        for meta, rows in self.storage.load_txns():
            txn = Txn(
                txn_id=meta["txn_id"],
                label=meta["label"],
                db=meta["db"],
                multi=meta["multi"],
                status=meta["status"],
                table=meta["table"],
                timeout_s=meta["timeout_s"],
                created=meta["created"],
                idle_timeout_s=meta["idle_timeout_s"],
                prepared_timeout_s=meta["prepared_timeout_s"],
                prepared_at=meta["prepared_at"],
                finished_at=meta["finished_at"],
                reason=meta["reason"],
                registered=bool(meta.get("registered", False)),
                recovered_loaded_rows=dict(meta.get("loaded_rows", {})),
            )
            for (db, tbl), table_rows in rows.items():
                schema = self.storage.tables.get((db, tbl))
                if schema is not None:
                    txn.channels[tbl] = Channel(schema, rows=list(table_rows))
                    txn.channels[tbl].total = len(table_rows)
            self._next_id = max(self._next_id, txn.txn_id + 1)
            self._remember(txn)
            if txn.multi and txn.status in (BEGIN, COMMITING, ABORTING):
                self._finish(txn, CANCELLED, RESTART_REASON)
            elif txn.multi and txn.status == COMMITED:
                txn.replayed_cancelled = True  # a replayed edit log, as restart(journal=True)
            elif txn.status == COMMITTED:
                txn.status = VISIBLE
                self.storage.save_txn(txn.meta())

    def restart(self, journal: bool = False) -> None:
        """FE + BE restart: BE contexts vanish, running multi-table tasks are cancelled.

        Single-table txns keep their FE status (PREPARE ones then time out, PREPARED ones can
        still be committed from their persisted rows), as on a real cluster.

        ``journal``: the FE replays its journal with no image since the multi-table tasks
        committed, so committed tasks come back CANCELLED too (:attr:`Txn.replayed_cancelled`);
        without it they come back as an image holds them, COMMITED.
        """
        with self.lock:
            for txn in list(self.by_id.values()):
                if txn.multi and txn.status in (BEGIN, ABORTING):
                    self._finish(txn, CANCELLED, RESTART_REASON)
                elif journal and txn.multi and txn.status == COMMITED:
                    txn.replayed_cancelled = True
                elif not txn.multi and txn.status == PREPARE and txn.be_alive:
                    txn.be_alive = False
                    txn.channels.clear()
                    self.storage.save_txn(txn.meta())

    # -- helpers ---------------------------------------------------------------------------

    def _multi_task_anywhere(self, label: str) -> Txn | None:
        """A retained multi-table task with ``label`` in any database (StreamLoadMgr)."""
        for db in self._label_dbs.get(label, ()):
            hist = self.by_label.get((db, label))
            if hist and hist[-1].multi:
                return hist[-1]
        return None

    def fe_cancel(self, db: str, table: str, label: str) -> Reply:
        """``POST /api/{db}/{table}/_cancel?label=``: the FE aborts a single-table label.

        The fallback of the Flink connector's lingering-transaction aborter for a PREPARE
        label whose BE context is gone (rollback would answer TXN_NOT_EXISTS, spec §2.5).
        Answer shape: RestBaseResult (the connector reads ``status``/``msg``; the server
        side is not confirmed in the spec).
        """
        if not label:
            return rest_fail("No label selected.")
        if db not in self.storage.databases:
            return rest_fail(f"unknown database, database={db}")
        with self.lock:
            txn = self._latest(db, label)
            if txn is None or txn.multi:
                return rest_fail(f"No transaction found with db[{db}] and label[{label}]")
            if txn.status in (COMMITTED, VISIBLE):
                return rest_fail(
                    f"Can not abort {txn.status} transaction {txn.txn_id}, label is {label}"
                )
            if txn.status == PREPARED:
                # DatabaseTransactionMgr.abortTransaction(label) finds PREPARE ones only; the
                # action answers its TransactionNotFoundException as a failure.
                return rest_fail(f"running transaction not found, label={label}")
            if txn.status == PREPARE:
                self._finish(txn, ABORTED, "user cancel")
                txn.channels.clear()
        return Reply({"status": "OK", "code": "0", "msg": "Success", "message": "OK"}, "rest")

    def _latest(self, db: str, label: str) -> Txn | None:
        hist = self.by_label.get((db, label))
        return hist[-1] if hist else None

    def _new_txn(self, db: str, label: str, multi: bool, table: str | None, timeout: float) -> Txn:
        now = time.time()
        txn = Txn(
            txn_id=self._next_id,
            label=label,
            db=db,
            multi=multi,
            status=BEGIN if multi else PREPARE,
            table=table,
            timeout_s=timeout,
            created=now,
            last_activity=now,
            be_alive=not multi,
        )
        self._next_id += 1
        self._remember(txn)
        return txn

    def _remember(self, txn: Txn) -> None:
        """Index a new or recovered txn by id and by label."""
        self.by_id[txn.txn_id] = txn
        hist = self.by_label.setdefault((txn.db, txn.label), [])
        if not hist:
            self._label_dbs.setdefault(txn.label, []).append(txn.db)
        hist.append(txn)
        self._track(txn)

    def _forget(self, txn_id: int) -> None:
        """Drop an expired txn from the indexes (its label goes with its last txn)."""
        txn = self.by_id.pop(txn_id)
        key = (txn.db, txn.label)
        hist = self.by_label.get(key, [])
        if txn in hist:
            hist.remove(txn)
        if not hist:
            self.by_label.pop(key, None)
            dbs = self._label_dbs.get(txn.label, [])
            if txn.db in dbs:
                dbs.remove(txn.db)
            if not dbs:
                self._label_dbs.pop(txn.label, None)

    def _track(self, txn: Txn) -> None:
        if txn.status in (PREPARE, PREPARED, BEGIN, COMMITING, ABORTING) or txn.visible_at:
            self._active[txn.txn_id] = txn
        else:
            self._active.pop(txn.txn_id, None)

    def _running(self, db: str) -> int:
        return sum(
            1
            for t in self._active.values()
            if t.db == db and t.status in (PREPARE, PREPARED, BEGIN, COMMITING)
        )

    def _limit_message(self, db: str, forced: bool) -> str | None:
        n = self._running(db)
        if forced or n >= self.max_running_txns:
            db_id = self.storage.databases.get(db, -1)
            shown = max(n, self.max_running_txns) if forced else n
            return (
                f"current running txns on db {db_id} is {shown}, "
                f"larger than limit {self.max_running_txns}"
            )
        return None

    def _finish(self, txn: Txn, status: str, reason: str = "") -> None:
        """Move to a final status (caller holds the lock) and persist it."""
        txn.status = status
        txn.reason = reason
        txn.finished_at = time.time()
        txn.be_alive = False
        if status in (ABORTED, CANCELLED):
            txn.channels.clear()
        self._track(txn)
        self.storage.save_txn(txn.meta())

    def _error_url(self, txn: Txn, ch: Channel) -> str:
        key = f"{txn.txn_id}_{ch.schema.name}"
        if len(self.error_logs) >= 1000:
            self.error_logs.pop(next(iter(self.error_logs)))
        self.error_logs[key] = "\n".join(ch.errors) + "\n"
        return f"http://{self.be_address}/api/_load_error_log?file=error_log_{key}"

    def _check_labels(self, db: str, label: str) -> Reply | None:
        """Single-table label rule: reusable only when every earlier txn is ABORTED."""
        txn = self._latest(db, label)
        if txn is None or txn.fe_status == ABORTED:
            return None
        if txn.be_alive:
            return be("LABEL_ALREADY_EXISTS", "", ExistingJobStatus="")
        existing = "FINISHED" if txn.fe_status in (COMMITTED, VISIBLE) else "RUNNING"
        return be(
            "LABEL_ALREADY_EXISTS",
            f"Label [{label}] has already been used.",
            ExistingJobStatus=existing,
        )

    # -- FE routing ------------------------------------------------------------------------

    def fe_answers(self, op: str, h: Mapping[str, str]) -> bool:
        """Whether the FE answers ``op`` itself (True) or 307s it to the BE (False)."""
        if is_multi(h):
            if op != "load":
                return True
            db, label, table = h.get("db", ""), h.get("label", ""), h.get("table", "")
            with self.lock:
                txn = self._latest(db, label)
                return not (
                    txn is not None
                    and txn.multi
                    and txn.status == BEGIN
                    and self.storage.tables.get((db, table)) is not None
                )
        if op == "begin":
            return not h.get("label", "").strip() or not h.get("db", "").strip()
        with self.lock:
            txn = self._latest(h.get("db", ""), h.get("label", ""))
            if txn is None or txn.multi:
                return True
            if op in ("load", "prepare"):
                return False
            return txn.status != PREPARE

    def _fe_common(self, h: Mapping[str, str]) -> Reply | None:
        # TransactionLoadAction.toTxnOperationParams checks db first, then label.
        if not h.get("db", "").strip():
            return fe("FAILED", EXC + "No database selected.")
        if not h.get("label", "").strip():
            return fe("FAILED", EXC + "Empty label.")
        return None

    # -- FE operations -----------------------------------------------------------------------

    def fe_begin(self, h: Mapping[str, str], *, too_many: bool = False) -> Reply:
        """FE begin: multi-table tasks are created here; single-table begins are 307ed."""
        err = self._fe_common(h)
        if err is not None:
            return err
        if not is_multi(h):
            return REDIRECT
        db, label = h["db"], h["label"]
        if db not in self.storage.databases:
            return fe("FAILED", EXC + f"Database[{db}] does not exist")
        try:
            timeout = _parse_seconds(h.get("timeout"), MULTI_DEFAULT_TIMEOUT_S)
        except ValueError:
            return fe("FAILED", EXC + f"Invalid timeout: {h.get('timeout')}")
        with self.lock:
            # StreamLoadMgr keys multi-table tasks by label alone: a task of another database
            # blocks the label here too.
            txn = self._latest(db, label) or self._multi_task_anywhere(label)
            if txn is not None and txn.multi:
                if txn.task_status == COMMITED:
                    return fe(
                        "LABEL_ALREADY_EXISTS",
                        f"Label [{label}] has already been used.",
                        ExistingJobStatus=COMMITED,
                    )
                return fe(
                    "LABEL_ALREADY_EXISTS",
                    f"Transaction already started with label [{label}], txnId: {txn.txn_id}",
                    ExistingJobStatus=txn.task_status,
                    TxnId=txn.txn_id,
                )
            if txn is not None and txn.status != ABORTED:
                return fe(
                    "LABEL_ALREADY_EXISTS",
                    f"Label [{label}] has already been used.",
                    ExistingJobStatus=txn.status,
                    Db=db,
                )
            limit = self._limit_message(db, too_many)
            if limit is not None:
                return fe("FAILED", EXC + limit)
            txn = self._new_txn(db, label, True, None, timeout or MULTI_DEFAULT_TIMEOUT_S)
            self.storage.save_txn(txn.meta())
        return Reply({"Status": "OK", "Message": ""}, "fe")

    def fe_load(self, h: Mapping[str, str]) -> Reply:
        """FE load: single-table 307s to the label's BE; multi-table plans the channel first."""
        err = self._fe_common(h)
        if err is not None:
            return err
        db, label, table = h["db"], h["label"], h.get("table", "")
        with self.lock:
            txn = self._latest(db, label)
            if not is_multi(h):
                if txn is None or txn.multi:
                    return fe(
                        "FAILED",
                        EXC + f"Can't find the transaction with db [{db}] and label[{label}]. "
                        "The possible reasons: 1. FE leader is started or switched; "
                        "2. The transaction timeouts and is cleaned.",
                    )
                return REDIRECT
            if txn is None or not txn.multi:
                return fe("FAILED", EXC + f"stream load task {label} does not exist")
            if txn.task_status in (COMMITED, COMMITING):
                return fe("FAILED", EXC + f"stream load task {label} has already been commited")
            if txn.task_status == CANCELLED:
                reason = RESTART_REASON if txn.replayed_cancelled else txn.reason
                return fe(
                    "FAILED",
                    EXC + f"stream load task {label} has already been cancelled: {reason}",
                )
            if txn.task_status == ABORTING:
                return fe("FAILED", EXC + f"stream load task {label} is aborting: {txn.reason}")
            schema = self.storage.tables.get((db, table))
            if schema is None:
                msg = f"Failed to find table {table} in db {db}"
                self._finish(txn, CANCELLED, msg)
                return fe("FAILED", EXC + msg)
            if table not in txn.channels:
                try:
                    plan = LoadPlan(schema, h)
                except LoadPlanError as e:
                    self._finish(txn, CANCELLED, e.message)
                    return fe("FAILED", EXC + e.message)
                txn.channels[table] = Channel(schema, plan)
            if self.multi_registration == "first_load" and not txn.registered:
                txn.registered = True
                self.storage.save_txn(txn.meta())
        return REDIRECT

    def fe_prepare(self, h: Mapping[str, str]) -> Reply:
        """FE prepare: unsupported for multi-table; single-table 307s while the label exists."""
        err = self._fe_common(h)
        if err is not None:
            return err
        if is_multi(h):
            return fe("FAILED", EXC + "Unsupported operation: TXN_PREPARE")
        with self.lock:
            txn = self._latest(h["db"], h["label"])
            if txn is None or txn.multi:
                return fe(
                    "FAILED",
                    EXC + f"No transaction found with db[{h['db']}] and label[{h['label']}]",
                )
        return REDIRECT

    def fe_commit(
        self,
        h: Mapping[str, str],
        *,
        publish_timeout: bool = False,
        ok_but_failed: bool = False,
        failed: str | None = None,
    ) -> Reply:
        """FE commit: answers PREPARED/COMMITTED/VISIBLE/ABORTED itself, 307s PREPARE.

        ``failed``: the commit fails with this message (a database write-lock timeout, say):
        a multi-table task rolls back, a single-table transaction is left as it was.
        """
        err = self._fe_common(h)
        if err is not None:
            return err
        if is_multi(h):
            return self._multi_commit(h, publish_timeout, ok_but_failed, failed)
        if failed is not None:
            return fe("FAILED", failed)
        db, label = h["db"], h["label"]
        with self.lock:
            txn = self._latest(db, label)
            if txn is None or txn.multi:
                return fe("FAILED", EXC + f"No transaction found with db[{db}] and label[{label}]")
            if txn.status == PREPARE:
                return REDIRECT
            if txn.status in (COMMITTED, VISIBLE):
                return fe(
                    "OK",
                    f"Transaction {txn.txn_id} has already committed, label is {label}",
                    TxnId=txn.txn_id,
                    Label=label,
                )
            if txn.status == ABORTED:
                return fe(
                    "FAILED",
                    EXC + f"Can not commit ABORTED transaction {txn.txn_id}, label is {label}",
                )
            if txn.busy:
                return fe(
                    "FAILED",
                    EXC + f"Transaction {txn.txn_id} is already committing, label is {label}",
                )
            txn.busy = True
            changes: list[TableRows] = [(c.schema, c.rows) for c in txn.channels.values()]
        try:
            self._apply_commit(txn, changes, publish_timeout)
        finally:
            txn.busy = False
        if publish_timeout:
            return fe("FAILED", EXC + f"publish timeout: {_publish_ms(h)}")
        return fe("OK", "", TxnId=txn.txn_id, Label=label)

    def fe_rollback(self, h: Mapping[str, str]) -> Reply:
        """FE rollback: answers PREPARED/COMMITTED/VISIBLE/ABORTED itself, 307s PREPARE."""
        err = self._fe_common(h)
        if err is not None:
            return err
        if is_multi(h):
            return self._multi_rollback(h)
        db, label = h["db"], h["label"]
        with self.lock:
            txn = self._latest(db, label)
            if txn is None or txn.multi:
                return fe("FAILED", EXC + f"No transaction found with db[{db}] and label[{label}]")
            if txn.status == PREPARE:
                return REDIRECT
            if txn.status == ABORTED:
                return fe(
                    "OK",
                    f"Transaction {txn.txn_id} has already aborted, label is {label}",
                    TxnId=txn.txn_id,
                    Label=label,
                )
            if txn.status in (COMMITTED, VISIBLE) or txn.busy:
                return fe(
                    "FAILED",
                    EXC + f"Can not abort {txn.status} transaction {txn.txn_id}, label is {label}",
                )
            self._finish(txn, ABORTED, "user rollback")
            return fe("OK", "", TxnId=txn.txn_id, Label=label)

    def get_load_state(self, db: str, label: str) -> Reply:
        """``GET /api/{db}/get_load_state?label=`` (RestBaseResult + state)."""
        if not db:
            return rest_fail("No database selected.")
        if not label:
            return rest_fail("No label selected.")
        if db not in self.storage.databases:
            return rest_fail(f"unknown database, database={db}")
        with self.lock:
            txn = self._latest(db, label)
            state = "UNKNOWN" if txn is None else txn.load_state
            reason = "" if txn is None else txn.reason
        body = {"state": state, "status": "OK", "code": "0", "msg": "Success", "message": "OK"}
        if reason:
            body["reason"] = reason
        return Reply(body, "rest")

    # -- multi-table -------------------------------------------------------------------------

    def _multi_commit(
        self,
        h: Mapping[str, str],
        publish_timeout: bool,
        ok_but_failed: bool = False,
        failed: str | None = None,
    ) -> Reply:
        """Multi-table commit (``StreamLoadMultiStmtTask.commitTxn``).

        ``publish_timeout``: the publish wait runs out; the answer is still OK, with the
        label COMMITTED until it turns VISIBLE (the commit itself succeeded).
        ``ok_but_failed``: some 4.0.x builds, where ``commitStmt`` failed, only
        ``commitErrorMsg`` was set, the task rolled back, and the answer still said OK.
        ``failed``: ``commitStmt`` failed with this message; the task rolls back (ABORTING,
        then CANCELLED) and the answer is that error.
        """
        db, label = h["db"], h["label"]
        with self.lock:
            txn = self._latest(db, label)
            if txn is None or not txn.multi:
                return fe("FAILED", EXC + f"stream load task {label} does not exist")
            state_reply = self._multi_commit_state(txn)
            if state_reply is not None:
                return state_reply
            channels = dict(txn.channels)
        locks = [c.lock for c in channels.values()]
        acquired: list[threading.Lock] = []
        try:
            for lk in locks:
                # A load still streaming into a channel finishes first (bounded wait).
                if not lk.acquire(timeout=30):
                    return fe("FAILED", EXC + f"Transaction {txn.txn_id} is busy, label is {label}")
                acquired.append(lk)
            with self.lock:
                state_reply = self._multi_commit_state(txn)
                if state_reply is not None:
                    return state_reply
                for table, ch in channels.items():
                    if ch.total and not ch.total - ch.filtered - ch.unselected:
                        # waitCoordFinish: no row loaded fails before the filter ratio is
                        # read (StreamLoadTask, ERR_NO_PARTITIONS_HAVE_DATA_LOAD; later
                        # builds ERR_NO_ROWS_IMPORTED), whatever max_filter_ratio says.
                        msg = (
                            f"Failed to load table {table}, error: label: {label}, error_msg: "
                            f"cancel stream task for exception: {NO_ROWS_LOADED}"
                        )
                    elif _too_filtered(ch):
                        url = self._error_url(txn, ch)
                        msg = (
                            f"Failed to load table {table}, error: abnormal data more than max "
                            f"filter rate, tracking_url: {url}"
                        )
                    else:
                        continue
                    # commitTxn's loadData registered the tables before this one.
                    txn.registered = True
                    self._finish(txn, CANCELLED, msg)
                    return fe("FAILED", EXC + msg)
                if channels and not txn.registered:
                    txn.registered = True  # loadData registers the label in the txn manager
                if ok_but_failed:
                    self._finish(txn, CANCELLED, "commit failed: injected commitStmt error")
                    return fe("OK", "", Label=label, TxnId=txn.txn_id)
                if failed is not None:
                    self._finish(txn, CANCELLED, f"commit failed: {failed}")
                    return fe("FAILED", failed)
                txn.status = COMMITING
                changes: list[TableRows] = [(c.schema, c.rows) for c in channels.values()]
            try:
                self._apply_commit(txn, changes, publish_timeout, final=COMMITED)
            except Exception as e:
                log.exception("multi-table commit failed label=%s", label)
                with self.lock:
                    self._finish(txn, CANCELLED, str(e))
                return fe("FAILED", EXC + f"commit failed: {e}")
        finally:
            for lk in acquired:
                lk.release()
        if channels:
            return fe(
                "OK", "", Label=label, TxnId=txn.txn_id, ChannelId=0, **{"Prepared Channel Num": 1}
            )
        return fe("OK", "", Label=label, TxnId=txn.txn_id)

    def _multi_commit_state(self, txn: Txn) -> Reply | None:
        label, n = txn.label, txn.txn_id
        if txn.task_status == COMMITED:
            return fe(
                "OK",
                f"Transaction {n} has already committed, label is {label}",
                TxnId=n,
                Label=label,
            )
        if txn.task_status == CANCELLED:
            return fe("FAILED", f"Can not commit CANCELLED transaction {n}, label is {label}")
        if txn.task_status == ABORTING:
            return fe(
                "FAILED", f"Transaction {n} is aborting (reason: {txn.reason}), label is {label}"
            )
        if txn.task_status == COMMITING:
            return fe("FAILED", f"Transaction {n} is already committing, label is {label}")
        return None

    def _multi_rollback(self, h: Mapping[str, str]) -> Reply:
        db, label = h["db"], h["label"]
        with self.lock:
            txn = self._latest(db, label)
            if txn is None or not txn.multi:
                return fe("FAILED", EXC + f"stream load task{label}does not exist")
            n = txn.txn_id
            if txn.task_status == COMMITED:
                return fe("FAILED", f"Can not abort VISIBLE transaction {n}, label is {label}")
            if txn.task_status == COMMITING:
                return fe(
                    "FAILED", f"Can not abort transaction {n} during committing, label is {label}"
                )
            if txn.task_status == ABORTING:
                return fe(
                    "OK",
                    f"Transaction {n} abort is already in progress, label is {label}. "
                    "Background retry will continue.",
                )
            if txn.task_status == CANCELLED:
                return fe("OK", f"Transaction {n} has already aborted, label is {label}")
            self._finish(txn, CANCELLED, "user cancelled")
            return fe("OK", f"stream load {label} abort")

    # -- commit application ------------------------------------------------------------------

    def _apply_commit(
        self, txn: Txn, changes: list[TableRows], publish_timeout: bool, final: str = VISIBLE
    ) -> None:
        """Apply all tables' rows in one SQLite transaction together with the final status.

        The in-memory status flips only after the SQLite commit, so ``get_load_state`` never
        reports VISIBLE before a reader can see the rows.
        """
        now = time.time()
        status = COMMITTED if (publish_timeout and not txn.multi) else final
        meta = txn.meta()
        meta.update(status=status, finished_at=now, be_alive=False)
        self.storage.commit_rows(changes, meta)
        with self.lock:
            txn.status = status
            if publish_timeout:
                txn.visible_at = now + PUBLISH_DELAY_S
            else:
                # A real commit is COMMITTED until the publish finishes: an optional gap.
                txn.visible_at = now + self.publish_gap_s if self.publish_gap_s > 0 else None
            txn.finished_at = now
            txn.be_alive = False
            for ch in txn.channels.values():
                ch.rows = []
            self._track(txn)

    # -- BE operations -----------------------------------------------------------------------

    def be_begin(self, h: Mapping[str, str], *, authorized: bool, too_many: bool = False) -> Reply:
        """BE begin of a single-table txn (the FE 307s it here)."""
        if h.get("transaction_type") is not None:
            return be(
                "INVALID_ARGUMENT",
                "Multi-statement transaction requests can only be sent to FE nodes, not BE nodes",
            )
        label, db, table = h.get("label", ""), h.get("db", ""), h.get("table", "")
        if not label:
            return be("INVALID_ARGUMENT", "empty label")
        if not authorized:
            return be("INTERNAL_ERROR", "no valid Basic authorization")
        try:
            timeout = _parse_seconds(h.get("timeout"), SINGLE_DEFAULT_TIMEOUT_S)
            idle = _parse_seconds(h.get("idle_transaction_timeout"), None)
        except ValueError:
            return be("INVALID_ARGUMENT", "Invalid timeout format")
        with self.lock:
            existing = self._check_labels(db, label)
            if existing is not None:
                return existing
            if db not in self.storage.databases:
                return be("ANALYSIS_ERROR", f"Database[{db}] does not exist.")
            schema = self.storage.tables.get((db, table))
            if schema is None:
                return be("ANALYSIS_ERROR", f'unknown table "{db}.{table}"')
            limit = self._limit_message(db, too_many)
            if limit is not None:
                return be("ANALYSIS_ERROR", limit)
            txn = self._new_txn(db, label, False, table, timeout or SINGLE_DEFAULT_TIMEOUT_S)
            txn.idle_timeout_s = idle
            txn.channels[table] = Channel(schema)
            self.storage.save_txn(txn.meta())
        return be("OK", "", Label=label, TxnId=txn.txn_id, BeginTxnTimeMs=0)

    def _be_context(self, h: Mapping[str, str]) -> tuple[Txn, Channel] | None:
        """The running BE context for the request, if the BE holds one."""
        db, label = h.get("db", ""), h.get("label", "")
        with self.lock:
            txn = self._latest(db, label)
            if txn is None:
                return None
            if txn.multi:
                if txn.status != BEGIN or not is_multi(h):
                    return None
                ch = txn.channels.get(h.get("table", ""))
                return None if ch is None else (txn, ch)
            if not txn.be_alive or txn.status != PREPARE or is_multi(h):
                return None
            return txn, next(iter(txn.channels.values()))

    def be_load(self, h: Mapping[str, str], body: bytes, *, delay_s: float = 0.0) -> Reply:
        """BE load into the running context of (label[, table])."""
        label = h.get("label", "")
        ctx = self._be_context(h)
        if ctx is None:
            return be("TXN_NOT_EXISTS", f"Transaction with label {label} not exists")
        txn, ch = ctx
        if h.get("db", "") != txn.db:
            return be(
                "INVALID_ARGUMENT",
                f"Request database {h.get('db', '')} not equal transaction database {txn.db}",
            )
        if not txn.multi and h.get("table", "") != txn.table:
            return be(
                "INVALID_ARGUMENT",
                f"Request table {h.get('table', '')} not equal transaction table {txn.table}",
            )
        if not ch.lock.acquire(blocking=False):
            return _in_processing(label)
        try:
            if delay_s:
                time.sleep(delay_s)
            if txn.status not in (PREPARE, BEGIN) or (not txn.multi and not txn.be_alive):
                return be("ABORTED", "The load is timeout, and will be aborted")
            if ch.plan is None:
                try:
                    ch.plan = LoadPlan(ch.schema, h)
                except LoadPlanError as e:
                    self._abort_on_error(txn, e.message)
                    return be(e.status, e.message)
            elif plan_key(h) != ch.plan.key:
                self._abort_on_error(txn, "load request not equal last.")
                return be("INTERNAL_ERROR", "load request not equal last.")
            res = ch.plan.parse(body)
            ch.rows.extend(res.rows)
            ch.total += res.total
            ch.filtered += res.filtered
            ch.unselected += res.unselected
            ch.load_bytes += len(body)
            ch.loads += 1
            if len(ch.errors) < 1000:
                ch.errors.extend(res.errors)
            txn.last_activity = time.time()
            return be(
                "OK",
                "",
                Label=label,
                TxnId=txn.txn_id,
                LoadBytes=len(body),
                StreamLoadPlanTimeMs=0,
                ReceivedDataTimeMs=0,
            )
        finally:
            ch.lock.release()

    def _abort_on_error(self, txn: Txn, reason: str) -> None:
        with self.lock:
            if txn.multi:
                if txn.status == BEGIN:
                    self._finish(txn, CANCELLED, reason)
            elif txn.status == PREPARE:
                self._finish(txn, ABORTED, reason)

    def be_finish(
        self,
        op: str,
        h: Mapping[str, str],
        *,
        delay_s: float = 0.0,
        publish_timeout: bool = False,
    ) -> Reply:
        """BE prepare / commit (implicit prepare) / rollback of a running single-table txn."""
        if h.get("transaction_type") is not None:
            return be(
                "INVALID_ARGUMENT",
                "Multi-statement transaction requests can only be sent to FE nodes, not BE nodes",
            )
        label = h.get("label", "")
        if not label:
            return be("INVALID_ARGUMENT", "empty label")
        prepared_timeout = PREPARED_DEFAULT_TIMEOUT_S
        if op == "prepare" and h.get("prepared_timeout") is not None:
            raw = h["prepared_timeout"]
            if not raw.strip().isdigit() or int(raw) <= 0:
                return be("INVALID_ARGUMENT", f"Invalid prepared_timeout: {raw}")
            prepared_timeout = float(int(raw))
        ctx = self._be_context(h)
        if ctx is None:
            return be("TXN_NOT_EXISTS", f"transaction with label {label} not exists")
        txn, ch = ctx
        if h.get("db", "") != txn.db:
            return be(
                "INVALID_ARGUMENT",
                f"request db {h.get('db', '')} transaction db {txn.db} not match",
            )
        if not ch.lock.acquire(blocking=False):
            return _in_processing(label)
        try:
            if delay_s:
                time.sleep(delay_s)
            with self.lock:
                if txn.status != PREPARE or not txn.be_alive:
                    return be("TXN_NOT_EXISTS", f"transaction with label {label} not exists")
                if op == "rollback":
                    self._finish(txn, ABORTED, "user rollback")
                    return be("OK", "", Label=label)
                if ch.loads == 0:
                    msg = (
                        f"transaction id={uuid.uuid4()}, job_id=-1, txn_id: {txn.txn_id}, "
                        f"label={label}, db={txn.db} hasn't send any data yet"
                    )
                    self._finish(txn, ABORTED, msg)
                    return be("INTERNAL_ERROR", msg)
                if _too_filtered(ch):
                    url = self._error_url(txn, ch)
                    self._finish(txn, ABORTED, "too many filtered rows")
                    return be("INTERNAL_ERROR", "too many filtered rows", ErrorURL=url)
                txn.busy = True
            started = time.time()
            stats = _stats(txn, ch, started)
            if ch.filtered:
                stats["ErrorURL"] = self._error_url(txn, ch)
            try:
                if op == "prepare":
                    with self.lock:
                        txn.status = PREPARED
                        txn.prepared_at = time.time()
                        txn.prepared_timeout_s = prepared_timeout
                        txn.be_alive = False
                    self.storage.save_txn(txn.meta(), [(ch.schema, ch.rows)])
                    return be("OK", "", **stats)
                self._apply_commit(txn, [(ch.schema, ch.rows)], publish_timeout)
            finally:
                txn.busy = False
            if publish_timeout:
                return be(
                    "PUBLISH_TIMEOUT", "Publish timeout. The data will be visible after a while"
                )
            return be("OK", "", **stats)
        finally:
            ch.lock.release()

    # -- plain stream load -------------------------------------------------------------------

    def plain_stream_load(self, db: str, table: str, h: Mapping[str, str], body: bytes) -> Reply:
        """``PUT /api/{db}/{table}/_stream_load`` on the BE: begin + load + commit at once."""
        label = h.get("label") or f"emulator_{uuid.uuid4().hex}"
        started = time.time()
        base = {"TxnId": -1, "Label": label}
        with self.lock:
            txn = self._latest(db, label)
            if txn is not None and txn.fe_status != ABORTED:
                existing = "FINISHED" if txn.fe_status in (COMMITTED, VISIBLE) else "RUNNING"
                return Reply(
                    {
                        **base,
                        "Status": "Label Already Exists",
                        "ExistingJobStatus": existing,
                        "Message": f"Label [{label}] has already been used.",
                    }
                )
            schema = self.storage.tables.get((db, table))
            if schema is None:
                return Reply({**base, "Status": "Fail", "Message": f'unknown table "{db}.{table}"'})
            txn = self._new_txn(db, label, False, table, SINGLE_DEFAULT_TIMEOUT_S)
            ch = Channel(schema)
            txn.channels[table] = ch
        try:
            ch.plan = LoadPlan(schema, h)
        except LoadPlanError as e:
            with self.lock:
                self._finish(txn, ABORTED, e.message)
            return Reply({**base, "TxnId": txn.txn_id, "Status": "Fail", "Message": e.message})
        res = ch.plan.parse(body)
        ch.rows, ch.total, ch.filtered = res.rows, res.total, res.filtered
        ch.errors, ch.load_bytes = res.errors, len(body)
        out: dict[str, Any] = {"TxnId": txn.txn_id, "Label": label}
        if _too_filtered(ch):
            with self.lock:
                url = self._error_url(txn, ch)
                self._finish(txn, ABORTED, "too many filtered rows")
            out.update(Status="Fail", Message="too many filtered rows", ErrorURL=url)
            return Reply(out)
        self._apply_commit(txn, [(schema, ch.rows)], False)
        out.update(
            Status="Success",
            Message="OK",
            NumberTotalRows=res.total,
            NumberLoadedRows=res.total - res.filtered,
            NumberFilteredRows=res.filtered,
            NumberUnselectedRows=0,
            LoadBytes=len(body),
            LoadTimeMs=int((time.time() - started) * 1000),
            BeginTxnTimeMs=0,
            StreamLoadPlanTimeMs=0,
            ReadDataTimeMs=0,
            WriteDataTimeMs=0,
            CommitAndPublishTimeMs=0,
        )
        return Reply(out)

    # -- background checker ------------------------------------------------------------------

    def check_timeouts(self) -> None:
        """One pass of the FE txn-manager / BE context cleaner (spec §4.1, §4.3)."""
        now = time.time()
        expired: list[int] = []
        with self.lock:
            for txn in list(self._active.values()):
                if txn.busy:
                    continue
                if txn.status == PREPARE and now - txn.created > txn.timeout_s:
                    self._finish(txn, ABORTED, TIMEOUT_REASON)
                elif (
                    txn.status == PREPARE
                    and txn.be_alive
                    and txn.idle_timeout_s is not None
                    and now - txn.last_activity > txn.idle_timeout_s
                    and not any(c.lock.locked() for c in txn.channels.values())
                ):
                    self._finish(
                        txn,
                        ABORTED,
                        "transaction is aborted by idle timeout "
                        f"{int(txn.idle_timeout_s)} seconds.",
                    )
                elif (
                    txn.status == PREPARED
                    and txn.prepared_at is not None
                    and now - txn.prepared_at
                    > (txn.prepared_timeout_s or PREPARED_DEFAULT_TIMEOUT_S)
                ):
                    self._finish(txn, ABORTED, TIMEOUT_REASON)
                elif txn.status == BEGIN and now - txn.created > txn.timeout_s:
                    self._finish(txn, CANCELLED, TIMEOUT_REASON)
                elif txn.visible_at is not None and now >= txn.visible_at:
                    txn.visible_at = None
                    if txn.status == COMMITTED:
                        txn.status = VISIBLE
                    self._track(txn)
                    self.storage.save_txn(txn.meta())
            if now - self._last_sweep >= min(5.0, self.label_keep_s):
                self._last_sweep = now
                expired = [
                    t.txn_id
                    for t in self.by_id.values()
                    if t.txn_id not in self._active
                    and t.finished_at is not None
                    and now - t.finished_at > self.label_keep_s
                ]
            for txn_id in expired:
                self._forget(txn_id)
        if expired:
            self.storage.delete_txns(expired)

    def list_txns(self) -> list[dict[str, Any]]:
        """Every known txn (admin endpoint ``GET /_emulator/txns``)."""
        with self.lock:
            out = []
            for txn in self.by_id.values():
                m = txn.meta()
                m["state"] = txn.fe_status
                m["load_state"] = txn.load_state
                out.append(m)
            return out


def is_multi(h: Mapping[str, str]) -> bool:
    """``transaction_type: multi`` (case-insensitive) or ``source_type: 12`` (spec §2.1)."""
    return (h.get("transaction_type") or "").strip().lower() == "multi" or (
        h.get("source_type") or ""
    ).strip() == "12"


def rest_fail(message: str) -> Reply:
    """A RestBaseResult failure body."""
    return Reply({"status": "FAILED", "code": "1", "msg": message, "message": message}, "rest")


def _in_processing(label: str) -> Reply:
    return be("TXN_IN_PROCESSING", "Transaction in processing, please retry later", Label=label)


def _publish_ms(h: Mapping[str, str]) -> int:
    try:
        return int(float(h.get("timeout") or 20) * 1000)
    except ValueError:
        return 20000
