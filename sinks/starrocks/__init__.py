"""StarRocks sink: Stream Load transaction API, exactly once, atomic per micro-batch."""

from sinks.starrocks.config import Secret, StarRocksSinkConfig
from sinks.starrocks.sink import BatchResult, StarRocksSink

__all__ = ["BatchResult", "Secret", "StarRocksSink", "StarRocksSinkConfig"]
