"""The assembler inside real Spark (local mode): applyInPandasWithState, state, timeouts.

No Kafka here: a parquet file stream with the Kafka connector's schema feeds the query, one
file per micro-batch, so each test decides exactly what every batch contains.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.assembly import assemble_transactions
from assembler.settings import AssemblerSettings

pytestmark = pytest.mark.integration

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)


def begin(txn: str) -> dict[str, Any]:
    return {"txn_id": txn, "type": "TXN_BEGIN", "source_ts_ms": 1}


def data(txn: str, table: str, row: dict[str, Any], op: str = "UPSERT") -> dict[str, Any]:
    return {
        "txn_id": txn,
        "type": "DATA",
        "database": "demo",
        "table": table,
        "op": op,
        "row": json.dumps(row),
        "source_ts_ms": 1,
    }


def end(txn: str, count: int | None = None) -> dict[str, Any]:
    return {"txn_id": txn, "type": "TXN_END", "event_count": count, "source_ts_ms": 1}


@dataclass
class FeedStream:
    """Writes one parquet file per call; offsets continue per (topic, partition)."""

    folder: Path
    topic: str = "cdc"
    next_offset: dict[int, int] = field(default_factory=dict)
    files: int = 0

    def push(self, events: Iterable[tuple[int, dict[str, Any] | bytes]]) -> None:
        rows: dict[str, list[Any]] = {
            k: [] for k in ("key", "value", "topic", "partition", "offset", "timestamp")
        }
        for partition, event in events:
            offset = self.next_offset.get(partition, 0)
            self.next_offset[partition] = offset + 1
            value = event if isinstance(event, bytes) else json.dumps(event).encode()
            rows["key"].append(None)
            rows["value"].append(value)
            rows["topic"].append(self.topic)
            rows["partition"].append(partition)
            rows["offset"].append(offset)
            rows["timestamp"].append(1_700_000_000_000_000)
        table = pa.table(
            {
                "key": pa.array(rows["key"], pa.binary()),
                "value": pa.array(rows["value"], pa.binary()),
                "topic": pa.array(rows["topic"], pa.string()),
                "partition": pa.array(rows["partition"], pa.int32()),
                "offset": pa.array(rows["offset"], pa.int64()),
                "timestamp": pa.array(rows["timestamp"], pa.timestamp("us")),
                "timestampType": pa.array([0] * len(rows["key"]), pa.int32()),
            }
        )
        self.files += 1
        tmp = self.folder.parent / f".{self.folder.name}-{self.files:05d}.parquet"
        pq.write_table(table, tmp)
        # Renamed into place so the file source never sees half a file.
        tmp.rename(self.folder / f"part-{self.files:05d}.parquet")


@dataclass
class Harness:
    """A running query whose foreachBatch keeps the rows of each batch id (idempotently)."""

    spark: Any
    source_dir: Path
    checkpoint: Path
    settings: AssemblerSettings
    batches: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    crash_on_batch: Callable[[int], bool] = lambda _b: False
    #: How the query assembles: by slot (new checkpoints), or one group per partition.
    assemble: Callable[[Any, AssemblerSettings], Any] = assemble_transactions
    query: Any = None
    feed: Any = None

    def start(self) -> None:
        events = (
            self.spark.readStream.schema(KAFKA_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(self.source_dir))
        )
        assembled = self.assemble(events, self.settings)

        def write(df: Any, batch_id: int) -> None:
            rows = [r.asDict() for r in df.collect()]
            # Keyed by batch id, like the real sink's label: a replay overwrites, never adds.
            self.batches[batch_id] = rows
            if self.crash_on_batch(batch_id):
                msg = f"injected crash after writing batch {batch_id}"
                raise RuntimeError(msg)

        self.query = (
            assembled.writeStream.foreachBatch(write)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def drain(self, timeout_s: float = 180) -> None:
        """Wait until every file pushed so far has gone through a completed batch.

        Not processAllAvailable(): with a processing-time timeout pending, Spark keeps running
        empty batches and that call never returns (DESIGN.md §7).
        """
        want = self.feed.files - 1
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            error = self.query.exception()
            if error is not None:
                raise error
            if not self.query.isActive:
                msg = "query stopped"
                raise RuntimeError(msg)
            for progress in reversed(self.query.recentProgress):
                # A trigger that found no file yet reports the offset "null".
                end = json.loads(progress.sources[0].endOffset or "null")
                if isinstance(end, dict) and end.get("logOffset", -1) >= want:
                    return
            time.sleep(0.1)
        msg = f"batches did not reach file {want} within {timeout_s}s"
        raise TimeoutError(msg)

    def stop(self) -> None:
        self.query.stop()

    def rows(self, kind: str = "ROW") -> list[dict[str, Any]]:
        return [r for b in sorted(self.batches) for r in self.batches[b] if r["kind"] == kind]


@pytest.fixture
def harness(spark: Any, tmp_path: Path) -> Iterator[Callable[..., tuple[Harness, FeedStream]]]:
    created: list[Harness] = []
    source = tmp_path / "source"
    source.mkdir()
    feed = FeedStream(source)  # one stream per test: a restarted query reads on from it

    def make(**options: str) -> tuple[Harness, FeedStream]:
        h = Harness(
            spark=spark,
            source_dir=source,
            checkpoint=tmp_path / "checkpoint",
            settings=AssemblerSettings.from_options(options),
        )
        h.feed = feed
        created.append(h)
        return h, feed

    yield make
    for h in created:
        if h.query is not None and h.query.isActive:
            h.query.stop()


def txn_rows(rows: list[dict[str, Any]]) -> dict[tuple[int, str], list[dict[str, Any]]]:
    grouped: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault((r["partition"], r["txn_id"]), []).append(r)
    return grouped


def test_transactions_spanning_batches_are_emitted_whole_on_txn_end(harness: Any) -> None:
    h, feed = harness()
    h.start()
    feed.push([(0, begin("a")), (0, data("a", "orders", {"id": 1})), (1, begin("b"))])
    h.drain()
    assert h.rows() == [], "nothing may be emitted before TXN_END"
    feed.push([(0, data("a", "order_items", {"id": 10})), (1, data("b", "orders", {"id": 2}))])
    h.drain()
    assert h.rows() == []
    feed.push([(0, end("a", 2)), (1, data("b", "orders", {"id": 3}))])
    h.drain()
    a = txn_rows(h.rows())[(0, "a")]
    assert [json.loads(r["row"])["id"] for r in a] == [1, 10]
    assert [r["row_seq"] for r in a] == [0, 1]
    assert [r["is_txn_end"] for r in a] == [False, True]
    assert (a[0]["first_offset"], a[0]["last_offset"]) == (0, 3)
    assert (1, "b") not in txn_rows(h.rows())
    feed.push([(1, end("b")), (0, begin("c")), (0, data("c", "orders", {"id": 4})), (0, end("c"))])
    h.drain()
    got = txn_rows(h.rows())
    assert [json.loads(r["row"])["id"] for r in got[(1, "b")]] == [2, 3]
    # N:1 and per-partition sequence numbers: c is partition 0's second transaction.
    assert got[(0, "c")][0]["txn_seq"] == got[(0, "a")][0]["txn_seq"] + 1
    h.stop()


def test_drain_waits_through_a_trigger_that_found_no_file(harness: Any) -> None:
    """A query whose first trigger finds nothing reports a progress with offsets "null"."""
    h, feed = harness()
    h.start()
    deadline = time.monotonic() + 60
    while not h.query.recentProgress and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p.sources[0].endOffset for p in h.query.recentProgress] == ["null"]
    feed.push([(0, begin("a")), (0, data("a", "orders", {"id": 1})), (0, end("a"))])
    h.drain()
    assert [json.loads(r["row"])["id"] for r in h.rows()] == [1]


def test_restart_from_checkpoint_mid_transaction_loses_and_duplicates_nothing(
    harness: Any,
) -> None:
    h, feed = harness()
    h.start()
    feed.push([(0, begin("a")), (0, data("a", "orders", {"id": 1}))])
    h.drain()
    h.stop()  # the open transaction lives only in the state store now

    h2, _ = harness()
    h2.batches = h.batches
    h2.start()
    feed.push([(0, data("a", "orders", {"id": 2})), (0, end("a"))])
    h2.drain()
    rows = h2.rows()
    assert [json.loads(r["row"])["id"] for r in rows] == [1, 2]
    h2.stop()


def test_crash_after_sink_write_replays_the_same_batch(harness: Any) -> None:
    crashed: list[int] = []

    def crash_once(batch_id: int) -> bool:
        if batch_id == 1 and not crashed:
            crashed.append(batch_id)
            return True
        return False

    h, feed = harness()
    h.crash_on_batch = crash_once
    h.start()
    feed.push([(0, begin("a")), (0, data("a", "orders", {"id": 1}))])
    h.drain()
    feed.push([(0, end("a")), (0, begin("b")), (0, data("b", "orders", {"id": 2}))])
    with pytest.raises(Exception, match="injected crash"):
        h.drain()
    first_run = list(h.batches[1])
    assert not h.query.isActive

    h2, _ = harness()
    h2.batches = h.batches
    h2.start()
    feed.push([(0, end("b"))])
    h2.drain()
    # Spark replayed batch 1 (same offsets, same state): the same rows, under the same id.
    assert h2.batches[1] == first_run
    assert [json.loads(r["row"])["id"] for r in h2.rows()] == [1, 2]
    h2.stop()


def test_abandoned_transaction_times_out_into_rejects(harness: Any) -> None:
    h, feed = harness(**{"txn-timeout": "1500ms"})
    h.start()
    feed.push([(0, begin("lost")), (0, data("lost", "orders", {"id": 1}))])
    h.drain()
    deadline = time.monotonic() + 60
    while not h.rows("REJECT") and time.monotonic() < deadline:
        time.sleep(0.3)
    rejects = h.rows("REJECT")
    assert [r["txn_id"] for r in rejects] == ["lost", "lost"]
    assert all("timeout" in (r["reason"] or "").lower() for r in rejects)
    assert h.rows() == []
    # Late events of the timed-out transaction are rejected too, never emitted as ROWs.
    feed.push([(0, data("lost", "orders", {"id": 2})), (0, end("lost"))])
    h.drain()
    assert h.rows() == []
    h.stop()


def test_invalid_stream_is_rejected_whole_under_reject_policy(harness: Any) -> None:
    h, feed = harness()
    h.start()
    feed.push(
        [
            (0, begin("good1")),
            (0, data("good1", "orders", {"id": 1})),
            (0, end("good1")),
            (0, begin("bad")),
            (0, data("bad", "orders", {"id": 2})),
            (0, b"{not json"),
            (0, end("bad")),
            (0, data("orphan", "orders", {"id": 3})),
            (0, begin("good2")),
            (0, data("good2", "orders", {"id": 4})),
            (0, end("good2", 1)),
        ]
    )
    h.drain()
    good = txn_rows(h.rows())
    assert sorted(t for _p, t in good) == ["good1", "good2"]
    rejects = h.rows("REJECT")
    assert {r["txn_id"] for r in rejects if r["txn_id"]} >= {"bad"}
    assert all(r["reason"] for r in rejects)
    assert 3 not in [json.loads(r["row"])["id"] for r in h.rows()]
    assert any(r["first_offset"] == 3 for r in rejects)
    h.stop()


def test_invalid_stream_stops_the_query_under_fail_policy(harness: Any) -> None:
    h, feed = harness(**{"on-error.default": "fail"})
    h.start()
    feed.push([(0, begin("x")), (0, data("y", "orders", {"id": 1}))])
    with pytest.raises(Exception, match="txn-id-mismatch") as caught:
        h.drain()
    text = str(caught.value)
    assert "partition=0" in text
    assert "offset=1" in text
    assert "cdc" in text
    assert h.rows() == []


@contextmanager
def no_idle_batches(spark: Any) -> Iterator[None]:
    """Queries started inside run no micro-batch without data (``pipeline.idle-batches``)."""
    key = "spark.sql.streaming.noDataMicroBatches.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        spark.conf.set(key, before)


@pytest.mark.parametrize("timeouts", [True, False], ids=["processing-time", "on-data"])
def test_a_quiet_partition_times_out_while_its_slot_has_records(
    harness: Any, spark: Any, timeouts: bool
) -> None:
    # Partitions 0 and 2 share a slot of the test session's two (app/state_layout.py). With
    # no batches without data, Spark never times the slot out: only partition 2's records
    # call the slot, and partition 0's overdue transaction must expire in those calls.
    with no_idle_batches(spark):
        h, feed = harness(**{"txn-timeout": "1500ms"})
        h.assemble = partial(assemble_transactions, timeouts=timeouts)
        h.start()
    feed.push([(0, begin("lost")), (0, data("lost", "orders", {"id": 1}))])
    h.drain()
    deadline = time.monotonic() + 60
    n = 0
    while not h.rows("REJECT") and time.monotonic() < deadline:
        time.sleep(0.5)
        txn = f"busy{n}"
        feed.push([(2, begin(txn)), (2, data(txn, "orders", {"id": n})), (2, end(txn))])
        n += 1
        h.drain()
    assert [r["txn_id"] for r in h.rows("REJECT")] == ["lost", "lost"]
    assert sorted(t for p, t in txn_rows(h.rows()) if p == 2) == sorted(
        f"busy{i}" for i in range(n)
    )
    h.stop()


def test_without_spark_timeouts_an_overdue_transaction_waits_for_records_of_its_slot(
    harness: Any, spark: Any
) -> None:
    # The on-data layout (a new checkpoint, pipeline.idle-batches: false): a slot is called
    # only for records, so partition 0's abandoned transaction stays open while only
    # partition 1 (the other slot) has data, and is rejected with partition 2's first record.
    with no_idle_batches(spark):
        h, feed = harness(**{"txn-timeout": "1s"})
        h.assemble = partial(assemble_transactions, timeouts=False)
        h.start()
    feed.push([(0, begin("lost")), (0, data("lost", "orders", {"id": 1}))])
    h.drain()
    overdue = time.monotonic() + 2.5
    n = 0
    while time.monotonic() < overdue:
        txn = f"other{n}"
        feed.push([(1, begin(txn)), (1, data(txn, "orders", {"id": n})), (1, end(txn))])
        n += 1
        h.drain()
        time.sleep(0.3)
    assert h.rows("REJECT") == []
    assert sorted(t for p, t in txn_rows(h.rows()) if p == 1) == sorted(
        f"other{i}" for i in range(n)
    )
    feed.push([(2, begin("same-slot")), (2, data("same-slot", "orders", {"id": 99}))])
    h.drain()
    assert [r["txn_id"] for r in h.rows("REJECT")] == ["lost", "lost"]
    assert all("timeout" in (r["reason"] or "").lower() for r in h.rows("REJECT"))
    h.stop()


def test_a_checkpoint_from_before_slots_keeps_one_group_per_partition(
    harness: Any, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from app.assembly import assemble_per_partition
    from app.state_layout import plan_layout

    h, feed = harness()
    h.assemble = assemble_per_partition  # what releases before slots ran
    h.start()
    feed.push([(0, begin("a")), (0, data("a", "orders", {"id": 1})), (1, begin("b"))])
    h.drain()
    h.stop()

    layout = plan_layout(spark, str(h.checkpoint), 2)
    assert layout.slots is None
    assert "keeps that layout" in caplog.text
    h2, _ = harness()
    h2.assemble = assemble_per_partition
    h2.batches = h.batches
    h2.start()
    feed.push([(0, end("a")), (1, data("b", "orders", {"id": 2})), (1, end("b"))])
    h2.drain()
    got = txn_rows(h2.rows())
    assert [json.loads(r["row"])["id"] for r in got[(0, "a")]] == [1]
    assert [json.loads(r["row"])["id"] for r in got[(1, "b")]] == [2]
    h2.stop()
