"""Verify the orders demo in StarRocks: invariants (continuously) and the final state.

CLI::

    python -m demo.verify --host H --port 9030 --user root --password '' --database demo \
        [--truth FILE] [--watch SECONDS] [--interval 0.2] [--stop-file PATH] [--json] \
        [--dead-letter-table _cdc_dead_letter] [--no-dead-letters]

Exit code 0 = pass, 1 = fail (a violation seen, or a difference from the truth), 2 = could not
run (bad option, unreachable database).

Python: :func:`check_invariants`, :func:`watch`, :func:`compare_with_truth`,
:func:`dead_letters` (from :mod:`demo.deadletters`).

With a truth file that has a ``dead_letters`` section (every file of the current generator),
the dead-letter table is read too (one SELECT) and its transactions are compared by kind with
the expected ones: a bad transaction not dead-lettered, a good one dead-lettered, or one with
another number of records fails the verdict. When nothing is expected and the table cannot be
read (dead letters go to files, say), that is noted and not a failure.

**One check is one SELECT.** StarRocks has no multi-statement snapshot: two SELECTs (orders,
then items) could straddle a commit and report a violation that no snapshot ever had. So the
orders-with-items rows and the orphan items come from a single statement (a ``UNION ALL``),
which StarRocks plans against one visible version of each table; the arithmetic happens in
Python (:mod:`demo.invariants`) with exact Decimals.

The verifier reads StarRocks only; it consumes no Kafka topic and stores no offsets.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

import pymysql

from demo.db import add_connection_arguments, connect, settings_from_args
from demo.deadletters import (
    DEAD_LETTER_TABLE,
    DeadLetterComparison,
    DeadLetterReport,
    compare_dead_letters,
    dead_letters,
    expected_from_truth,
)
from demo.errors import DatabaseError, DemoError
from demo.invariants import (
    MAX_EXAMPLES,
    InvariantReport,
    InvariantRow,
    Violation,
    ViolationKind,
    evaluate,
)
from demo.model import (
    ORDER_ITEMS,
    ORDERS,
    TABLES,
    check_identifier,
    to_decimal,
    to_int,
)
from demo.truth import GroundTruth

__all__ = [
    "ComparisonReport",
    "Verdict",
    "check_invariants",
    "compare_with_truth",
    "dead_letters",
    "run",
    "watch",
]

#: Columns compared with the truth besides the key and ``version`` (timestamps and free text
#: are left out: they prove nothing about exactly-once).
VALUE_COLUMNS: Final[Mapping[str, tuple[str, ...]]] = {
    ORDERS: ("customer_id", "item_count", "total_amount"),
    ORDER_ITEMS: ("order_id", "quantity", "price", "amount"),
}
_DECIMALS: Final = frozenset({"total_amount", "price", "amount"})


def invariant_query(database: str = "demo") -> str:
    """The single statement behind every invariant check."""
    db = check_identifier(database)
    # S608: the only interpolated value is a validated identifier.
    return (
        "SELECT 0 AS orphan, o.order_id, o.item_count, o.total_amount, o.version, "  # noqa: S608
        "i.item_id, i.amount, i.version AS item_version "
        f"FROM `{db}`.`orders` o LEFT JOIN `{db}`.`order_items` i ON i.order_id = o.order_id "
        "UNION ALL "
        "SELECT 1 AS orphan, i.order_id, NULL, NULL, NULL, i.item_id, i.amount, i.version "
        f"FROM `{db}`.`order_items` i LEFT JOIN `{db}`.`orders` o ON o.order_id = i.order_id "
        "WHERE o.order_id IS NULL"
    )


def _fetch(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    except pymysql.MySQLError as e:
        msg = f"query failed: {e} (statement: {sql[:80]}...)"
        raise DatabaseError(msg) from e


def check_invariants(conn: Any, database: str = "demo") -> InvariantReport:
    """Run one invariant check (one SELECT, one snapshot) and evaluate it.

    Raises:
        DatabaseError: the query failed (missing tables, lost connection).
    """
    rows = _fetch(conn, invariant_query(database))
    return evaluate(InvariantRow(bool(to_int(r[0])), *r[1:]) for r in rows)


# -- watching ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchReport:
    """What continuous checking observed.

    ``checks_with_violations`` is the number of partial-visibility observations: snapshots in
    which at least one invariant was broken. ``stopped_by`` is ``duration``, ``stop-file`` or
    ``stop-event`` (the CLI sets the event on SIGTERM/SIGINT).
    """

    checks: int
    checks_with_violations: int
    violations: Mapping[ViolationKind, int]
    failed_checks: int
    elapsed_s: float
    examples: tuple[Violation, ...] = ()
    stopped_by: str = "duration"

    @property
    def ok(self) -> bool:
        """No violation observed, and at least one check ran."""
        return self.checks > 0 and self.checks_with_violations == 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "ok": self.ok,
            "checks": self.checks,
            "checks_with_violations": self.checks_with_violations,
            "violations": {k.value: self.violations.get(k, 0) for k in ViolationKind},
            "failed_checks": self.failed_checks,
            "elapsed_s": round(self.elapsed_s, 3),
            "stopped_by": self.stopped_by,
            "examples": [
                {
                    "kind": v.kind.value,
                    "order_id": v.order_id,
                    "item_id": v.item_id,
                    "detail": v.detail,
                }
                for v in self.examples
            ],
        }


def watch(
    conn: Any,
    duration_s: float,
    *,
    interval_s: float = 0.2,
    database: str = "demo",
    stop_file: Path | None = None,
    stop_event: threading.Event | None = None,
    on_check: Callable[[InvariantReport], None] | None = None,
) -> WatchReport:
    """Check the invariants every ``interval_s`` for ``duration_s`` seconds.

    Stops early when ``stop_file`` exists or ``stop_event`` is set (the CLI sets it on
    SIGTERM/SIGINT). A failed query (StarRocks restarting, connection lost) is counted in
    ``failed_checks`` and the connection is re-opened; it is not a violation.
    """
    stop = stop_event or threading.Event()
    start = time.monotonic()
    deadline = start + duration_s
    checks = with_violations = failed = 0
    totals: dict[ViolationKind, int] = {}
    examples: list[Violation] = []
    stopped_by = "duration"
    while True:
        if stop.is_set():
            stopped_by = "stop-event"
            break
        if stop_file is not None and stop_file.exists():
            stopped_by = "stop-file"
            break
        try:
            report = check_invariants(conn, database)
        except DatabaseError:
            failed += 1
            _reconnect(conn)
        else:
            checks += 1
            if not report.ok:
                with_violations += 1
                for kind, n in report.counts.items():
                    totals[kind] = totals.get(kind, 0) + n
                for v in report.examples:  # the same violation recurs check after check
                    if len(examples) < MAX_EXAMPLES and v not in examples:
                        examples.append(v)
            if on_check is not None:
                on_check(report)
        now = time.monotonic()
        if now >= deadline:
            break
        stop.wait(min(interval_s, deadline - now))
    return WatchReport(
        checks=checks,
        checks_with_violations=with_violations,
        violations=totals,
        failed_checks=failed,
        elapsed_s=time.monotonic() - start,
        examples=tuple(examples),
        stopped_by=stopped_by,
    )


def _reconnect(conn: Any) -> None:
    # Still down: the next check fails again and is counted.
    with contextlib.suppress(pymysql.MySQLError):
        conn.ping(reconnect=True)


# -- comparison with the ground truth ---------------------------------------------------------


@dataclass(frozen=True)
class TableComparison:
    """One table's differences from the truth, by primary key.

    ``wrong_version`` counts rows present on both sides with another ``version``;
    ``wrong_value`` counts rows with the right version but another value in
    :data:`VALUE_COLUMNS` (a row applied twice or from a mixed-up transaction).
    """

    table: str
    expected: int
    actual: int
    missing: int
    extra: int
    wrong_version: int
    wrong_value: int
    examples: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """No difference at all."""
        return not (self.missing or self.extra or self.wrong_version or self.wrong_value)


@dataclass(frozen=True)
class ComparisonReport:
    """Every table's differences from the truth."""

    tables: tuple[TableComparison, ...]

    @property
    def ok(self) -> bool:
        """Every table equals the truth."""
        return all(t.ok for t in self.tables)

    def table(self, name: str) -> TableComparison:
        """The comparison of one table."""
        return next(t for t in self.tables if t.table == name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "ok": self.ok,
            "tables": {
                t.table: {
                    "ok": t.ok,
                    "expected": t.expected,
                    "actual": t.actual,
                    "missing": t.missing,
                    "extra": t.extra,
                    "wrong_version": t.wrong_version,
                    "wrong_value": t.wrong_value,
                    "examples": list(t.examples),
                }
                for t in self.tables
            },
        }


def _normalize(column: str, value: object) -> object:
    if value is None:
        return None
    return to_decimal(value) if column in _DECIMALS else to_int(value)


def compare_table(
    table: str,
    expected: Iterable[Mapping[str, Any]],
    actual: Iterable[Mapping[str, Any]],
) -> TableComparison:
    """Compare one table's rows with the truth (pure: rows in, counts out)."""
    key = "order_id" if table == ORDERS else "item_id"
    want = {to_int(r[key]): r for r in expected}
    have = {to_int(r[key]): r for r in actual}
    missing = sorted(want.keys() - have.keys())
    extra = sorted(have.keys() - want.keys())
    wrong_version: list[int] = []
    wrong_value: list[int] = []
    for k in sorted(want.keys() & have.keys()):
        w, h = want[k], have[k]
        if to_int(w["version"]) != to_int(h["version"]):
            wrong_version.append(k)
        elif any(_normalize(c, w.get(c)) != _normalize(c, h.get(c)) for c in VALUE_COLUMNS[table]):
            wrong_value.append(k)
    examples = (
        [f"missing {key}={k}" for k in missing[:5]]
        + [f"extra {key}={k}" for k in extra[:5]]
        + [
            f"{key}={k} version={to_int(have[k]['version'])} want {to_int(want[k]['version'])}"
            for k in wrong_version[:5]
        ]
        + [f"{key}={k} values differ" for k in wrong_value[:5]]
    )
    return TableComparison(
        table=table,
        expected=len(want),
        actual=len(have),
        missing=len(missing),
        extra=len(extra),
        wrong_version=len(wrong_version),
        wrong_value=len(wrong_value),
        examples=tuple(examples),
    )


def read_table(conn: Any, table: str, database: str = "demo") -> list[dict[str, Any]]:
    """Key, version and compared value columns of every row of one demo table."""
    db = check_identifier(database)
    key = "order_id" if table == ORDERS else "item_id"
    columns = (key, "version", *(c for c in VALUE_COLUMNS[table] if c != key))
    sql = f"SELECT {', '.join(columns)} FROM `{db}`.`{table}`"  # noqa: S608 (fixed names)
    return [dict(zip(columns, r, strict=True)) for r in _fetch(conn, sql)]


def compare_with_truth(
    conn: Any, truth: GroundTruth, database: str | None = None
) -> ComparisonReport:
    """Compare both tables with the ground truth: missing, extra, wrong-version rows.

    Meant for after the pipeline stopped: the tables are read by two statements, which is
    fine once nothing commits any more.
    """
    db = database or truth.database
    return ComparisonReport(
        tuple(compare_table(t, truth.tables[t], read_table(conn, t, db)) for t in TABLES)
    )


# -- verdict ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """Everything one verifier run found; ``passed`` decides the exit code."""

    database: str
    final: InvariantReport
    watch: WatchReport | None = None
    comparison: ComparisonReport | None = None
    notes: tuple[str, ...] = field(default=())
    dead_letter_report: DeadLetterReport | None = None
    dead_letters: DeadLetterComparison | None = None

    @property
    def passed(self) -> bool:
        """Final invariants hold, the watch saw no violation, the truth matches.

        With a dead-letter comparison, exactly the expected transactions were dead-lettered.
        """
        return (
            self.final.ok
            and (self.watch is None or self.watch.ok)
            and (self.comparison is None or self.comparison.ok)
            and (self.dead_letters is None or self.dead_letters.ok)
        )

    def to_dict(self) -> dict[str, Any]:
        """The machine-readable summary (``--json``)."""
        return {
            "passed": self.passed,
            "database": self.database,
            "final_invariants": self.final.to_dict(),
            "watch": self.watch.to_dict() if self.watch else None,
            "truth": self.comparison.to_dict() if self.comparison else None,
            "dead_letter_table": (
                self.dead_letter_report.to_dict() if self.dead_letter_report else None
            ),
            "dead_letters": self.dead_letters.to_dict() if self.dead_letters else None,
            "notes": list(self.notes),
        }

    def render(self) -> str:
        """A readable verdict table."""
        lines = [f"orders demo verification, database {self.database}", ""]
        f = self.final
        lines.append(f"{'check':<34}{'result':>12}")
        lines.append("-" * 46)
        lines.append(f"{'orders / items':<34}{f'{f.orders} / {f.items}':>12}")
        for kind in ViolationKind:
            lines.append(f"{'final ' + kind.value + ' violations':<34}{f.count(kind):>12}")
        if self.watch is not None:
            w = self.watch
            lines.append(
                f"{'watch checks (failed queries)':<34}{f'{w.checks} ({w.failed_checks})':>12}"
            )
            lines.append(f"{'partial-visibility observations':<34}{w.checks_with_violations:>12}")
            for kind in ViolationKind:
                n = w.violations.get(kind, 0)
                lines.append(f"{'  watch ' + kind.value:<34}{n:>12}")
        if self.comparison is not None:
            lines.append("")
            lines.append(
                f"{'table':<14}{'expected':>9}{'actual':>9}{'missing':>9}{'extra':>7}"
                f"{'version':>9}{'value':>7}"
            )
            for t in self.comparison.tables:
                lines.append(
                    f"{t.table:<14}{t.expected:>9}{t.actual:>9}{t.missing:>9}{t.extra:>7}"
                    f"{t.wrong_version:>9}{t.wrong_value:>7}"
                )
        if self.dead_letters is not None:
            lines.append("")
            lines.append(
                f"{'dead letters':<22}{'txns':>6}{'want':>6}{'records':>9}{'want':>6}"
                f"{'missing':>9}{'unexpected':>11}{'records!':>9}"
            )
            for k in self.dead_letters.kinds:
                lines.append(
                    f"{k.kind:<22}{k.actual_txns:>6}{k.expected_txns:>6}{k.actual_records:>9}"
                    f"{k.expected_records:>6}{k.missing:>9}{k.unexpected:>11}"
                    f"{k.wrong_records:>9}"
                )
        examples = [f"final {v}" for v in f.examples[:5]]
        if self.watch is not None:
            examples += [f"watch {v}" for v in self.watch.examples[:5]]
        if self.comparison is not None:
            examples += [e for t in self.comparison.tables for e in t.examples[:5]]
        if self.dead_letters is not None:
            examples += list(self.dead_letters.examples[:10])
        if examples:
            lines.append("")
            lines.append("examples:")
            lines += [f"  {e}" for e in examples]
        if self.notes:
            lines.append("")
            lines += [f"note: {n}" for n in self.notes]
        lines.append("")
        lines.append(f"VERDICT: {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(lines)


def run(
    conn: Any,
    *,
    database: str = "demo",
    truth: GroundTruth | None = None,
    watch_s: float = 0.0,
    interval_s: float = 0.2,
    stop_file: Path | None = None,
    stop_event: threading.Event | None = None,
    dead_letter_table: str | None = DEAD_LETTER_TABLE,
) -> Verdict:
    """Watch (if asked), then check the invariants once more and compare with the truth.

    ``dead_letter_table``: compare it with the truth's expected dead letters when the truth
    has them; ``None`` skips that.
    """
    watched = (
        watch(
            conn,
            watch_s,
            interval_s=interval_s,
            database=database,
            stop_file=stop_file,
            stop_event=stop_event,
        )
        if watch_s > 0
        else None
    )
    final = check_invariants(conn, database)
    comparison = compare_with_truth(conn, truth, database) if truth is not None else None
    notes: list[str] = []
    report: DeadLetterReport | None = None
    dl_comparison: DeadLetterComparison | None = None
    if truth is not None and truth.dead_letters is not None and dead_letter_table is not None:
        expected = expected_from_truth(truth.dead_letters)
        try:
            report = dead_letters(conn, database, dead_letter_table)
        except DatabaseError as e:
            if expected:
                raise
            notes.append(f"dead letters not checked (none expected): {e}")
        else:
            topic = truth.meta.get("topic")
            dl_comparison = compare_dead_letters(report, expected, [topic] if topic else [])
    return Verdict(
        database=database,
        final=final,
        watch=watched,
        comparison=comparison,
        notes=tuple(notes),
        dead_letter_report=report,
        dead_letters=dl_comparison,
    )


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m demo.verify",
        description="Check the orders-demo invariants in StarRocks and compare with the truth.",
    )
    add_connection_arguments(p)
    p.add_argument("--database", default="demo")
    p.add_argument("--truth", type=Path, help="ground-truth file written by the generator")
    p.add_argument("--watch", type=float, default=0.0, metavar="SECONDS", help="check continuously")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between watch checks")
    p.add_argument("--stop-file", type=Path, help="end the watch early when this file exists")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument(
        "--dead-letter-table",
        default=DEAD_LETTER_TABLE,
        help="dead-letter table in --database, compared with the truth's expected dead letters",
    )
    p.add_argument(
        "--no-dead-letters", action="store_true", help="do not check the dead-letter table"
    )
    return p


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM/SIGINT end a watch (then the final check still runs); handlers restored after.

    Only the main thread may install handlers; elsewhere (``main`` called from a thread) the
    stop file and the duration remain.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            # None: a handler installed from C, which cannot be reinstalled from Python.
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return 0 (pass), 1 (fail) or 2 (could not verify)."""
    args = build_parser().parse_args(argv)
    stop = threading.Event()
    try:
        check_identifier(args.database)
        truth = GroundTruth.read(args.truth) if args.truth else None
        conn = connect(settings_from_args(args))
        try:
            with _stop_on_signals(stop):
                verdict = run(
                    conn,
                    database=args.database,
                    truth=truth,
                    watch_s=args.watch,
                    interval_s=args.interval,
                    stop_file=args.stop_file,
                    stop_event=stop,
                    dead_letter_table=None if args.no_dead_letters else args.dead_letter_table,
                )
        finally:
            conn.close()
    except DemoError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(verdict.render(), file=sys.stderr)
        print(json.dumps(verdict.to_dict(), indent=1))
    else:
        print(verdict.render())
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
