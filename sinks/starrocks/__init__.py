"""StarRocks sink: Stream Load transaction API, exactly once, atomic per micro-batch.

The protocol core (:mod:`sinks.starrocks.committer`) imports neither Spark nor HTTP; the
Spark adapter and the HTTP client are loaded only when :class:`StarRocksSink` is asked for.

Citations in this package: ``spec §N`` is ``docs/starrocks-txn-protocol.md`` §N (the wire
protocol, checked against StarRocks' source), ``DESIGN.md §N`` is ``docs/DESIGN.md`` §N.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sinks.starrocks.config import Secret, StarRocksSinkConfig

if TYPE_CHECKING:
    from sinks.starrocks.sink import BatchResult, StarRocksSink

__all__ = ["BatchResult", "Secret", "StarRocksSink", "StarRocksSinkConfig"]


def __getattr__(name: str) -> Any:
    # Lazy: importing the committer (or the config) must not pull in requests and pymysql.
    if name in ("BatchResult", "StarRocksSink"):
        from sinks.starrocks import sink

        return getattr(sink, name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
