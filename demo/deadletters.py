"""Dead-letter accounting: what the pipeline rejected, by reason, against the truth.

The pipeline writes one row per rejected source record into ``_cdc_dead_letter`` (columns
``topic, kafka_partition, first_offset, row_seq, pipeline, txn_id, last_offset, reason,
payload, source_ts_ms``; see ``app/pipeline.py``). All rows of one rejected source transaction
share ``(topic, kafka_partition, first_offset)``, and every reason starts with the assembler's
violation name (``assembler.settings.Violation``): ``"<violation>: <detail>"``. So a group is one
dead-lettered transaction and its reason prefix says why.

:func:`dead_letters` reads the table with one SELECT; :func:`compare_dead_letters` matches the
groups with the truth's expected dead letters (``GroundTruth.dead_letters``), per kind:
missing, unexpected, and present with another number of records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pymysql

from assembler.settings import Violation
from demo.errors import DatabaseError
from demo.model import check_identifier, to_int

DEAD_LETTER_TABLE: Final = "_cdc_dead_letter"

#: The kind of a reason that names no known violation.
OTHER: Final = "other"

#: Every kind a report counts, in display order.
KINDS: Final[tuple[str, ...]] = (*(v.value for v in Violation), OTHER)

_KNOWN: Final = frozenset(v.value for v in Violation)

Coordinates = tuple[str, int, int]
"""(topic, partition, first offset): identifies one dead-lettered source transaction."""


def kind_of_reason(reason: str | None) -> str:
    """The violation a reject reason names (its text up to the first ``:``), else ``other``."""
    if not reason:
        return OTHER
    head = reason.split(":", 1)[0].strip().lower()
    return head if head in _KNOWN else OTHER


@dataclass(frozen=True)
class DeadLetteredTxn:
    """One dead-lettered source transaction: its rows grouped by coordinates."""

    topic: str
    partition: int
    first_offset: int
    kind: str
    records: int
    txn_id: str | None

    @property
    def coordinates(self) -> Coordinates:
        """(topic, partition, first offset)."""
        return (self.topic, self.partition, self.first_offset)


@dataclass(frozen=True)
class DeadLetterReport:
    """Everything in the dead-letter table, grouped into transactions."""

    transactions: tuple[DeadLetteredTxn, ...]

    @property
    def records(self) -> int:
        """Dead-letter rows in all."""
        return sum(t.records for t in self.transactions)

    def by_kind(self, topic: str | None = None) -> dict[str, tuple[int, int]]:
        """Kind -> (transactions, records), every kind listed; only ``topic`` if given."""
        out = dict.fromkeys(KINDS, (0, 0))
        for t in self.transactions:
            if topic is None or t.topic == topic:
                txns, recs = out[t.kind]
                out[t.kind] = (txns + 1, recs + t.records)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "transactions": len(self.transactions),
            "records": self.records,
            "by_kind": {
                k: {"transactions": n, "records": r} for k, (n, r) in self.by_kind().items()
            },
        }


def group_rows(rows: Iterable[Sequence[Any]]) -> DeadLetterReport:
    """Group ``(topic, kafka_partition, first_offset, row_seq, txn_id, reason)`` rows.

    A transaction's kind is the one named by its first row's reason (lowest ``row_seq``); the
    later rows of a transaction carry the same violation name.
    """
    groups: dict[Coordinates, list[tuple[int, str | None, str | None]]] = {}
    for topic, partition, first_offset, row_seq, txn_id, reason in rows:
        key = (str(topic), to_int(partition), to_int(first_offset))
        groups.setdefault(key, []).append((to_int(row_seq), txn_id, reason))
    txns = []
    for (topic, partition, first_offset), members in sorted(groups.items()):
        members.sort(key=lambda m: m[0])
        _, txn_id, reason = members[0]
        txns.append(
            DeadLetteredTxn(
                topic=topic,
                partition=partition,
                first_offset=first_offset,
                kind=kind_of_reason(reason),
                records=len(members),
                txn_id=None if txn_id is None else str(txn_id),
            )
        )
    return DeadLetterReport(tuple(txns))


def dead_letter_query(database: str = "demo", table: str = DEAD_LETTER_TABLE) -> str:
    """The single statement that reads the dead-letter table."""
    db = check_identifier(database)
    tbl = check_identifier(table, "table")
    # S608: only validated identifiers are interpolated.
    return (
        "SELECT topic, kafka_partition, first_offset, row_seq, txn_id, reason "  # noqa: S608
        f"FROM `{db}`.`{tbl}`"
    )


def dead_letters(
    conn: Any, database: str = "demo", table: str = DEAD_LETTER_TABLE
) -> DeadLetterReport:
    """Read the dead-letter table (one SELECT) and group it into transactions.

    Raises:
        DatabaseError: the query failed (no such table, lost connection).
    """
    sql = dead_letter_query(database, table)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = list(cur.fetchall())
    except pymysql.MySQLError as e:
        msg = f"cannot read the dead-letter table `{database}`.`{table}`: {e}"
        raise DatabaseError(msg) from e
    return group_rows(rows)


@dataclass(frozen=True)
class ExpectedDeadLetter:
    """One dead-lettered transaction the truth expects."""

    kind: str
    topic: str
    partition: int
    first_offset: int
    records: int
    txn_id: str | None = None

    @property
    def coordinates(self) -> Coordinates:
        """(topic, partition, first offset)."""
        return (self.topic, self.partition, self.first_offset)


def expected_from_truth(section: Mapping[str, Any]) -> tuple[ExpectedDeadLetter, ...]:
    """The expected dead letters of a truth file's ``dead_letters`` section."""
    return tuple(
        ExpectedDeadLetter(
            kind=str(t["kind"]),
            topic=str(t["topic"]),
            partition=int(t["partition"]),
            first_offset=int(t["first_offset"]),
            records=int(t["records"]),
            txn_id=t.get("txn_id"),
        )
        for t in section.get("transactions", [])
    )


@dataclass(frozen=True)
class KindComparison:
    """One kind's dead letters against the truth."""

    kind: str
    expected_txns: int
    actual_txns: int
    expected_records: int
    actual_records: int
    missing: int
    unexpected: int
    wrong_records: int

    @property
    def ok(self) -> bool:
        """Exactly the expected transactions, each with the expected records."""
        return not (self.missing or self.unexpected or self.wrong_records)


@dataclass(frozen=True)
class DeadLetterComparison:
    """The dead-letter table against the truth, per kind, for the truth's topics."""

    kinds: tuple[KindComparison, ...]
    examples: tuple[str, ...] = ()
    other_topics: int = 0

    @property
    def ok(self) -> bool:
        """Every kind matches."""
        return all(k.ok for k in self.kinds)

    def kind(self, name: str) -> KindComparison:
        """The comparison of one kind."""
        return next(k for k in self.kinds if k.kind == name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "ok": self.ok,
            "other_topics_transactions": self.other_topics,
            "kinds": {
                k.kind: {
                    "ok": k.ok,
                    "expected_transactions": k.expected_txns,
                    "actual_transactions": k.actual_txns,
                    "expected_records": k.expected_records,
                    "actual_records": k.actual_records,
                    "missing": k.missing,
                    "unexpected": k.unexpected,
                    "wrong_records": k.wrong_records,
                }
                for k in self.kinds
            },
            "examples": list(self.examples),
        }


def compare_dead_letters(
    report: DeadLetterReport,
    expected: Iterable[ExpectedDeadLetter],
    topics: Iterable[str],
) -> DeadLetterComparison:
    """Match dead-lettered transactions of ``topics`` with the expected ones (pure).

    A transaction is matched by coordinates *and* kind: one dead-lettered for another reason
    counts as missing under the expected kind and unexpected under the actual one. Dead letters
    of other topics (another pipeline sharing the table) are counted, not judged.
    """
    scope = set(topics)
    want = {(e.kind, e.coordinates): e for e in expected}
    scope |= {e.topic for e in want.values()}
    have = {(t.kind, t.coordinates): t for t in report.transactions if t.topic in scope}
    other = sum(1 for t in report.transactions if t.topic not in scope)
    examples: list[str] = []
    kinds = []
    for kind in KINDS:
        w = {c: e for (k, c), e in want.items() if k == kind}
        h = {c: t for (k, c), t in have.items() if k == kind}
        missing = sorted(w.keys() - h.keys())
        unexpected = sorted(h.keys() - w.keys())
        wrong = sorted(c for c in w.keys() & h.keys() if w[c].records != h[c].records)
        examples += [f"missing {kind} dead letter at {_where(c)}" for c in missing[:3]]
        examples += [f"unexpected {kind} dead letter at {_where(c)}" for c in unexpected[:3]]
        examples += [
            f"{kind} at {_where(c)}: {h[c].records} records, want {w[c].records}" for c in wrong[:3]
        ]
        kinds.append(
            KindComparison(
                kind=kind,
                expected_txns=len(w),
                actual_txns=len(h),
                expected_records=sum(e.records for e in w.values()),
                actual_records=sum(t.records for t in h.values()),
                missing=len(missing),
                unexpected=len(unexpected),
                wrong_records=len(wrong),
            )
        )
    return DeadLetterComparison(tuple(kinds), tuple(examples), other)


def _where(c: Coordinates) -> str:
    return f"topic={c[0]} partition={c[1]} first_offset={c[2]}"
