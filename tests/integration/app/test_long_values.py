"""Dead-letter and progress rows fit their columns in bytes (review finding 9): a transaction id
over 255 bytes and a reason of 1,100 "é" (2,200 bytes for a VARCHAR(1024)) used to fail the
whole batch's load, on every replay. Real sink, emulator, Spark local mode."""

from __future__ import annotations

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
