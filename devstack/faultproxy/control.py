"""Typed client for the proxy's ``/__faults`` endpoint (tests, demos, a shell via curl)."""

from __future__ import annotations

from typing import Any

import requests

from devstack.faultproxy.errors import ControlError, FaultRuleError
from devstack.faultproxy.rules import ANY, FaultKind, FaultRule, Hop, Op


class FaultProxyControl:
    """Arms faults on a running proxy and reads its counters.

    Every method is one HTTP call to ``<base_url>/__faults``; ``base_url`` is the FE listener
    or the ``--control-port`` listener. ``op`` is an :class:`Op` value or ``"any"``; ``hop``
    restricts a rule to the FE listener or to BE listeners. ``count=None`` keeps the rule
    armed until :meth:`reset`.
    """

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        # No session: control calls must not share a keep-alive connection that a fault
        # could reset, and they are rare.

    def add(self, rule: FaultRule) -> int:
        """Arm one rule; returns its id."""
        reply = self._call("POST", "/__faults", rule.to_json())
        return int(reply["ids"][0])

    def add_raw(self, rule: dict[str, Any]) -> list[int]:
        """Arm a rule given in its wire form (validated by the proxy, not here); returns ids.

        Raises:
            FaultRuleError: the proxy rejected it (HTTP 400).
        """
        return [int(i) for i in self._call("POST", "/__faults", rule)["ids"]]

    def http_error(
        self,
        op: Op | str = ANY,
        *,
        status: int = 503,
        body: str = "",
        count: int | None = 1,
        hop: Hop = Hop.ANY,
    ) -> int:
        """Answer ``status``/``body`` without forwarding (the server never sees the request)."""
        rule = FaultRule(FaultKind.HTTP_ERROR, str(op), count, hop, status=status, body=body)
        return self.add(rule)

    def delay(
        self, op: Op | str, seconds: float, *, count: int | None = 1, hop: Hop = Hop.ANY
    ) -> int:
        """Sleep ``seconds`` before forwarding (the request is still forwarded afterwards)."""
        return self.add(FaultRule(FaultKind.DELAY, str(op), count, hop, seconds=seconds))

    def drop_response(self, op: Op | str, *, count: int | None = 1, hop: Hop = Hop.ANY) -> int:
        """Forward, let the server apply it, then close the connection without answering."""
        return self.add(FaultRule(FaultKind.DROP_RESPONSE, str(op), count, hop))

    def reset_before(self, op: Op | str, *, count: int | None = 1, hop: Hop = Hop.ANY) -> int:
        """Reset the client connection (RST) before forwarding: nothing reaches the server."""
        return self.add(FaultRule(FaultKind.RESET_BEFORE, str(op), count, hop))

    def jitter(
        self,
        min_ms: int,
        max_ms: int,
        *,
        count: int | None,
        op: Op | str = ANY,
        hop: Hop = Hop.ANY,
    ) -> int:
        """Sleep uniformly in ``[min_ms, max_ms]`` before each of the next ``count`` requests."""
        rule = FaultRule(FaultKind.JITTER, str(op), count, hop, min_ms=min_ms, max_ms=max_ms)
        return self.add(rule)

    def reset(self) -> None:
        """Disarm every rule and zero the counters."""
        self._call("POST", "/__faults/reset", None)

    def snapshot(self) -> dict[str, Any]:
        """Armed rules, ``injected``/``forwarded`` counters and the proxy's listener ports."""
        return self._call("GET", "/__faults", None)

    def injected(self, kind: FaultKind | str, op: Op | str | None = None) -> int:
        """How many times ``kind`` was injected (for ``op``, or over all ops)."""
        by_op: dict[str, int] = self.snapshot()["injected"].get(str(kind), {})
        return sum(by_op.values()) if op is None else by_op.get(str(op), 0)

    def forwarded(self, op: Op | str | None = None, hop: Hop | None = None) -> int:
        """How many requests reached an upstream (for ``op`` / ``hop``, or all)."""
        counts: dict[str, dict[str, int]] = self.snapshot()["forwarded"]
        total = 0
        for hop_name, by_op in counts.items():
            if hop is not None and hop_name != hop.value:
                continue
            total += sum(by_op.values()) if op is None else by_op.get(str(op), 0)
        return total

    def _call(self, method: str, path: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        url = self.base_url + path
        try:
            r = requests.request(method, url, json=payload, timeout=self.timeout)
        except requests.RequestException as e:
            msg = f"fault proxy control {method} {url} failed: {e}; is the proxy running?"
            raise ControlError(msg) from e
        if r.status_code == 400:
            msg = f"fault proxy rejected {payload!r}: {r.text.strip()}"
            raise FaultRuleError(msg)
        if r.status_code != 200:
            msg = f"fault proxy control {method} {url}: HTTP {r.status_code} {r.text.strip()}"
            raise ControlError(msg)
        data: dict[str, Any] = r.json()
        return data
