"""Dead-letter and progress rows fit their columns in bytes (review finding 9): a transaction id
over 255 bytes and a reason of 1,100 "é" (2,200 bytes for a VARCHAR(1024)) used to fail the
whole batch's load, on every replay. Real sink, emulator, Spark local mode."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.assembly import OUTPUT_DDL
from app.pipeline import BatchWriter, to_sink_rows
from app.progress import ProgressReporter
from devstack.starrocks.launcher import EmulatorHandle
from sinks.starrocks.sink import StarRocksSink
from tests.integration.app.test_batch_writer import emulator_config, row

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_long_ids_and_reasons_are_cut_to_their_columns_in_bytes(
    spark: Any, starrocks_emulator: EmulatorHandle
) -> None:
    emulator = starrocks_emulator
    config = emulator_config(emulator)
    long_txn = "t" * 300
    reason = "undecodable: " + "é" * 1100
    rows = [
        row(
            "ROW",
            long_txn,
            0,
            row='{"order_id": 1, "customer_id": 1, "item_count": 0, '
            '"total_amount": 0, "version": 1}',
        ),
        row("REJECT", "x" * 200 + "é" * 40, 0, reason=reason, first_offset=13, last_offset=13),
    ]
    qid = str(uuid.uuid4())
    sink = StarRocksSink(config.starrocks, query_id_provider=lambda: qid)
    sink.open()
    writer = BatchWriter(sink, config, ProgressReporter(enabled=False))
    writer(to_sink_rows(spark.createDataFrame(rows, OUTPUT_DDL), config), 0)

    ((txn_id, got_reason, payload),) = emulator.sql(
        "SELECT txn_id, reason, payload FROM demo._cdc_dead_letter"
    )
    assert len(txn_id.encode()) <= 255
    assert txn_id.startswith("x" * 200)
    assert "\ufffd" not in txn_id
    assert 1000 <= len(got_reason.encode()) <= 1024
    assert got_reason.startswith("undecodable: éé")
    assert payload  # the record itself is kept whole (STRING)
    ((last_txn,),) = emulator.sql("SELECT last_txn_id FROM demo._cdc_progress")
    # The partition's last emitted record is the dead letter: its id, cut the same way.
    assert len(last_txn.encode()) <= 255
    assert last_txn.startswith("x" * 200)
    assert emulator.sql("SELECT order_id FROM demo.orders") == [(1,)]


@pytest.mark.parametrize("limit", [8, 255])
def test_the_python_cut_of_a_value_is_sparks(spark: Any, limit: int) -> None:
    """Tasks that load cut dead-letter values in Python where Spark's expression cuts them.

    A cut through a character used to fail the query in Spark 4 (``decode`` refuses a split
    UTF-8 sequence), on every replay of the batch.
    """
    from sinks.starrocks.fit import fit_bytes, fit_bytes_text

    texts = [
        "short",
        "x" * 300,
        "x" * 200 + "é" * 40,
        "é" * 300,
        "€" * 100,
        "a" + "😀" * 80,
        "y" * (limit - 1) + "é",
        "z" * (limit - 3) + "\ufffd" * 3,
    ]
    frame = spark.createDataFrame([(t,) for t in texts], "t string")
    cut = [r[0] for r in frame.select(fit_bytes(frame["t"], limit)).collect()]
    assert [fit_bytes_text(t, limit) for t in texts] == cut
    assert all(len(c.encode()) <= limit for c in cut)


def test_dead_letter_payloads_keep_their_target_and_fit_their_column(
    spark: Any, starrocks_emulator: EmulatorHandle
) -> None:
    """Spark's side of app/task_load.py: a rejected DATA event keeps database, table and op;
    a payload over StarRocks' longest VARCHAR is cut with a note (the emulator, as StarRocks,
    refuses a longer value, which failed the batch on every replay)."""
    from app.task_load import LoadInTask

    emulator = starrocks_emulator
    config = emulator_config(emulator)
    huge = "é" * 600_000
    rows = [
        row("REJECT", "d", 0, database="demo", table="order_items", op="DELETE",
            row='{"item_id": 7}', first_offset=20, last_offset=21),
        row("REJECT", "h", 0, row=huge, first_offset=30, last_offset=30),
    ]  # fmt: skip
    sink = StarRocksSink(config.starrocks, query_id_provider=lambda: str(uuid.uuid4()))
    sink.open()
    BatchWriter(sink, config, ProgressReporter(enabled=False))(
        to_sink_rows(spark.createDataFrame(rows, OUTPUT_DDL), config), 0
    )
    got = dict(emulator.sql("SELECT first_offset, payload FROM demo._cdc_dead_letter ORDER BY 1"))
    assert json.loads(got[20]) == {
        "database": "demo",
        "table": "order_items",
        "op": "DELETE",
        "row": '{"item_id": 7}',
    }
    assert len(got[30].encode()) <= 1_048_576
    ((reason,),) = emulator.sql("SELECT reason FROM demo._cdc_dead_letter WHERE first_offset = 30")
    assert reason.startswith("[payload cut to 1048576 of 1200000 bytes] undecodable")
    # The tasks that load build the same dead letters.
    in_task = LoadInTask(lambda *_: [], None, config.pipeline.name, "demo", "_cdc_dead_letter")
    spark_rows = to_sink_rows(spark.createDataFrame(rows, OUTPUT_DDL), config).collect()
    for source, built in zip(rows, spark_rows, strict=True):
        assert in_task.dead_letter(source) == built["row"]
