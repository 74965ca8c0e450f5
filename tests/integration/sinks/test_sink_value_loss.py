"""No silent value loss (review finding 5), against the emulator: a value StarRocks cannot
convert fails the batch instead of loading as NULL; rows StarRocks drops are only allowed by an
explicit flag and are then reported; a target that is not a PRIMARY KEY table is refused at
``open()``."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from sinks.exceptions import SinkTerminalError

from .conftest import DB, batch, make_sink, order_txn, table_rows

pytestmark = pytest.mark.integration


def bad_value_batch(spark: Any) -> Any:
    rows = order_txn(1)
    # "lots" cannot become BIGINT; order_items.amount is nullable, so without strict mode
    # StarRocks would load it as NULL and commit.
    rows[1]["row"] = json.dumps({"order_id": 1, "item_no": 0, "amount": "lots", "version": 1})
    return batch(spark, rows)


def test_a_value_starrocks_cannot_convert_fails_the_batch_instead_of_becoming_null(
    sr: Any, spark: Any
) -> None:
    sink = make_sink(sr, **{"sink.batch.max-attempts": "1"})
    sink.open()
    with pytest.raises(SinkTerminalError, match="do not fit the table schema"):
        sink.write_batch(bad_value_batch(spark), 0)
    assert table_rows(sr, "orders") == []
    assert table_rows(sr, "order_items") == []


def test_dropped_rows_need_the_flag_and_are_reported(
    sr: Any, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    sink = make_sink(
        sr,
        **{
            "sink.properties.max_filter_ratio": "0.9",
            "sink.allow-filtered-rows": "true",
            # Only per-table transactions report dropped rows (at prepare).
            "sink.transaction.multi-table.enabled": "false",
        },
    )
    sink.open()
    with caplog.at_level(logging.WARNING, logger="sinks.starrocks.client"):
        sink.write_batch(bad_value_batch(spark), 0)
    assert [r[0] for r in table_rows(sr, "order_items")] == [1]  # item 1 only: item 0 dropped
    dropped = [r.getMessage() for r in caplog.records if "dropped rows" in r.getMessage()]
    assert dropped, caplog.text
    assert "filtered=1" in dropped[0]


def test_a_duplicate_key_target_is_refused_at_open(sr: Any) -> None:
    sr.sql(
        f"CREATE TABLE {DB}.audit (id BIGINT NOT NULL, v INT) DUPLICATE KEY(id) "
        'DISTRIBUTED BY HASH(id) PROPERTIES("replication_num" = "1")'
    )
    sink = make_sink(sr, **{"table-name": "orders,audit"})
    with pytest.raises(SinkTerminalError, match=r"audit.*not PRIMARY KEY"):
        sink.open()
