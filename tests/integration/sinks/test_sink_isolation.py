"""A concurrent reader never sees part of a micro-batch (multi-table mode)."""

import threading
from typing import Any

import pytest

from .conftest import DB, batch, make_sink, order_txn

pytestmark = pytest.mark.integration

CHECK = (
    f"SELECT (SELECT count(*) FROM {DB}.orders), (SELECT count(*) FROM {DB}.order_items), "
    f"(SELECT count(*) FROM {DB}.orders o JOIN {DB}.order_items i ON o.order_id = i.order_id "
    "WHERE o.version <> i.version)"
)


def test_reader_never_sees_a_partial_batch(sr, spark):
    sink = make_sink(sr)
    sink.open()
    seen: list[tuple[Any, ...]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader():
        conn = sr.connect()
        try:
            # One more poll after stop is set, so the last observation follows the last commit.
            while True:
                done = stop.is_set()
                with conn.cursor() as cur:
                    cur.execute(CHECK)
                    seen.append(tuple(cur.fetchone()))
                if done:
                    break
        except BaseException as e:  # surfaced in the main thread
            errors.append(e)
        finally:
            conn.close()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        # slow loads widen the window between the first table's load and the commit
        sr.control.delay("load", 0.3, 100)
        for batch_id in range(3):
            rows = []
            for order_id in range(1, 6 + batch_id * 3):
                rows += order_txn(
                    order_id, version=batch_id + 1, txn_seq=batch_id, offset=batch_id * 100
                )
            sink.write_batch(batch(spark, rows), batch_id)
    finally:
        stop.set()
        thread.join(10)
    assert not errors, errors
    assert len(seen) > 10, "the reader must have polled during the loads"
    for orders, items, mismatched in seen:
        assert items == 2 * orders, (orders, items)
        assert mismatched == 0
    assert seen[-1][0] == 11
    assert {s[0] for s in seen} >= {0, 11}
