"""Generate the orders workload into Kafka and write the ground truth.

CLI::

    python -m demo.generate --bootstrap HOST:PORT --topic T --partitions N --orders K \
        --seed S [--encoding json|avro|confluent] [--max-items 5] [--update-ratio 0.3] \
        [--delete-ratio 0.1] [--truth FILE] [--rate TXN_PER_S] [--create-topic] [--database demo] \
        [--bad-input KIND[:N] ...] [--max-txn-rows ROWS]

Python: :func:`generate` with a :class:`GeneratorConfig` (used by tests and ``make demo``).

Every event of an order's transaction has the Kafka key ``order_id`` and is sent to the explicit
partition :func:`demo.workload.partition_for` (order id, N): deterministic whatever the
client's partitioner, and one order's history stays in one partition, the only place Kafka
orders records. The generator only produces; it consumes nothing and stores no offsets.

``--bad-input KIND[:N]`` (repeatable) interleaves N bad source transactions of each kind
(:class:`demo.badinput.BadInputKind`) with the good ones, on random partitions,
deterministically by seed. They use their own order/item id range, so the good transactions and
the ground truth's tables are unchanged; the truth's ``dead_letters`` section lists what the
pipeline must dead-letter: per kind the count, and per transaction its source coordinates
(topic, partition, first offset, taken from the delivery reports) and rejected records.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, cast

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

# NewTopic's typed home; confluent_kafka.admin re-exports it without declaring it public.
from confluent_kafka.cimpl import NewTopic

from assembler.codecs import encode_event, event_to_json_text
from assembler.events import Event, EventType
from demo.badinput import (
    BadInputKind,
    BadInputPlan,
    BadTransaction,
    encode_record,
    expected_summary,
    interleave,
    parse_bad_input,
)
from demo.badinput import build as build_bad_transactions
from demo.errors import DemoConfigError, DemoError, ProduceError, TopicError
from demo.truth import GroundTruth
from demo.workload import Clock, Workload, WorkloadConfig, WorkloadCounts, wall_clock_ms

logger = logging.getLogger(__name__)

Encoding = Literal["json", "avro", "confluent"]
ENCODINGS: tuple[Encoding, ...] = ("json", "avro", "confluent")


def json_with_row_object(event: Event) -> bytes:
    """The JSON event with ``row`` spliced in as an object (its text is already JSON)."""
    head = event_to_json_text(event._replace(row=None))
    return f'{head[:-1]},"row":{event.row}}}'.encode()


def maxwell_records(events: Sequence[Event], xid: int) -> list[bytes]:
    """One transaction as Maxwell writes it (docs/maxwell.md).

    A row per DATA event, ``xid`` on each, ``commit`` on the last, no BEGIN/END. The row text is
    spliced in as ``data``, so decimals keep their exact digits.
    """
    data = [e for e in events if e.type == EventType.DATA.value and e.row is not None]
    out = []
    for i, e in enumerate(data):
        head = {
            "database": e.database,
            "table": e.table,
            "type": "delete" if e.op == "DELETE" else "insert",
            "ts": (e.source_ts_ms or 0) // 1000,
            "xid": xid,
            "xoffset": i,
        }
        if i == len(data) - 1:
            head["commit"] = True
        text = json.dumps(head, separators=(",", ":"))
        out.append(f'{text[:-1]},"data":{e.row}}}'.encode())
    return out


@dataclass(frozen=True)
class GeneratorConfig:
    """Where and how to send a workload.

    Attributes:
        bootstrap: Kafka bootstrap servers, ``host:port[,host:port]``.
        topic: the target topic; it needs at least ``workload.partitions`` partitions.
        workload: what to generate.
        encoding: event encoding (DESIGN.md §3).
        schema_id: Schema Registry id written into ``confluent`` frames.
        truth_path: where to write the ground truth (JSON), if anywhere.
        rate: transactions per second; ``None`` sends as fast as the producer takes them.
        create_topic: create the topic with ``workload.partitions`` partitions if missing.
        progress_interval_s: how often progress is logged.
        producer_config: extra librdkafka settings, applied last.
        bad_inputs: kind -> number of bad source transactions to interleave.
        max_txn_rows: the pipeline's ``max-txn-rows`` (needed for ``txn-too-large``).
        row_as_object: with ``json``, write each DATA event's ``row`` as a nested JSON object
            (the usual shape of CDC JSON) instead of a string holding it.
        maxwell: write Maxwell's JSON instead of the project's envelope (``xid`` on every row,
            ``commit`` on the last, no BEGIN/END); the pipeline reads it with
            ``source.envelope: maxwell``.
    """

    bootstrap: str
    topic: str
    workload: WorkloadConfig
    encoding: Encoding = "json"
    schema_id: int = 1
    truth_path: Path | None = None
    rate: float | None = None
    create_topic: bool = False
    progress_interval_s: float = 2.0
    flush_timeout_s: float = 60.0
    producer_config: Mapping[str, Any] = field(default_factory=dict)
    bad_inputs: Mapping[BadInputKind, int] = field(default_factory=dict)
    max_txn_rows: int | None = None
    row_as_object: bool = False
    maxwell: bool = False

    def __post_init__(self) -> None:
        """Fail fast, naming the option."""
        self.bad_input_plan()  # validates counts and max_txn_rows
        if self.encoding not in ENCODINGS:
            msg = f"encoding must be one of {ENCODINGS}, got {self.encoding!r}"
            raise DemoConfigError(msg)
        if self.rate is not None and self.rate <= 0:
            msg = f"rate must be > 0 transactions/s, got {self.rate}"
            raise DemoConfigError(msg)
        if not self.topic:
            msg = "topic must not be empty"
            raise DemoConfigError(msg)
        if self.row_as_object and self.encoding != "json":
            msg = f"row_as_object needs encoding json, got {self.encoding!r}"
            raise DemoConfigError(msg)
        if self.maxwell and (self.encoding != "json" or self.bad_inputs or self.row_as_object):
            msg = "maxwell needs encoding json, no bad input and no row_as_object"
            raise DemoConfigError(msg)

    def bad_input_plan(self) -> BadInputPlan:
        """The bad transactions to interleave (positions drawn among the created orders)."""
        wl = self.workload
        return BadInputPlan(
            counts={BadInputKind(k): n for k, n in self.bad_inputs.items()},
            partitions=wl.partitions,
            seed=wl.seed,
            slots=wl.orders,
            database=wl.database,
            max_txn_rows=self.max_txn_rows,
            max_items=wl.max_items,
            txn_prefix=wl.txn_prefix,
        )


@dataclass(frozen=True)
class SentBadTransaction:
    """A bad transaction as sent: where its dead-letter rows must appear."""

    txn: BadTransaction
    topic: str
    first_offset: int

    def to_dict(self) -> dict[str, Any]:
        """The truth file's entry."""
        return {
            "kind": self.txn.kind.value,
            "txn_id": self.txn.txn_id,
            "topic": self.topic,
            "partition": self.txn.partition,
            "first_offset": self.first_offset,
            "records": self.txn.rejected_records,
            "sent_records": len(self.txn.records),
        }


@dataclass(frozen=True)
class GenerationResult:
    """What was sent: counts, per-partition transactions, the truth, timing.

    ``counts`` and ``txns_per_partition`` are about good transactions; ``events_per_partition``
    and ``events`` count every record sent, bad ones included.
    """

    counts: WorkloadCounts
    txns_per_partition: Mapping[int, int]
    events_per_partition: Mapping[int, int]
    delivered: int
    elapsed_s: float
    truth: GroundTruth
    bad_transactions: tuple[SentBadTransaction, ...] = ()

    @property
    def transactions(self) -> int:
        """Number of transactions sent."""
        return self.counts.transactions

    @property
    def bad_events(self) -> int:
        """Number of records of bad transactions sent."""
        return sum(len(b.txn.records) for b in self.bad_transactions)

    @property
    def events(self) -> int:
        """Number of records sent, bad ones included."""
        return self.counts.events + self.bad_events


def producer_settings(config: GeneratorConfig) -> dict[str, Any]:
    """The librdkafka settings of the generator's producer."""
    settings: dict[str, Any] = {
        "bootstrap.servers": config.bootstrap,
        # A retry after a lost acknowledgement would otherwise write a batch twice or, with
        # several batches in flight, out of order; either breaks the BEGIN..END framing the
        # assembler checks (a duplicated TXN_BEGIN rejects the transaction). The broker drops
        # duplicates by (producer id, sequence number) and keeps the order.
        "enable.idempotence": True,
        # Required by idempotence, and an acknowledged event must survive a leader change.
        "acks": "all",
        # Events are tiny; a few ms of batching multiplies throughput.
        "linger.ms": 5,
    }
    settings.update(config.producer_config)
    return settings


def ensure_topic(config: GeneratorConfig, timeout_s: float = 30.0) -> int:
    """Make sure the topic exists with enough partitions; return its partition count.

    Raises:
        TopicError: the topic is missing (without ``create_topic``) or too small.
    """
    needed = config.workload.partitions
    admin = AdminClient(
        {
            "bootstrap.servers": config.bootstrap,
            # Looking at metadata must not auto-create a topic with the broker's default
            # partition count.
            "allow.auto.create.topics": False,
        }
    )
    if config.create_topic:
        futures = admin.create_topics(
            [NewTopic(config.topic, num_partitions=needed, replication_factor=1)],
            operation_timeout=timeout_s,
        )
        try:
            futures[config.topic].result(timeout=timeout_s)
            logger.info("created topic=%s partitions=%d", config.topic, needed)
        except KafkaException as e:
            error = e.args[0] if e.args else None
            if not (
                isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
            ):
                msg = f"cannot create topic {config.topic!r}: {e}"
                raise TopicError(msg) from e
    deadline = time.monotonic() + timeout_s
    while True:
        metadata = admin.list_topics(topic=config.topic, timeout=timeout_s)
        topic = metadata.topics.get(config.topic)
        if topic is not None and topic.error is None and topic.partitions:
            break
        if time.monotonic() >= deadline or not config.create_topic:
            reason = topic.error if topic is not None else "no metadata"
            msg = (
                f"topic {config.topic!r} not available on {config.bootstrap} ({reason}); "
                "create it or pass --create-topic"
            )
            raise TopicError(msg)
        time.sleep(0.2)  # a just-created topic's metadata may lag
    count = len(topic.partitions)
    if count < needed:
        msg = (
            f"topic {config.topic!r} has {count} partitions but the workload uses {needed}; "
            "use a new topic or fewer --partitions"
        )
        raise TopicError(msg)
    return count


class _Progress:
    """Logs txns, events and rate every ``interval_s`` (to stderr through logging)."""

    def __init__(self, interval_s: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval_s
        self._monotonic = monotonic
        self._start = monotonic()
        self._last = self._start

    def maybe_log(self, txns: int, events: int) -> None:
        now = self._monotonic()
        if now - self._last < self._interval:
            return
        self._last = now
        elapsed = max(now - self._start, 1e-9)
        logger.info(
            "progress txns=%d events=%d rate_txn_s=%.0f rate_ev_s=%.0f",
            txns,
            events,
            txns / elapsed,
            events / elapsed,
        )


def generate(config: GeneratorConfig, *, clock: Clock = wall_clock_ms) -> GenerationResult:
    """Send the workload to Kafka, flush, write the truth file, and say what was sent.

    Raises:
        TopicError: the topic is unusable.
        ProduceError: some events were not delivered (the truth file is not written then).
    """
    ensure_topic(config)
    workload = Workload(config.workload, clock=clock)
    plan = config.bad_input_plan()
    # The clock is asked only when there is bad input: good timestamps stay as they were.
    bad = build_bad_transactions(plan, ts_ms=clock()) if plan.total else []
    producer = Producer(producer_settings(config))
    errors: list[str] = []
    delivered = 0

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        nonlocal delivered
        if err is not None:
            errors.append(str(err))
        else:
            delivered += 1

    first_offsets: dict[int, int] = {}

    def on_first_delivery(seq: int, err: KafkaError | None, msg: Any) -> None:
        on_delivery(err, msg)
        if err is None:
            first_offsets[seq] = int(msg.offset())

    def send_bad(b: BadTransaction) -> None:
        for i, record in enumerate(b.records):
            value = encode_record(record, config.encoding, schema_id=config.schema_id)
            callback = partial(on_first_delivery, b.seq) if i == 0 else on_delivery
            _produce(producer, config.topic, b.partition, b.key, value, callback)
        events_per_partition[b.partition] = events_per_partition.get(b.partition, 0) + len(
            b.records
        )

    txns_per_partition: dict[int, int] = {}
    events_per_partition: dict[int, int] = {}
    progress = _Progress(config.progress_interval_s)
    start = time.monotonic()
    sent_txns = sent_events = 0
    for txn in interleave(workload.transactions(), bad):
        if isinstance(txn, BadTransaction):
            send_bad(txn)
            continue
        if config.rate is not None:
            # Pace by schedule, not by sleeping a fixed gap, so slow produce calls do not
            # lower the rate.
            due = start + sent_txns / config.rate
            # poll() returns early when a delivery report arrives: wait in a loop.
            while (delay := due - time.monotonic()) > 0:
                producer.poll(delay)
        if config.maxwell:
            values = maxwell_records(txn.events, xid=1000 + sent_txns)
        elif config.row_as_object:
            values = [
                json_with_row_object(e)
                if e.row is not None
                else encode_event(e, config.encoding, schema_id=config.schema_id)
                for e in txn.events
            ]
        else:
            values = [
                encode_event(e, config.encoding, schema_id=config.schema_id) for e in txn.events
            ]
        for value in values:
            _produce(producer, config.topic, txn.partition, txn.key, value, on_delivery)
        producer.poll(0)
        sent_txns += 1
        sent_events += len(values)
        txns_per_partition[txn.partition] = txns_per_partition.get(txn.partition, 0) + 1
        events_per_partition[txn.partition] = events_per_partition.get(txn.partition, 0) + len(
            values
        )
        progress.maybe_log(sent_txns, sent_events)
        if errors:
            break
    remaining = producer.flush(config.flush_timeout_s)
    elapsed = time.monotonic() - start
    if errors or remaining:
        msg = (
            f"{len(errors)} event(s) failed and {remaining} undelivered after "
            f"{config.flush_timeout_s}s to topic {config.topic!r}; first error: "
            f"{errors[0] if errors else 'flush timeout'}. Recreate the topic before rerunning "
            "(a rerun sends the same txn ids again)"
        )
        raise ProduceError(msg)
    sent_bad = tuple(SentBadTransaction(b, config.topic, first_offsets[b.seq]) for _, b in bad)
    counts = workload.counts()
    truth = GroundTruth(
        database=config.workload.database,
        tables=workload.final_rows(),
        counts=counts.to_dict(),
        meta={
            "topic": config.topic,
            "partitions": config.workload.partitions,
            "seed": config.workload.seed,
            "orders": config.workload.orders,
            "encoding": config.encoding,
        },
        dead_letters={
            "expected": expected_summary(b for _, b in bad),
            "max_txn_rows": config.max_txn_rows,
            "transactions": [s.to_dict() for s in sent_bad],
        },
    )
    if config.truth_path is not None:
        truth.write(config.truth_path)
    logger.info(
        "done txns=%d events=%d bad_txns=%d delivered=%d elapsed_s=%.2f topic=%s",
        counts.transactions,
        counts.events,
        len(sent_bad),
        delivered,
        elapsed,
        config.topic,
    )
    return GenerationResult(
        counts=counts,
        txns_per_partition=dict(sorted(txns_per_partition.items())),
        events_per_partition=dict(sorted(events_per_partition.items())),
        delivered=delivered,
        elapsed_s=elapsed,
        truth=truth,
        bad_transactions=sent_bad,
    )


def _produce(
    producer: Producer,
    topic: str,
    partition: int,
    key: bytes,
    value: bytes,
    on_delivery: Callable[[KafkaError | None, Any], None],
) -> None:
    while True:
        try:
            producer.produce(
                topic, value=value, key=key, partition=partition, on_delivery=on_delivery
            )
            return
        except BufferError:
            # The local queue is full: serve delivery reports until there is room.
            producer.poll(0.1)


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m demo.generate",
        description="Send orders-demo CDC transactions to Kafka and write the ground truth.",
    )
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers HOST:PORT")
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, required=True, help="partitions to spread over")
    p.add_argument("--orders", type=int, required=True, help="orders to create")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--encoding", choices=ENCODINGS, default="json")
    p.add_argument("--schema-id", type=int, default=1, help="id in confluent frames")
    p.add_argument("--max-items", type=int, default=5)
    p.add_argument("--update-ratio", type=float, default=0.3)
    p.add_argument("--delete-ratio", type=float, default=0.1)
    p.add_argument("--truth", type=Path, help="write the ground truth (JSON) here")
    p.add_argument("--rate", type=float, help="transactions per second (default: unpaced)")
    p.add_argument("--create-topic", action="store_true", help="create the topic if missing")
    p.add_argument("--database", default="demo", help="database named in DATA events")
    p.add_argument(
        "--maxwell",
        action="store_true",
        help="write Maxwell's JSON (xid, commit flag) instead of the project's envelope",
    )
    p.add_argument(
        "--row-as-object",
        action="store_true",
        help="json only: write each row as a nested JSON object, not a string",
    )
    p.add_argument(
        "--bad-input",
        action="append",
        default=[],
        metavar="KIND[:N]",
        help=(
            "interleave N (default 1) bad source transactions of KIND; repeatable. Kinds: "
            + ", ".join(k.value for k in BadInputKind)
        ),
    )
    p.add_argument(
        "--max-txn-rows",
        type=int,
        help="the pipeline's assembler max-txn-rows (required by --bad-input txn-too-large)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code (0 ok, 1 failure, 2 usage)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    try:
        bad_inputs: dict[BadInputKind, int] = {}
        for spec in args.bad_input:
            kind, n = parse_bad_input(spec)
            bad_inputs[kind] = bad_inputs.get(kind, 0) + n
        config = GeneratorConfig(
            bootstrap=args.bootstrap,
            topic=args.topic,
            workload=WorkloadConfig(
                orders=args.orders,
                partitions=args.partitions,
                seed=args.seed,
                max_items=args.max_items,
                update_ratio=args.update_ratio,
                delete_ratio=args.delete_ratio,
                database=args.database,
            ),
            encoding=cast(Encoding, args.encoding),
            schema_id=args.schema_id,
            truth_path=args.truth,
            rate=args.rate,
            create_topic=args.create_topic,
            bad_inputs=bad_inputs,
            max_txn_rows=args.max_txn_rows,
            row_as_object=args.row_as_object,
            maxwell=args.maxwell,
        )
    except DemoConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        result = generate(config)
    except DemoError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"sent txns={result.transactions} bad_txns={len(result.bad_transactions)} "
        f"events={result.events} "
        f"partitions={len(result.txns_per_partition)} elapsed_s={result.elapsed_s:.2f}"
        + (f" truth={config.truth_path}" if config.truth_path else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
