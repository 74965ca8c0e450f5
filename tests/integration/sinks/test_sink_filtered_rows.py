"""Rows StarRocks filters become dead letters under ``sink.filtered-rows: dead-letter``
(review finding 8), against the emulator in both transaction modes: the failing source
transactions are found by probes that are never committed, the rest of the batch commits once,
and a replay changes nothing."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from sinks.exceptions import SinkTerminalError
from sinks.starrocks.committer import Outcome

from .conftest import DB, batch, make_sink, order_txn, table_rows

pytestmark = pytest.mark.integration

MODES = {
    "multi-table": {},
    "per-table": {"sink.transaction.multi-table.enabled": "false"},
}


def orders_batch(spark: Any, count: int, bad: dict[int, str]) -> Any:
    """Orders 1..count, one source transaction each; ``bad`` spoils an item of some orders."""
    rows: list[dict[str, Any]] = []
    for n in range(1, count + 1):
        txn = order_txn(n, txn_seq=n, offset=10 * n)
        if n in bad:
            image = json.loads(txn[1]["row"])
            # "lots" cannot become BIGINT (strict mode); NULL cannot go into NOT NULL item_no.
            image.update({"amount": "lots"} if bad[n] == "value" else {"item_no": None})
            txn[1]["row"] = json.dumps(image)
        rows += txn
    return batch(spark, rows)


def dead_letters(sr: Any) -> list[tuple[Any, ...]]:
    return sr.sql(
        f"SELECT kafka_partition, first_offset, row_seq, txn_id, reason, payload "
        f"FROM {DB}._cdc_dead_letter ORDER BY first_offset, row_seq"
    )


@pytest.mark.parametrize("mode", sorted(MODES))
def test_filtered_transactions_become_dead_letters_and_the_rest_commits_once(
    sr: Any, spark: Any, mode: str
) -> None:
    sink = make_sink(sr, **{"sink.filtered-rows": "dead-letter", **MODES[mode]})
    sink.open()
    df = orders_batch(spark, 8, {3: "value", 6: "null"})

    result = sink.write_batch(df, 0)

    assert result.outcome is Outcome.COMMITTED
    assert (result.filtered_txns, result.filtered_rows) == (2, 6)
    assert [r[0] for r in table_rows(sr, "orders")] == [1, 2, 4, 5, 7, 8]
    assert sorted({r[0] for r in table_rows(sr, "order_items")}) == [1, 2, 4, 5, 7, 8]
    letters = dead_letters(sr)
    assert [(r[1], r[2], r[3]) for r in letters] == [(34, seq, "tx-3-1") for seq in range(3)] + [
        (64, seq, "tx-6-1") for seq in range(3)
    ]
    assert all(r[4].startswith("filtered-rows: ") for r in letters), letters[0][4]
    spoiled = json.loads(letters[1][5])
    assert (spoiled["table"], spoiled["op"]) == ("order_items", "UPSERT")
    assert json.loads(spoiled["row"])["amount"] == "lots"
    # Probes are rolled back, every one: only the batch's own labels ever committed.
    states = sr.control.labels(DB)
    probes = {label: s for label, s in states.items() if "-probe-" in label}
    assert probes, states
    assert set(probes.values()) == {"ABORTED"}
    committed = [label for label, s in states.items() if s == "VISIBLE"]
    # One label for the batch, or one per table: orders, order_items, dead letters, progress.
    assert len(committed) == (1 if mode == "multi-table" else 4), states
    assert not [label for label in committed if "-probe-" in label]

    # A replay (Spark re-running the batch after a crash) is already applied.
    again = sink.write_batch(orders_batch(spark, 8, {3: "value", 6: "null"}), 0)
    assert again.outcome is Outcome.ALREADY_APPLIED
    assert len(dead_letters(sr)) == 6
    assert len(table_rows(sr, "order_items")) == 12


def test_more_filtered_transactions_than_allowed_fail_the_batch_and_write_nothing(
    sr: Any, spark: Any
) -> None:
    sink = make_sink(
        sr,
        **{
            "sink.filtered-rows": "dead-letter",
            "sink.filtered-rows.max-transactions": "1",
            "sink.batch.max-attempts": "1",
        },
    )
    sink.open()
    with pytest.raises(SinkTerminalError, match=r"more than 1 source transactions.*schema"):
        sink.write_batch(orders_batch(spark, 4, {1: "null", 4: "value"}), 0)
    assert table_rows(sr, "orders") == []
    assert dead_letters(sr) == []


def test_the_default_policy_still_fails_the_batch(sr: Any, spark: Any) -> None:
    sink = make_sink(sr, **{"sink.batch.max-attempts": "1"})
    sink.open()
    with pytest.raises(SinkTerminalError, match="do not fit the table schema"):
        sink.write_batch(orders_batch(spark, 3, {2: "null"}), 0)
    assert table_rows(sr, "orders") == []
    assert not [label for label in sr.control.labels(DB) if "-probe-" in label]


class SimulatedCrash(BaseException):
    """A kill -9 at that point (a BaseException skips the sink's ``except`` handlers)."""


class CrashAfterProbePrepare:
    """Wraps the sink's TxnApi: the driver dies right after a probe's first prepare, and a dead
    driver makes no more calls (the probe's ``finally`` rollback included)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._dead = False

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._inner, name)

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self._dead:
                raise SimulatedCrash(name)
            return call(*args, **kwargs)

        return guarded

    def prepare(self, label: str, table: str) -> None:
        if self._dead:
            raise SimulatedCrash("prepare")
        self._inner.prepare(label, table)
        if "-probe-" in label:
            self._dead = True
            raise SimulatedCrash(label)


def test_a_crash_while_probing_leaves_no_probe_open_after_the_replay(sr: Any, spark: Any) -> None:
    qid = str(uuid.uuid4())
    options = {"sink.filtered-rows": "dead-letter"}
    crashing = make_sink(sr, query_id=qid, **options)
    crashing.instrument = lambda _batch, api, job: (CrashAfterProbePrepare(api), job)
    crashing.open()
    with pytest.raises(SimulatedCrash):
        crashing.write_batch(orders_batch(spark, 4, {3: "null"}), 7)
    left = {label: s for label, s in sr.control.labels(DB).items() if "-probe-" in label}
    assert "PREPARED" in left.values(), left  # the crashed probe holds its transaction

    result = make_sink(sr, query_id=qid, **options).write_batch(
        orders_batch(spark, 4, {3: "null"}), 7
    )
    assert result.outcome is Outcome.COMMITTED
    assert [r[0] for r in table_rows(sr, "orders")] == [1, 2, 4]
    assert len(dead_letters(sr)) == 3
    probes = {label: s for label, s in sr.control.labels(DB).items() if "-probe-" in label}
    assert set(probes.values()) == {"ABORTED"}, probes


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_fresh_batch_with_filtered_rows_is_dead_lettered_too(
    sr: Any, spark: Any, mode: str
) -> None:
    """The batch after a written one skips the replay checks, but once its load was
    rolled back for filtered rows, the retry with the dead letters must take a new attempt."""
    sink = make_sink(sr, **{"sink.filtered-rows": "dead-letter", **MODES[mode]})
    sink.open()
    assert sink.write_batch(orders_batch(spark, 2, {}), 0).outcome is Outcome.COMMITTED

    result = sink.write_batch(orders_batch(spark, 4, {3: "value"}), 1)

    assert (result.outcome, result.attempt) == (Outcome.COMMITTED, 1)
    assert (result.filtered_txns, result.filtered_rows) == (1, 3)
    assert [r[0] for r in table_rows(sr, "orders")] == [1, 2, 4]
    assert [r[3] for r in dead_letters(sr)] == ["tx-3-1"] * 3
    again = sink.write_batch(orders_batch(spark, 4, {3: "value"}), 1)
    assert again.outcome is Outcome.ALREADY_APPLIED
    assert len(dead_letters(sr)) == 3


class CrashBeforeDeadLetterCommit(CrashAfterProbePrepare):
    """The driver dies as it is about to commit the dead-letter label: every table of the
    retry after filtered rows is prepared, none is committed."""

    def prepare(self, label: str, table: str) -> None:
        if self._dead:
            raise SimulatedCrash("prepare")
        self._inner.prepare(label, table)  # probes included: this driver dies later

    def commit(self, label: str, table: str | None) -> None:
        if self._dead or (table or "").endswith("_cdc_dead_letter"):
            self._dead = True
            raise SimulatedCrash(label)
        self._inner.commit(label, table)


def test_per_table_replay_commits_the_prepared_dead_letters(sr: Any, spark: Any) -> None:
    """The replay's rows are the source rows again and name no dead-letter table; recovery
    reads its label anyway and commits it with the rest (else the bad transactions would be
    in no table while the progress row moved past them)."""
    qid = str(uuid.uuid4())
    options = {"sink.filtered-rows": "dead-letter", **MODES["per-table"]}
    crashing = make_sink(sr, query_id=qid, **options)
    crashing.instrument = lambda _batch, api, job: (CrashBeforeDeadLetterCommit(api), job)
    crashing.open()
    with pytest.raises(SimulatedCrash):
        crashing.write_batch(orders_batch(spark, 4, {3: "null"}), 7)
    assert dead_letters(sr) == []

    result = make_sink(sr, query_id=qid, **options).write_batch(
        orders_batch(spark, 4, {3: "null"}), 7
    )
    assert result.outcome is Outcome.RECOVERED
    assert [r[0] for r in table_rows(sr, "orders")] == [1, 2, 4]
    assert [r[3] for r in dead_letters(sr)] == ["tx-3-1"] * 3
    assert "PREPARED" not in sr.control.labels(DB).values()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_batch_whose_every_row_is_filtered_commits_its_dead_letters(
    sr: Any, spark: Any, mode: str
) -> None:
    """The retry leaves orders and order_items without rows: per-table mode begins no label
    for them (the emulator, as StarRocks, refuses to prepare a label no load reached), and a
    replay finds the batch applied."""
    qid = str(uuid.uuid4())
    options = {"sink.filtered-rows": "dead-letter", **MODES[mode]}
    sink = make_sink(sr, query_id=qid, **options)
    sink.open()

    result = sink.write_batch(orders_batch(spark, 1, {1: "value"}), 0)

    assert result.outcome is Outcome.COMMITTED
    assert (result.filtered_txns, result.filtered_rows) == (1, 3)
    assert table_rows(sr, "orders") == []
    assert [r[3] for r in dead_letters(sr)] == ["tx-1-1"] * 3
    again = make_sink(sr, query_id=qid, **options).write_batch(
        orders_batch(spark, 1, {1: "value"}), 0
    )
    assert again.outcome is Outcome.ALREADY_APPLIED
    assert len(dead_letters(sr)) == 3


def test_a_filtered_failure_that_no_probe_reproduces_dead_letters_nothing(
    sr: Any, spark: Any
) -> None:
    """The batch's commit says rows were filtered, but every probe loads (the failure went,
    or the row was none of the source transactions'): no good transaction may be inferred
    bad and dead-lettered; the batch fails, nothing is committed, and a replay writes it."""
    options = {"sink.filtered-rows": "dead-letter", "sink.batch.max-attempts": "1"}
    sink = make_sink(sr, **options)
    sink.open()
    sr.control.fail_next("commit", status="FAILED", message="too many filtered rows")

    with pytest.raises(SinkTerminalError, match=r"none of its 4 source transactions fails"):
        sink.write_batch(orders_batch(spark, 4, {}), 0)

    assert table_rows(sr, "orders") == []
    assert dead_letters(sr) == []
    assert "PREPARED" not in sr.control.labels(DB).values()
    replay = make_sink(sr, **options).write_batch(orders_batch(spark, 4, {}), 0)
    assert replay.outcome is Outcome.COMMITTED
    assert [r[0] for r in table_rows(sr, "orders")] == [1, 2, 3, 4]
    assert dead_letters(sr) == []


def test_a_table_whose_every_row_is_filtered_is_dead_lettered_in_multi_table_mode(
    sr: Any, spark: Any
) -> None:
    """order_items gets one row, a bad one: StarRocks fails the multi-table commit with "no
    row loaded" for that table, before it reads the filter ratio. That is filtered rows too,
    not an aborted transaction to retry until the batch gives up."""
    sink = make_sink(sr, **{"sink.filtered-rows": "dead-letter", "sink.batch.max-attempts": "1"})
    sink.open()
    bad = order_txn(1, items=1, txn_seq=1, offset=10)
    image = json.loads(bad[1]["row"])
    image["amount"] = "lots"
    bad[1]["row"] = json.dumps(image)

    result = sink.write_batch(batch(spark, bad + order_txn(2, items=0, txn_seq=2, offset=20)), 0)

    assert result.outcome is Outcome.COMMITTED
    assert (result.filtered_txns, result.filtered_rows) == (1, 2)
    assert [r[0] for r in table_rows(sr, "orders")] == [2]
    assert table_rows(sr, "order_items") == []
    assert [r[3] for r in dead_letters(sr)] == ["tx-1-1"] * 2
