"""A batch with rows StarRocks filters, through the app's batch writer (review finding 8): under
``sink.filtered-rows: dead-letter`` the transaction lands in the dead-letter table with the
batch, the good one commits, and the progress line counts it as rejected. Real sink, emulator,
Spark local mode."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.assembly import OUTPUT_DDL
from app.pipeline import BatchWriter, to_sink_rows
from devstack.starrocks.launcher import EmulatorHandle
from sinks.starrocks.sink import StarRocksSink
from tests.integration.app.test_batch_writer import Recorder, emulator_config, row

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def order(order_id: int, txn_seq: int, total: object) -> tuple[Any, ...]:
    image = {
        "order_id": order_id,
        "customer_id": 1,
        "item_count": 0,
        "total_amount": total,
        "version": 1,
    }
    return row(
        "ROW",
        f"tx-{order_id}",
        0,
        txn_seq=txn_seq,
        row=json.dumps(image),
        first_offset=10 * order_id,
        last_offset=10 * order_id + 2,
    )


def test_a_filtered_transaction_is_dead_lettered_and_counted_as_rejected(
    spark: Any, starrocks_emulator: EmulatorHandle
) -> None:
    emulator = starrocks_emulator
    config = emulator_config(emulator, "starrocks.sink.filtered-rows=dead-letter")
    qid = str(uuid.uuid4())
    sink = StarRocksSink(config.starrocks, query_id_provider=lambda: qid)
    sink.open()
    recorder = Recorder()
    writer = BatchWriter(sink, config, recorder)
    # total_amount is DECIMAL NOT NULL: a null is filtered by StarRocks, not by the assembler.
    rows = [order(1, 1, 10), order(2, 2, None), order(3, 3, 30)]
    writer(to_sink_rows(spark.createDataFrame(rows, OUTPUT_DDL), config), 0)

    assert emulator.sql("SELECT order_id FROM demo.orders ORDER BY 1") == [(1,), (3,)]
    ((first_offset, txn_id, reason, payload),) = emulator.sql(
        "SELECT first_offset, txn_id, reason, payload FROM demo._cdc_dead_letter"
    )
    assert (first_offset, txn_id) == (20, "tx-2")
    assert reason.startswith("filtered-rows: ")
    assert "too many filtered rows" in reason
    assert json.loads(json.loads(payload)["row"])["order_id"] == 2
    (stats,) = recorder.seen
    assert (stats.rows, stats.transactions) == (2, 2)
    assert (stats.rejected_records, stats.rejected_transactions) == (1, 1)
    assert stats.rejects_by_reason == {"filtered-rows": 1}
