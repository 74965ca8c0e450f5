"""Fault rules and the thread-safe book that arms, consumes and counts them.

Pure core, no sockets: the HTTP handler asks the book, per request, "what do I do to this
one?" in two places (before forwarding, and after the upstream answered) and does it.

Selection, per request (documented in ``docs/fault-proxy.md``):

1. at most one ``jitter`` rule matching (op, hop) is consumed and its random sleep applied;
2. then the first armed rule, in insertion order, among ``delay`` / ``http_error`` /
   ``reset_before`` matching (op, hop) is consumed and applied before forwarding;
3. after the upstream answered with anything but a redirect, the first matching
   ``drop_response`` rule is consumed. A 307 never consumes it, so "commit applied but response
   lost" always hits the node that really applied the operation, as in the emulator.
"""

from __future__ import annotations

import random
import re
import threading
from collections import defaultdict
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from devstack.faultproxy.errors import FaultRuleError


class Op(StrEnum):
    """What a request does, read from its path (spec §2)."""

    BEGIN = "begin"
    LOAD = "load"
    PREPARE = "prepare"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    GET_LOAD_STATE = "get_load_state"
    STREAM_LOAD = "stream_load"
    OTHER = "other"


#: Rule ``op`` value that matches every request.
ANY = "any"


class Hop(StrEnum):
    """Which listener a request came in on: the FE one, or one that stands for a BE."""

    ANY = "any"
    FE = "fe"
    BE = "be"


class FaultKind(StrEnum):
    """What a rule does to the request it hits."""

    HTTP_ERROR = "http_error"
    DELAY = "delay"
    DROP_RESPONSE = "drop_response"
    RESET_BEFORE = "reset_before"
    JITTER = "jitter"


_PRE = (FaultKind.DELAY, FaultKind.HTTP_ERROR, FaultKind.RESET_BEFORE)
_TXN_PATH = re.compile(r"^/api/transaction/([A-Za-z_]+)/?$")
_STATE_PATH = re.compile(r"^/api/[^/]+/get_load_state/?$")
_STREAM_PATH = re.compile(r"^/api/[^/]+/[^/]+/_stream_load/?$")


def classify_path(path: str) -> Op:
    """The operation of a request path (query string excluded); ``OTHER`` if none.

    Transaction ops are case-insensitive, as the FE registers them (spec §1).
    """
    m = _TXN_PATH.match(path)
    if m:
        try:
            return Op(m.group(1).lower())
        except ValueError:
            return Op.OTHER
    if _STATE_PATH.match(path):
        return Op.GET_LOAD_STATE
    if _STREAM_PATH.match(path):
        return Op.STREAM_LOAD
    return Op.OTHER


@dataclass(frozen=True)
class FaultRule:
    """One armed fault.

    Attributes:
        kind: what to do.
        op: an :class:`Op` value or ``"any"``.
        count: how many requests it hits; ``None`` = until ``reset``.
        hop: restrict to the FE listener or to BE listeners.
        status: HTTP status for ``http_error``.
        body: response body for ``http_error``.
        seconds: sleep for ``delay``.
        min_ms: lower bound of the ``jitter`` sleep.
        max_ms: upper bound of the ``jitter`` sleep.
    """

    kind: FaultKind
    op: str = ANY
    count: int | None = 1
    hop: Hop = Hop.ANY
    status: int = 503
    body: str = ""
    seconds: float = 0.0
    min_ms: int = 0
    max_ms: int = 0

    def __post_init__(self) -> None:
        if self.op != ANY and self.op not in {o.value for o in Op}:
            msg = f"fault op {self.op!r}: expected 'any' or one of {[o.value for o in Op]}"
            raise FaultRuleError(msg)
        if self.count is not None and self.count < 1:
            msg = f"fault count {self.count}: must be >= 1, or null for 'until reset'"
            raise FaultRuleError(msg)
        if self.kind is FaultKind.HTTP_ERROR and not 100 <= self.status <= 599:
            msg = f"http_error status {self.status}: must be an HTTP status (100..599)"
            raise FaultRuleError(msg)
        if self.seconds < 0:
            msg = f"delay seconds {self.seconds}: must be >= 0"
            raise FaultRuleError(msg)
        if not 0 <= self.min_ms <= self.max_ms:
            msg = f"jitter {self.min_ms}..{self.max_ms} ms: need 0 <= min_ms <= max_ms"
            raise FaultRuleError(msg)

    def matches(self, op: Op, hop: Hop) -> bool:
        """Whether this rule applies to a request of ``op`` arriving on ``hop``."""
        return (self.op in (ANY, op.value)) and (self.hop in (Hop.ANY, hop))

    def to_json(self) -> dict[str, Any]:
        """The wire form (``POST /__faults`` accepts exactly this)."""
        d = asdict(self)
        d["kind"] = self.kind.value
        d["hop"] = self.hop.value
        return d

    @classmethod
    def from_json(cls, data: object) -> FaultRule:
        """Parse and validate one rule object.

        Raises:
            FaultRuleError: not an object, unknown field, or a bad value.
        """
        if not isinstance(data, dict):
            msg = f"fault rule must be a JSON object, got {type(data).__name__}"
            raise FaultRuleError(msg)
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            msg = f"unknown fault rule field(s) {sorted(unknown)}; known: {sorted(known)}"
            raise FaultRuleError(msg)
        try:
            kind = FaultKind(data["kind"])
            hop = Hop(data.get("hop", Hop.ANY.value))
        except KeyError as e:
            msg = "fault rule needs 'kind'"
            raise FaultRuleError(msg) from e
        except ValueError as e:
            msg = (
                f"bad kind/hop in {data!r}: kinds {[k.value for k in FaultKind]}, "
                f"hops {[h.value for h in Hop]}"
            )
            raise FaultRuleError(msg) from e
        count = data.get("count", 1)
        try:
            return cls(
                kind=kind,
                op=str(data.get("op", ANY)),
                count=None if count is None else int(count),
                hop=hop,
                status=int(data.get("status", 503)),
                body=str(data.get("body", "")),
                seconds=float(data.get("seconds", 0.0)),
                min_ms=int(data.get("min_ms", 0)),
                max_ms=int(data.get("max_ms", 0)),
            )
        except (TypeError, ValueError) as e:
            msg = f"bad value in fault rule {data!r}: {e}"
            raise FaultRuleError(msg) from e


@dataclass
class _Armed:
    id: int
    rule: FaultRule
    remaining: int | None


class FaultBook:
    """Armed rules plus counters of what was injected and forwarded; safe across threads."""

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._armed: list[_Armed] = []
        self._next_id = 1
        self._injected: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._forwarded: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        # Jitter only needs to be irregular, not unpredictable.
        self._random = random.Random(seed)

    def add(self, rule: FaultRule) -> int:
        """Arm ``rule``; returns its id (shown by :meth:`snapshot`)."""
        with self._lock:
            rid = self._next_id
            self._next_id += 1
            self._armed.append(_Armed(rid, rule, rule.count))
            return rid

    def reset(self) -> None:
        """Disarm every rule and zero every counter."""
        with self._lock:
            self._armed.clear()
            self._injected.clear()
            self._forwarded.clear()

    def take_jitter(self, op: Op, hop: Hop) -> float:
        """Consume one matching jitter rule; returns the seconds to sleep (0 if none)."""
        with self._lock:
            armed = self._take_locked((FaultKind.JITTER,), op, hop)
            if armed is None:
                return 0.0
            return self._random.uniform(armed.min_ms, armed.max_ms) / 1000.0

    def take_pre(self, op: Op, hop: Hop) -> FaultRule | None:
        """Consume the first matching delay / http_error / reset_before rule, if any."""
        with self._lock:
            return self._take_locked(_PRE, op, hop)

    def take_post(self, op: Op, hop: Hop) -> FaultRule | None:
        """Consume the first matching drop_response rule (call only for a final answer)."""
        with self._lock:
            return self._take_locked((FaultKind.DROP_RESPONSE,), op, hop)

    def count_forwarded(self, op: Op, hop: Hop) -> None:
        """Record that a request was sent upstream."""
        with self._lock:
            self._forwarded[hop.value][op.value] += 1

    def snapshot(self) -> dict[str, Any]:
        """``{"rules": [...], "injected": {kind: {op: n}}, "forwarded": {hop: {op: n}}}``."""
        with self._lock:
            return {
                "rules": [
                    {"id": a.id, "remaining": a.remaining, **a.rule.to_json()} for a in self._armed
                ],
                "injected": {k: dict(v) for k, v in self._injected.items()},
                "forwarded": {k: dict(v) for k, v in self._forwarded.items()},
            }

    def _take_locked(self, kinds: tuple[FaultKind, ...], op: Op, hop: Hop) -> FaultRule | None:
        for armed in self._armed:
            if armed.rule.kind in kinds and armed.rule.matches(op, hop):
                if armed.remaining is not None:
                    armed.remaining -= 1
                    if armed.remaining == 0:
                        self._armed.remove(armed)
                self._injected[armed.rule.kind.value][op.value] += 1
                return armed.rule
        return None
