"""Multi-table mode against the emulator with real local Spark DataFrames."""

import json
import time

import pytest

from devstack.starrocks.launcher import start_emulator
from sinks.exceptions import SinkTerminalError
from sinks.starrocks.errors import AuthError

from .conftest import DB, batch, create_schema, make_sink, order_txn, table_rows

pytestmark = pytest.mark.integration


def test_happy_path_two_tables_with_progress(sr, spark):
    sink = make_sink(sr)
    sink.open()
    rows = order_txn(1, partition=0, offset=10) + order_txn(2, items=3, partition=1, offset=20)
    result = sink.write_batch(batch(spark, rows), 0)

    assert result.outcome == "committed"
    assert not result.skipped
    assert result.attempt == 0
    assert result.rows == 7
    assert dict(result.rows_per_table) == {"orders": 2, "order_items": 5}
    assert result.bytes > 0
    assert result.source_partitions == 2
    assert sink.last_result == result
    assert table_rows(sr, "orders") == [(1, 2, 32, 1), (2, 3, 63, 1)]
    assert len(table_rows(sr, "order_items")) == 5
    progress = sr.sql(
        f"SELECT pipeline, topic, kafka_partition, last_offset, last_txn_id, batch_id, label "
        f"FROM {DB}._cdc_progress ORDER BY kafka_partition"
    )
    label = result.label
    assert progress == [
        ("test", "cdc", 0, 14, "tx-1-1", 0, label),
        ("test", "cdc", 1, 25, "tx-2-1", 0, label),
    ]
    assert sr.control.labels(DB) == {label: "VISIBLE"}


def test_replayed_batch_is_skipped_not_duplicated(sr, spark):
    sink = make_sink(sr, query_id="11111111-1111-1111-1111-111111111111")
    sink.open()
    sink.write_batch(batch(spark, order_txn(1, version=1)), 5)
    # After a crash Spark replays batch 5; even if it were different it must not be re-applied.
    again = make_sink(sr, query_id="11111111-1111-1111-1111-111111111111")
    result = again.write_batch(batch(spark, order_txn(1, version=2)), 5)
    assert result.outcome == "already_applied"
    assert result.skipped
    assert result.label == "t-11111111-1111-1111-1111-111111111111-5-0"
    assert table_rows(sr, "orders") == [(1, 2, 32, 1)]
    (txn,) = sr.control.transactions()
    assert txn["loaded_rows"]["orders"] == 1  # loaded once, by the first attempt


def test_the_progress_table_names_the_committed_label_of_a_batch(sr, spark):
    """What recovery asks once the server has dropped a batch's rolled-back tasks."""
    qid = "22222222-2222-2222-2222-222222222222"
    sink = make_sink(sr, query_id=qid)
    sink.open()
    result = sink.write_batch(batch(spark, order_txn(1, version=1)), 5)
    assert sink._progress_labels(5) == [result.label] == [f"t-{qid}-5-0"]
    assert sink._progress_labels(6) == []


def test_a_replay_after_the_server_forgot_its_label_is_found_in_the_progress_table(spark, tmp_path):
    """Labels and tasks expire on the server (here after 1 s); the batch's progress rows,
    committed with it, still say it is applied, so the replay loads nothing again."""
    proc = start_emulator(
        tmp_path / "sr", extra_args=["--label-keep-seconds", "1"], stderr_path=tmp_path / "log"
    )
    try:
        sr = proc.handle
        create_schema(sr)
        qid = "44444444-4444-4444-4444-444444444444"
        first = make_sink(sr, query_id=qid)
        first.open()
        first.write_batch(batch(spark, order_txn(1, version=1)), 5)
        deadline = time.monotonic() + 20
        while sr.control.labels(DB) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sr.control.labels(DB) == {}

        result = make_sink(sr, query_id=qid).write_batch(batch(spark, order_txn(1, version=2)), 5)
        assert (result.outcome, result.label) == ("already_applied", f"t-{qid}-5-0")
        assert table_rows(sr, "orders") == [(1, 2, 32, 1)]
    finally:
        proc.stop()


def test_fresh_query_id_with_old_labels_on_the_server_is_not_skipped(sr, spark):
    """A new checkpoint restarts batch ids at 0: its labels must not collide with old ones."""
    old = make_sink(sr, query_id="aaaaaaaa-0000-0000-0000-000000000000")
    old.open()
    old.write_batch(batch(spark, order_txn(1, version=1)), 0)
    fresh = make_sink(sr, query_id="bbbbbbbb-0000-0000-0000-000000000000")
    fresh.open()
    result = fresh.write_batch(batch(spark, order_txn(1, version=2)), 0)
    assert result.outcome == "committed"
    assert result.attempt == 0
    assert table_rows(sr, "orders") == [(1, 2, 34, 2)]


def test_rows_apply_in_source_order_across_chunks(sr, spark):
    """Several versions of one key in one batch: the last (txn_seq, row_seq) wins."""
    rows = []
    for v in range(1, 31):
        rows += order_txn(7, version=v, txn_seq=v, offset=v * 10)
    rows += [
        {**r, "partition": 1, "txn_id": "other"}
        for r in order_txn(8, version=1, txn_seq=0, partition=1)
    ]
    sink = make_sink(sr, **{"sink.buffer-flush.max-bytes": "1024"})
    sink.open()
    result = sink.write_batch(batch(spark, reversed(rows), partitions=3), 1)
    assert result.load_requests > 4  # chunked by size
    assert table_rows(sr, "orders") == [(7, 2, 20 + 2 * 30 + 10, 30), (8, 2, 32, 1)]
    assert [r[3] for r in table_rows(sr, "order_items")] == [30, 30, 1, 1]


def test_delete_rows(sr, spark):
    sink = make_sink(sr)
    sink.open()
    sink.write_batch(batch(spark, order_txn(1) + order_txn(2)), 0)
    delete = order_txn(1, version=2, txn_seq=1, offset=50)
    for r in delete:
        r["op"] = "DELETE"
    sink.write_batch(batch(spark, delete), 1)
    assert [r[0] for r in table_rows(sr, "orders")] == [2]
    assert [r[0] for r in table_rows(sr, "order_items")] == [2, 2]


def test_empty_batch_opens_no_transaction(sr, spark):
    sink = make_sink(sr)
    sink.open()
    result = sink.write_batch(batch(spark, []), 0)
    assert result.outcome == "empty"
    assert sr.control.transactions() == []


def test_dead_letter_rows_are_written_like_any_table(sr, spark):
    sink = make_sink(sr)
    sink.open()
    dlq = {
        "topic": "cdc",
        "partition": 0,
        "txn_id": "bad-1",
        "txn_seq": 0,
        "row_seq": 0,
        "database": DB,
        "table": "_cdc_dead_letter",
        "op": "UPSERT",
        "row": json.dumps(
            {
                "topic": "cdc",
                "kafka_partition": 0,
                "first_offset": 3,
                "row_seq": 0,
                "pipeline": "test",
                "txn_id": "bad-1",
                "last_offset": 5,
                "reason": "event_count mismatch",
                "payload": "{}",
                "source_ts_ms": 1,
            }
        ),
        "last_offset": 5,
        "source_ts_ms": 1,
        "kind": "REJECT",
    }
    sink.write_batch(batch(spark, [dlq, *order_txn(1, offset=6)]), 0)
    assert sr.sql(f"SELECT txn_id, reason FROM {DB}._cdc_dead_letter") == [
        ("bad-1", "event_count mismatch")
    ]
    assert sr.sql(f"SELECT last_offset FROM {DB}._cdc_progress") == [(10,)]


def test_row_for_another_database_is_terminal_and_begins_nothing(sr, spark):
    sink = make_sink(sr)
    sink.open()
    rows = order_txn(1)
    rows[0]["database"] = "elsewhere"
    with pytest.raises(
        SinkTerminalError, match=r"database 'elsewhere'.*topic=cdc partition=0 txn_id=tx-1-1"
    ):
        sink.write_batch(batch(spark, rows), 0)
    assert sr.control.transactions() == []


def test_row_for_a_table_not_configured_is_terminal(sr, spark):
    sink = make_sink(sr)
    sink.open()
    rows = order_txn(1)
    rows[1]["table"] = "customers"
    with pytest.raises(SinkTerminalError, match=r"shop.customers.*add it to table-name"):
        sink.write_batch(batch(spark, rows), 0)
    assert sr.control.transactions() == []


def test_bad_row_json_is_terminal_and_rolled_back(sr, spark):
    sink = make_sink(sr)
    sink.open()
    rows = order_txn(1)
    rows[1]["row"] = "[1, 2]"
    with pytest.raises(SinkTerminalError, match="must be a JSON object"):
        sink.write_batch(batch(spark, rows), 0)
    assert set(sr.control.labels(DB).values()) == {"ABORTED"}
    assert table_rows(sr, "orders") == []


def test_open_creates_system_tables_and_validates(sr):
    make_sink(sr).open()
    tables = {r[0] for r in sr.sql(f"SHOW TABLES FROM {DB}")}
    assert {"_cdc_progress", "_cdc_dead_letter"} <= tables
    desc = [r[0] for r in sr.sql(f"DESC {DB}._cdc_dead_letter")]
    assert desc[:4] == ["topic", "kafka_partition", "first_offset", "row_seq"]
    make_sink(sr).open()  # idempotent


def test_open_names_missing_tables(sr):
    with pytest.raises(SinkTerminalError, match=r"customers do not exist in database shop"):
        make_sink(sr, **{"table-name": "orders,customers"}).open()


def test_open_with_unknown_database(sr):
    with pytest.raises(SinkTerminalError, match="nodb"):
        make_sink(sr, **{"database-name": "nodb"}).open()


def test_open_with_bad_credentials(sr):
    with pytest.raises(AuthError) as info:
        make_sink(sr, password="wrong-pw").open()
    assert "wrong-pw" not in str(info.value)


def test_wildcard_tables_checked_against_the_server(sr, spark):
    sink = make_sink(sr, **{"table-name": "*"})
    sink.open()
    sink.write_batch(batch(spark, order_txn(1)), 0)
    rows = order_txn(2)
    rows[0]["table"] = "missing_table"
    with pytest.raises(SinkTerminalError, match="does not exist in StarRocks"):
        sink.write_batch(batch(spark, rows), 1)
