"""The load job gives each known table a Spark task of its own (``sink.by_table``).

Partitioned by the table's name, two tables share a task about as often as not: ``orders``
and ``order_items`` both hash to partition 0 of 2, and one task then loaded both, one after
the other, while the other core idled. Real local Spark; the sink's tests on the emulator.
"""

from __future__ import annotations

from typing import Any

import pytest

from sinks.starrocks import sink as sink_module
from sinks.starrocks.sink import by_table

from .conftest import batch, make_sink, order_txn, table_rows
from .test_sink_counted import RowTally

pytestmark = pytest.mark.integration


def placement(df: Any) -> dict[str, set[int]]:
    """The Spark partitions that hold each table's rows."""
    where: dict[str, set[int]] = {}
    for r in df.selectExpr("table", "spark_partition_id() AS p").collect():
        where.setdefault(r.table, set()).add(r.p)
    return where


def tables_df(spark: Any, tables: list[str], rows: int = 20) -> Any:
    data = [(t, i) for t in tables for i in range(rows)]
    return spark.createDataFrame(data, "table string, n int").repartition(3)


def test_two_tables_that_hash_together_get_a_task_each(spark: Any) -> None:
    df = tables_df(spark, ["orders", "order_items"])
    # What this guards against: by name, both tables land in partition 0 of 2.
    assert placement(df.repartition(2, "table")) == {"orders": {0}, "order_items": {0}}
    assert placement(by_table(df, ("order_items", "orders"))) == {
        "order_items": {0},
        "orders": {1},
    }


@pytest.mark.parametrize("n", [1, 3, 7, 12])
def test_every_known_table_has_a_partition_of_its_own(spark: Any, n: int) -> None:
    tables = [f"t{i}" for i in range(n)]
    placed = by_table(tables_df(spark, tables), tuple(tables))
    assert placed.rdd.getNumPartitions() == n
    assert placement(placed) == {t: {i} for i, t in enumerate(tables)}


def test_a_table_not_named_goes_with_the_last_one(spark: Any) -> None:
    df = tables_df(spark, ["orders", "order_items", "_cdc_dead_letter", "other"])
    placed = placement(by_table(df, ("orders", "order_items", "_cdc_dead_letter")))
    assert placed == {"orders": {0}, "order_items": {1}, "_cdc_dead_letter": {2}, "other": {2}}


def test_a_table_named_twice_has_one_partition(spark: Any) -> None:
    # table-name may list the dead-letter table, which the counted load job adds again: one
    # partition and one key for it, not an empty partition beside it.
    df = tables_df(spark, ["orders", "_cdc_dead_letter"])
    placed = by_table(df, ("orders", "_cdc_dead_letter", "_cdc_dead_letter"))
    assert placed.rdd.getNumPartitions() == 2
    assert placement(placed) == {"orders": {0}, "_cdc_dead_letter": {1}}


def test_names_are_matched_as_text_not_as_sql(spark: Any) -> None:
    tables = ["it's", "back\\slash", "orders"]
    placed = by_table(tables_df(spark, tables), tuple(tables))
    assert placement(placed) == {t: {i} for i, t in enumerate(tables)}


def test_unknown_tables_spread_by_name_over_the_cores(spark: Any) -> None:
    df = tables_df(spark, ["orders", "order_items"])
    placed = by_table(df, None)
    assert placed.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism
    assert all(len(parts) == 1 for parts in placement(placed).values())


def test_the_load_job_places_the_batch_by_its_tables(
    sr: Any, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Per-table mode names the batch's tables in its labels. A batch counted by its load job
    # (multi-table mode, the app's) knows its tables only afterwards: the configured ones and
    # the dead-letter table.
    seen: list[tuple[str, ...] | None] = []

    def spy(df: Any, tables: Any) -> Any:
        seen.append(None if tables is None else tuple(tables))
        return by_table(df, tables)

    monkeypatch.setattr(sink_module, "by_table", spy)
    rows = order_txn(1) + order_txn(2, partition=1, items=3)
    per_table = make_sink(sr, **{"sink.transaction.multi-table.enabled": "false"})
    per_table.open()
    assert per_table.write_batch(batch(spark, rows), 0).outcome == "committed"
    multi = make_sink(sr)
    multi.open()
    counted = multi.write_batch(batch(spark, order_txn(3, offset=10)), 1, tally=RowTally())
    assert counted.outcome == "committed"
    assert seen == [("order_items", "orders"), ("orders", "order_items", "_cdc_dead_letter")]
    assert [r[0] for r in table_rows(sr, "orders")] == [1, 2, 3]
    assert len(table_rows(sr, "order_items")) == 7
