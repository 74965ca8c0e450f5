"""Test builders: events, records and a fake of the adapter's state handling."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable, Sequence

from assembler import (
    AssemblerSettings,
    Event,
    OutputRow,
    PartitionState,
    Policy,
    SourceRecord,
    Step,
    TransactionAssembler,
    Violation,
    encode_event,
)

TOPIC = "cdc"


def begin(txn: str, ts: int | None = None) -> Event:
    return Event(txn, "TXN_BEGIN", source_ts_ms=ts)


def data(
    txn: str,
    key: int = 1,
    table: str = "orders",
    op: str | None = None,
    ts: int | None = None,
    db: str = "shop",
) -> Event:
    return Event(txn, "DATA", db, table, op, json.dumps({"id": key}), ts)


def end(txn: str, count: int | None = None, ts: int | None = None) -> Event:
    return Event(txn, "TXN_END", source_ts_ms=ts, event_count=count)


def txn(txn_id: str, n: int, count: bool = True) -> list[Event]:
    """BEGIN, ``n`` DATA, END (with event_count when ``count``)."""
    return [
        begin(txn_id),
        *(data(txn_id, key=i) for i in range(n)),
        end(txn_id, n if count else None),
    ]


def records(
    items: Sequence[Event | bytes | None],
    start: int = 0,
    partition: int = 0,
    topic: str = TOPIC,
    encoding: str = "json",
) -> list[SourceRecord]:
    """Records at consecutive offsets from ``start``; bytes/None are raw values."""
    out = []
    for i, item in enumerate(items):
        value = encode_event(item, encoding) if isinstance(item, Event) else item  # type: ignore[arg-type]
        out.append(SourceRecord(topic, partition, start + i, value))
    return out


def settings(
    policy: Policy = Policy.REJECT,
    only: Violation | None = None,
    **kwargs: int,
) -> AssemblerSettings:
    """Settings with ``policy`` for ``only`` (or every violation)."""
    policies = {v: policy for v in Violation if only is None or v is only}
    return AssemblerSettings(policies=policies, **kwargs)  # type: ignore[arg-type]


def roundtrip(state: PartitionState) -> PartitionState:
    """What Spark does to the state between calls: tuple -> storage -> tuple."""
    return PartitionState.from_tuple(pickle.loads(pickle.dumps(state.to_tuple())))


class Driver:
    """Fake adapter: one partition's state kept between calls, round-tripped each time."""

    def __init__(self, asm: TransactionAssembler | None = None) -> None:
        self.asm = asm or TransactionAssembler(AssemblerSettings())
        self.state: PartitionState | None = None
        self.steps: list[Step] = []

    def feed(self, recs: Iterable[SourceRecord], now_ms: int = 0) -> list[OutputRow]:
        step = self.asm.process(self.state, recs, now_ms)
        self.state = roundtrip(step.state)
        self.steps.append(step)
        return step.outputs

    def expire(self, now_ms: int) -> list[OutputRow]:
        assert self.state is not None
        step = self.asm.expire(self.state, now_ms)
        self.state = roundtrip(step.state)
        self.steps.append(step)
        return step.outputs


def rows(out: Iterable[OutputRow]) -> list[OutputRow]:
    return [r for r in out if r.kind == "ROW"]


def rejects(out: Iterable[OutputRow]) -> list[OutputRow]:
    return [r for r in out if r.kind == "REJECT"]
