"""The per-partition transaction state machine (DESIGN.md §4), pure Python.

One :class:`TransactionAssembler` serves every (topic, partition) group of a task; all it
remembers about a partition is in the :class:`PartitionState` it is handed and returns, so the
Spark adapter only converts between pandas/``GroupState`` and these objects.

Guarantees (the exact choices are written down in ``docs/assembler.md``):

* records are applied in offset order, whatever order they arrive in; an offset at or below
  the last consumed one is a replay and changes nothing;
* a transaction's rows are emitted only when its valid TXN_END is applied, all of them in one
  :class:`Step`, in source order, numbered by ``txn_seq`` and ``row_seq``;
* every record applied either becomes part of an emitted transaction, stays buffered in the
  open transaction, or is emitted as a REJECT row (policy ``reject``), or the call raises
  :class:`AssemblyFailed` (policy ``fail``) and the state handed in stays valid.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Any

from assembler import buffer
from assembler.buffer import HEADER_SIZE, OP_CODES, OP_NAMES, Buffered
from assembler.codecs import DecodeError, Decoder, SkipRecord, event_to_json_text, make_decoder
from assembler.events import MAXWELL_COMMIT, MAXWELL_ROW, Event, EventType, event_problem
from assembler.exceptions import AssemblerError
from assembler.fast import Held, Scan, native_scan
from assembler.output import KIND_REJECT, KIND_ROW, OutputRow
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings, Policy, Violation
from assembler.state import PartitionState, StateError, TxnStatus
from common.errors import Terminal

logger = logging.getLogger(__name__)

_BEGIN = EventType.TXN_BEGIN.value
_DATA = EventType.DATA.value
_END = EventType.TXN_END.value
_OPEN = TxnStatus.OPEN
_IDLE = TxnStatus.IDLE
_REJECTING = TxnStatus.REJECTING
#: (database, table, op) of a rejected DATA record; none for other records.
Target = tuple[str | None, str | None, str | None]
_NO_TARGET: Target = (None, None, None)
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_by_offset = attrgetter("offset")


@dataclass(frozen=True)
class Step:
    """Result of one :meth:`TransactionAssembler.process` or ``expire`` call.

    Attributes:
        outputs: rows to emit, in offset order of the events that produced them.
        state: the partition's new state (store it, even when ``outputs`` is empty).
        timeout_at_ms: processing time at which the open transaction times out; ``None`` when
            no transaction is open (the adapter then removes any pending timeout).
    """

    outputs: list[OutputRow]
    state: PartitionState
    timeout_at_ms: int | None


class AssemblyFailed(AssemblerError, Terminal):  # noqa: N818 -- name fixed by the adapter API
    """A violation whose policy is ``fail``: the query must stop.

    The message names topic, partition, offset, transaction, violation and what to do.
    Pickles through ``__reduce__`` (executor -> driver).
    """

    def __init__(
        self,
        violation: Violation,
        topic: str,
        partition: int,
        offset: int,
        txn_id: str | None,
        detail: str,
    ) -> None:
        self.violation = violation
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.txn_id = txn_id
        self.detail = detail
        super().__init__(
            f"{violation.value} at topic={topic} partition={partition} offset={offset} "
            f"txn={txn_id if txn_id is not None else '-'}: {detail}. The policy "
            f"on-error.{violation.value} is 'fail', so the query stops here. Fix the producer "
            f"or set on-error.{violation.value}=reject to send such transactions to the reject "
            "output, then restart: the query resumes from its checkpoint and re-reads this "
            "record."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.violation, self.topic, self.partition, self.offset, self.txn_id, self.detail),
        )


def raw_value_text(value: bytes | None) -> str | None:
    """A record value as text for a REJECT row: UTF-8 text, else ``base64:`` + base64.

    Values with control characters (binary Avro that happens to be valid UTF-8) are base64
    too, so a dead-letter reader can always recover the exact bytes.
    """
    if value is None:
        return None
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or _CONTROL_CHARS.search(text) or text.startswith("base64:"):
        return "base64:" + base64.b64encode(value).decode("ascii")
    return text


class TransactionAssembler:
    """Assembles complete source transactions per Kafka partition; see the module docstring.

    Stateless between calls apart from the decoder (schema caches), so one instance can serve
    every group of a Spark task. Picklable: it pickles to its settings.
    """

    def __init__(self, settings: AssemblerSettings, decoder: Decoder | None = None) -> None:
        self._settings = settings
        self._decoder: Decoder = decoder if decoder is not None else make_decoder(settings.codec)
        self._scan = native_scan(settings, self._decoder)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._settings, self._decoder))

    @property
    def settings(self) -> AssemblerSettings:
        """The settings this assembler applies."""
        return self._settings

    def with_settings(self, settings: AssemblerSettings) -> TransactionAssembler:
        """An assembler applying ``settings`` with this one's decoder (and schema caches)."""
        return TransactionAssembler(settings, self._decoder)

    def process(
        self, state: PartitionState | None, records: Iterable[SourceRecord], now_ms: int
    ) -> Step:
        """Apply ``records`` of one (topic, partition), in any order, to ``state``.

        Args:
            state: the partition's state, ``None`` for a partition seen the first time.
            records: this call's records (sorted by offset here; replays are skipped).
            now_ms: processing time (Spark: ``GroupState.getCurrentProcessingTimeMs()``,
                which a re-run batch reproduces), for ``txn-timeout``.

        Raises:
            AssemblyFailed: a violation under policy ``fail``.
            AssemblerError: records of another topic/partition than ``state``.
            ValueError: neither a state nor any record (nothing names the partition).
        """
        ordered = sorted(records, key=_by_offset)
        if state is None:
            if not ordered:
                msg = "process() needs a state or at least one record to know its partition"
                raise ValueError(msg)
            state = PartitionState(topic=ordered[0].topic, partition=ordered[0].partition)
        # No timeout check here: records for the partition are still arriving, and any of
        # them either continues the open transaction or exposes its abandonment (a BEGIN
        # while open, another txn id). Only a partition gone quiet times out (expire), so
        # a pipeline that was down, or behind, never rejects a transaction whose END is
        # already in Kafka.
        run = _Run(self._settings, state, now_ms)
        run.apply_all(ordered, self._decoder, self._scan)
        return run.finish()

    def expire(self, state: PartitionState, now_ms: int) -> Step:
        """Handle a processing-time timeout: reject the open transaction if it is overdue.

        A call before the deadline (or with nothing open) changes nothing.

        Raises:
            AssemblyFailed: ``txn-timeout`` under policy ``fail``.
        """
        run = _Run(self._settings, state, now_ms)
        run.check_timeout()
        return run.finish()


class _Run:
    """Working copy of one partition's state for the duration of one call."""

    __slots__ = (
        "begin_ts",
        "first",
        "last_offset",
        "last_ts",
        "maxwell",
        "nbytes",
        "now_ms",
        "opened_at",
        "out",
        "partition",
        "pending",
        "prior",
        "reject_reason",
        "rows",
        "settings",
        "status",
        "topic",
        "txn_id",
        "txn_seq",
    )

    def __init__(self, settings: AssemblerSettings, st: PartitionState, now_ms: int) -> None:
        self.settings = settings
        self.maxwell = settings.codec.encoding == "maxwell"
        self.now_ms = now_ms
        self.topic = st.topic
        self.partition = st.partition
        self.last_offset = st.last_offset
        self.txn_seq = st.txn_seq
        self.status = st.status
        self.txn_id = st.txn_id
        self.first = st.txn_first_offset
        self.opened_at = st.txn_opened_at_ms
        self.begin_ts = st.txn_begin_ts_ms
        self.last_ts = st.txn_last_ts_ms
        self.rows = st.txn_rows
        self.nbytes = st.txn_bytes
        self.prior = st.txn_buffer
        # DATA buffered in this call stays decoded; it is encoded only if the call ends with
        # the transaction still open (the common 1-call transaction never touches the codec).
        self.pending: list[Buffered] = []
        self.reject_reason = st.reject_reason
        self.out: list[OutputRow] = []

    # -- driving --------------------------------------------------------------------------

    def apply_all(
        self, ordered: list[SourceRecord], decoder: Decoder, scan: Scan | None = None
    ) -> None:
        decode = decoder.decode
        topic, partition = self.topic, self.partition
        i, n = 0, len(ordered)
        while i < n:
            # Idle, or open with nothing of it pending here: the scanner takes the transactions
            # from here on that need no decision of this machine.
            held = self.held() if scan is not None else None
            if scan is not None and (self.status is _IDLE or held is not None):
                nxt, self.last_offset, self.txn_seq, left = scan(
                    ordered, i, self.last_offset, self.txn_seq, topic, partition, self.out, held
                )
                if nxt > i:
                    self.hold(left)
                    i = nxt
                if i == n:
                    break
            rec = ordered[i]
            i += 1
            offset = rec.offset
            if rec.partition != partition or rec.topic != topic:
                msg = (
                    f"record topic={rec.topic} partition={rec.partition} offset={offset} given "
                    f"to the assembler state of topic={topic} partition={partition}: the "
                    "adapter must group by (topic, partition)"
                )
                raise AssemblerError(msg)
            if offset <= self.last_offset:
                continue  # replay (or duplicate within the call): already applied
            if offset > self.last_offset + 2 and self.last_offset >= 0:
                # Records the pipeline never saw: Spark skipped them because Kafka no longer
                # has them (fail-on-data-loss=false). One or two missing offsets are what a
                # transactional producer's commit/abort markers leave, so they are not reported.
                logger.warning(
                    "offsets skipped topic=%s partition=%s first=%s last=%s count=%s: not in "
                    "Kafka any more when read (source.fail-on-data-loss=false)",
                    topic,
                    partition,
                    self.last_offset + 1,
                    offset - 1,
                    offset - self.last_offset - 1,
                )
            try:
                ev = decode(rec.value)
                problem = event_problem(ev)
            except SkipRecord:
                pass  # no row change (a Maxwell DDL or bootstrap marker)
            except DecodeError as e:
                self.on_undecodable(rec, e.reason)
            else:
                if problem is not None:
                    self.on_undecodable(rec, f"invalid event: {problem}")
                else:
                    self.on_event(rec, ev)
            self.last_offset = offset

    def held(self) -> Held | None:
        """The open transaction as the scanner continues it.

        ``None`` unless open with nothing pending (buffered in this call, not yet in ``prior``).
        """
        if self.status is not _OPEN or self.pending or self.txn_id is None:
            return None
        return (
            self.txn_id,
            self.first,
            self.begin_ts,
            self.last_ts,
            self.rows,
            self.nbytes,
            self.prior,
        )

    def hold(self, left: Held | None) -> None:
        """Take the scanner's outcome: idle, or the transaction it left open, buffered."""
        if left is None:
            self.close()
            return
        txn_id, first, begin_ts, last_ts, rows, nbytes, buf = left
        continued = self.status is _OPEN and first == self.first
        # One the scanner opened in this call is open from now, as the machine's BEGIN makes it.
        opened_at = self.opened_at if continued else self.now_ms
        self.set_open(txn_id, first, opened_at, begin_ts, last_ts, rows, nbytes, buf)

    def check_timeout(self) -> None:
        if self.status is not _OPEN or self.opened_at is None:
            return
        limit = self.settings.txn_timeout_ms
        if self.now_ms - self.opened_at >= limit:
            self.reject_open(
                Violation.TXN_TIMEOUT,
                self.first,
                f"transaction open for {self.now_ms - self.opened_at} ms (processing time "
                f"since its TXN_BEGIN at offset {self.first} was applied) without a TXN_END; "
                f"txn-timeout is {limit} ms",
                None,
                None,
                closes=False,
            )

    def finish(self) -> Step:
        is_open = self.status is _OPEN
        buf = self.prior
        if is_open and self.pending:
            buf = buf + buffer.encode(self.pending)
        state = PartitionState(
            topic=self.topic,
            partition=self.partition,
            last_offset=self.last_offset,
            txn_seq=self.txn_seq,
            status=self.status,
            txn_id=self.txn_id,
            txn_first_offset=self.first,
            txn_opened_at_ms=self.opened_at,
            txn_begin_ts_ms=self.begin_ts,
            txn_last_ts_ms=self.last_ts,
            txn_rows=self.rows,
            txn_bytes=self.nbytes,
            txn_buffer=buf if is_open else b"",
            reject_reason=self.reject_reason,
        )
        timeout_at = (
            self.opened_at + self.settings.txn_timeout_ms
            if is_open and self.opened_at is not None
            else None
        )
        return Step(self.out, state, timeout_at)

    # -- events ---------------------------------------------------------------------------

    def on_event(self, rec: SourceRecord, ev: Event) -> None:
        t = ev.type
        status = self.status
        same = ev.txn_id == self.txn_id
        if t in (MAXWELL_ROW, MAXWELL_COMMIT) and self.maxwell:
            self.on_maxwell_row(rec, ev, status, same, commit=t == MAXWELL_COMMIT)
        elif t == _DATA:
            if status is _OPEN:
                if same:
                    self.buffer_data(rec, ev)
                else:
                    self.reject_open(
                        Violation.TXN_ID_MISMATCH,
                        rec.offset,
                        f"DATA of transaction {ev.txn_id!r} at offset {rec.offset} inside "
                        f"open transaction {self.txn_id!r} (TXN_BEGIN at offset {self.first})",
                        rec,
                        ev,
                        closes=False,
                    )
            elif status is _REJECTING and same:
                self.reject_follow_up(rec, ev)
            else:
                self.reject_alone(
                    Violation.NO_BEGIN,
                    rec,
                    ev,
                    f"DATA of transaction {ev.txn_id!r} at offset {rec.offset} without a TXN_BEGIN",
                    keep_rejecting=True,
                )
        elif t == _END:
            if status is _OPEN:
                if not same:
                    self.reject_open(
                        Violation.TXN_ID_MISMATCH,
                        rec.offset,
                        f"TXN_END of transaction {ev.txn_id!r} at offset {rec.offset} inside "
                        f"open transaction {self.txn_id!r} (TXN_BEGIN at offset {self.first})",
                        rec,
                        ev,
                        closes=False,
                    )
                elif ev.event_count is not None and ev.event_count != self.rows:
                    self.reject_open(
                        Violation.EVENT_COUNT_MISMATCH,
                        rec.offset,
                        f"TXN_END at offset {rec.offset} says event_count={ev.event_count} but "
                        f"{self.rows} DATA events were received since the TXN_BEGIN at "
                        f"offset {self.first}",
                        rec,
                        ev,
                        closes=True,
                    )
                else:
                    self.emit(rec, ev)
            elif status is _REJECTING and same:
                self.reject_follow_up(rec, ev)
                self.close()
            else:
                self.reject_alone(
                    Violation.NO_BEGIN,
                    rec,
                    ev,
                    f"TXN_END of transaction {ev.txn_id!r} at offset {rec.offset} without a "
                    "TXN_BEGIN",
                    keep_rejecting=False,
                )
        elif t == _BEGIN:
            if status is _OPEN:
                self.reject_open(
                    Violation.BEGIN_WHILE_OPEN,
                    rec.offset,
                    f"TXN_BEGIN of transaction {ev.txn_id!r} at offset {rec.offset} while "
                    f"transaction {self.txn_id!r} (TXN_BEGIN at offset {self.first}) is open; "
                    "the open one is rejected, the new one starts",
                    None,
                    None,
                    closes=True,
                )
                self.open(rec, ev)
            elif status is _REJECTING and same:
                self.reject_follow_up(rec, ev)
            else:
                self.open(rec, ev)
        elif status is _OPEN:
            self.reject_open(
                Violation.UNKNOWN_TYPE,
                rec.offset,
                f"event type {t!r} at offset {rec.offset} inside open transaction "
                f"{self.txn_id!r} (TXN_BEGIN at offset {self.first})",
                rec,
                ev,
                closes=False,
            )
        elif status is _REJECTING and same:
            self.reject_follow_up(rec, ev)
        else:
            self.reject_alone(
                Violation.UNKNOWN_TYPE,
                rec,
                ev,
                f"event type {t!r} at offset {rec.offset} (transaction {ev.txn_id!r})",
                keep_rejecting=False,
            )

    def on_maxwell_row(
        self, rec: SourceRecord, ev: Event, status: object, same: bool, *, commit: bool
    ) -> None:
        """A Maxwell row (``assembler.maxwell``): no BEGIN, ``commit`` on the last row."""
        if status is _REJECTING and same:
            self.reject_follow_up(rec, ev)
            if commit:
                self.close()
            return
        if status is _OPEN and not same:
            self.reject_open(
                Violation.BEGIN_WHILE_OPEN,
                rec.offset,
                f"row of xid {ev.txn_id!r} at offset {rec.offset} while xid {self.txn_id!r} "
                f"(first row at offset {self.first}) never committed: its commit flag was "
                "lost; the open one is rejected, the new one starts",
                None,
                None,
                closes=True,
            )
        if self.status is not _OPEN:
            self.open(rec, ev)
        self.buffer_data(rec, ev)
        if commit:
            if self.status is _OPEN:
                self.emit(rec, ev)
            else:
                self.close()  # rejected while buffering (too large, unknown table): done

    def on_undecodable(self, rec: SourceRecord, reason: str) -> None:
        if self.status is _OPEN:
            self.reject_open(
                Violation.UNDECODABLE,
                rec.offset,
                f"record at offset {rec.offset} inside open transaction {self.txn_id!r} "
                f"(TXN_BEGIN at offset {self.first}) cannot be decoded: {reason}",
                rec,
                None,
                closes=False,
            )
        else:
            self.reject_alone(
                Violation.UNDECODABLE,
                rec,
                None,
                f"record at offset {rec.offset} cannot be decoded: {reason}",
                keep_rejecting=False,
            )

    # -- transitions ----------------------------------------------------------------------

    def open(self, rec: SourceRecord, ev: Event) -> None:
        ts = ev.source_ts_ms
        self.set_open(ev.txn_id, rec.offset, self.now_ms, ts, ts, 0, 0, b"")

    def set_open(
        self,
        txn_id: str,
        first: int,
        opened_at: int | None,
        begin_ts: int | None,
        last_ts: int | None,
        rows: int,
        nbytes: int,
        prior: bytes,
    ) -> None:
        """Open ``txn_id`` with ``rows`` DATA events (``nbytes``) buffered in ``prior``."""
        self.status = _OPEN
        self.txn_id = txn_id
        self.first = first
        self.opened_at = opened_at
        self.begin_ts = begin_ts
        self.last_ts = last_ts
        self.rows = rows
        self.nbytes = nbytes
        self.prior = prior
        self.pending = []
        self.reject_reason = None

    def close(self) -> None:
        self.status = _IDLE
        self.txn_id = None
        self.first = -1
        self.opened_at = None
        self.begin_ts = None
        self.last_ts = None
        self.rows = 0
        self.nbytes = 0
        self.prior = b""
        self.pending = []
        self.reject_reason = None

    def buffer_data(self, rec: SourceRecord, ev: Event) -> None:
        database, table, row = ev.database, ev.table, ev.row
        # event_problem() guarantees these for DATA; the asserts are for the type checker.
        assert database is not None
        assert table is not None
        assert row is not None
        self.pending.append((rec.offset, OP_CODES[ev.op], database, table, row))
        self.rows += 1
        # utf8_len inlined (hot path); isascii() is O(1) in CPython.
        self.nbytes += (
            HEADER_SIZE
            + (len(database) if database.isascii() else len(database.encode()))
            + (len(table) if table.isascii() else len(table.encode()))
            + (len(row) if row.isascii() else len(row.encode()))
        )
        if ev.source_ts_ms is not None:
            self.last_ts = ev.source_ts_ms
        settings = self.settings
        targets = settings.targets
        problem = None if targets is None else targets.problem(database, table)
        if problem is not None:
            self.reject_open(
                Violation.UNKNOWN_TABLE,
                rec.offset,
                f"DATA at offset {rec.offset} targets {database}.{table}: {problem}",
                None,
                None,
                closes=False,
            )
        elif self.rows > settings.max_txn_rows or self.nbytes > settings.max_txn_bytes:
            self.reject_open(
                Violation.TXN_TOO_LARGE,
                rec.offset,
                f"transaction reached {self.rows} DATA events / {self.nbytes} buffered bytes "
                f"at offset {rec.offset} (max-txn-rows={settings.max_txn_rows}, "
                f"max-txn-bytes={settings.max_txn_bytes}); its buffered part is rejected now "
                "to bound memory, the rest up to its TXN_END follows",
                None,
                None,
                closes=False,
            )

    def buffered(self) -> list[Buffered]:
        if not self.prior:
            return self.pending
        try:
            return buffer.decode(self.prior) + self.pending
        except ValueError as e:
            msg = (
                f"corrupt transaction buffer in the state of topic={self.topic} "
                f"partition={self.partition} txn={self.txn_id}: {e}"
            )
            raise StateError(msg) from e

    def emit(self, rec: SourceRecord, ev: Event) -> None:
        items = self.buffered()
        if items:
            self.txn_seq += 1
            seq = self.txn_seq
            topic, partition, txn_id, first, end_offset = (
                self.topic,
                self.partition,
                self.txn_id,
                self.first,
                rec.offset,
            )
            ts = ev.source_ts_ms if ev.source_ts_ms is not None else self.last_ts
            last = len(items) - 1
            self.out.extend(
                OutputRow(
                    KIND_ROW,
                    topic,
                    partition,
                    txn_id,
                    seq,
                    i,
                    database,
                    table,
                    OP_NAMES[op_code],
                    row,
                    i == last,
                    first,
                    end_offset,
                    ts,
                    None,
                )
                for i, (_, op_code, database, table, row) in enumerate(items)
            )
        self.close()

    # -- rejects --------------------------------------------------------------------------

    def violate(self, v: Violation, offset: int, txn_id: str | None, detail: str) -> str:
        """Apply the policy of ``v``: raise under ``fail``, else return the reject reason."""
        if self.settings.policy(v) is Policy.FAIL:
            raise AssemblyFailed(v, self.topic, self.partition, offset, txn_id, detail)
        return f"{v.value}: {detail}"

    def reject_row(
        self,
        txn_id: str | None,
        row_seq: int,
        first_offset: int,
        rec: SourceRecord,
        ev: Event | None,
        reason: str,
    ) -> OutputRow:
        """REJECT row for a record being applied now (``ev`` is ``None`` if undecodable)."""
        if ev is None:
            return self.reject_output(
                txn_id,
                row_seq,
                (None, None, None),
                raw_value_text(rec.value),
                first_offset,
                rec.offset,
                None,
                reason,
            )
        target: Target
        if ev.type == _DATA:
            target = (ev.database, ev.table, OP_NAMES[OP_CODES[ev.op]])
            row = ev.row
        else:
            target = _NO_TARGET
            row = event_to_json_text(ev)
        end = ev.type == _END and ev.txn_id == txn_id
        return self.reject_output(
            txn_id, row_seq, target, row, first_offset, rec.offset, ev.source_ts_ms, reason, end
        )

    def reject_output(
        self,
        txn_id: str | None,
        row_seq: int,
        target: Target,
        row: str | None,
        first_offset: int,
        offset: int,
        ts: int | None,
        reason: str,
        is_end: bool = False,
    ) -> OutputRow:
        """One REJECT output row; ``target`` is (database, table, op) of a DATA record."""
        database, table, op = target
        return OutputRow(
            KIND_REJECT,
            self.topic,
            self.partition,
            txn_id,
            None,
            row_seq,
            database,
            table,
            op,
            row,
            is_end,
            first_offset,
            offset,
            ts,
            reason,
        )

    def reject_open(
        self,
        v: Violation,
        offset: int,
        detail: str,
        rec: SourceRecord | None,
        ev: Event | None,
        *,
        closes: bool,
    ) -> None:
        """Reject the open transaction: its BEGIN, buffered DATA and the offending record.

        ``closes``: the transaction is over (its END was the offending record, or a new BEGIN
        takes over); otherwise its remaining events are rejected as they arrive (REJECTING).
        """
        txn_id, first = self.txn_id, self.first
        reason = self.violate(v, offset, txn_id, detail)
        ts = self.last_ts
        begin = Event(txn_id or "", _BEGIN, source_ts_ms=self.begin_ts)
        out = self.out
        seq = -1
        if not self.maxwell:  # a Maxwell transaction has no BEGIN record to dead-letter
            seq = 0
            text = event_to_json_text(begin)
            out.append(
                self.reject_output(txn_id, 0, _NO_TARGET, text, first, first, self.begin_ts, reason)
            )
        for data_offset, op_code, database, table, row in chain(self.buffered()):
            seq += 1
            target = (database, table, OP_NAMES[op_code])
            out.append(self.reject_output(txn_id, seq, target, row, first, data_offset, ts, reason))
        if rec is not None:
            seq += 1
            out.append(self.reject_row(txn_id, seq, first, rec, ev, reason))
        if closes:
            self.close()
        else:
            self.start_rejecting(txn_id, first, seq + 1, v, offset)

    def start_rejecting(
        self, txn_id: str | None, first: int, emitted: int, v: Violation, offset: int
    ) -> None:
        self.close()
        self.status = _REJECTING
        self.txn_id = txn_id
        self.first = first
        self.rows = emitted
        self.reject_reason = (
            f"{v.value}: later event of transaction {txn_id!r}, which was rejected at "
            f"offset {offset}"
        )

    def reject_follow_up(self, rec: SourceRecord, ev: Event) -> None:
        """An event of the transaction being rejected: rejected too, no new policy check."""
        self.out.append(
            self.reject_row(
                self.txn_id, self.rows, self.first, rec, ev, self.reject_reason or "rejected"
            )
        )
        self.rows += 1

    def reject_alone(
        self,
        v: Violation,
        rec: SourceRecord,
        ev: Event | None,
        detail: str,
        *,
        keep_rejecting: bool,
    ) -> None:
        """Reject one record outside any open transaction.

        ``keep_rejecting`` (DATA without BEGIN): the record's transaction goes on being
        rejected until its END, with the same violation, so all its events share a reason.
        """
        txn_id = ev.txn_id if ev is not None else None
        reason = self.violate(v, rec.offset, txn_id, detail)
        self.out.append(self.reject_row(txn_id, 0, rec.offset, rec, ev, reason))
        if keep_rejecting:
            self.start_rejecting(txn_id, rec.offset, 1, v, rec.offset)
