"""A ``TxnApi`` wrapper that records the sink's FE calls, injected from outside the product.

Wrap the API the sink hands its ``instrument(batch_id, api, load_job)`` hook (or any
``TxnApi``) to see which calls a batch makes: the tests of the fresh-batch path and
``benchmarks.sink_protocol`` count them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sinks.starrocks.txnapi import TxnApi


class RecordedApi:
    """A ``TxnApi`` that appends the name of every call to ``calls``, then makes it."""

    def __init__(self, inner: TxnApi, calls: list[str]) -> None:
        self._inner = inner
        self.calls = calls

    def __getattr__(self, name: str) -> Callable[..., Any]:
        call = getattr(self._inner, name)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return call(*args, **kwargs)

        return recorded
