"""How large an open transaction the executors' heap holds (driver, at start).

An open transaction is its Kafka partition's buffered rows, inside its slot's state value and
rewritten with it (assembler/slots.py); Spark's default state store keeps every value of its
partitions in the executor heap, with a copy per loaded version: about 2.4 x the buffered bytes
were measured (docs/assembler.md).
With every partition holding a transaction at ``max-txn-bytes``, an executor needs

    partitions per executor x max-txn-bytes x 2.4   <=   half its heap

(the other half is Spark's own, the batch and the load). The static default (256 MiB) holds for
a single partition on a 1 GiB heap only, so unless ``assembler.max-txn-bytes`` is set, the
pipeline lowers it to what the heap holds, and it warns when a configured value does not fit.
``source.max-offsets-per-trigger`` counts records, not bytes (Spark's Kafka source has no byte
bound): a batch reads at most that many records times their size.

Kafka polls the size of a batch's share (app/source.py) leave each cached consumer holding what
its batch did not use of its last fetch, as Java objects: up to ``max.partition.fetch.bytes``
times ``POLL_FACTOR`` per partition. They are used only where that fits in ``POLL_HEAP_SHARE``
of the heap.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping

from app.source import KAFKA_POLL_RECORDS

log = logging.getLogger(__name__)

#: State-store bytes per buffered byte of an open transaction (measured, docs/assembler.md).
STATE_FACTOR = 2.4
#: Share of the executor heap open transactions may take.
HEAP_SHARE = 0.5
#: Heap bytes per fetched byte a poll hands over: the records' byte arrays and objects, and
#: the consumer's next fetch beside them (~3 measured at 32 partitions of ~220-byte
#: records, docs/kafka-source.md; smaller records cost more objects per byte).
POLL_FACTOR = 3.0
#: Share of the executor heap the consumers' held polls may take.
POLL_HEAP_SHARE = 0.1
#: Kafka's ``max.partition.fetch.bytes`` default.
KAFKA_FETCH_BYTES = 1_048_576
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_jvm_memory(text: str) -> int:
    """``"1g"``, ``"512m"``, ``"2048k"`` or bytes, as Spark reads ``spark.*.memory``."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", text.lower())
    if not m:
        msg = f"not a JVM memory size: {text!r}"
        raise ValueError(msg)
    return int(m.group(1)) * _UNITS[m.group(2)]


def executor_heap(master: str, conf: Mapping[str, str]) -> tuple[int, int, str]:
    """(heap bytes, executors, the setting it came from) for ``master`` and ``spark.conf``."""
    if master.startswith("local") or not master:
        # Local mode: the driver JVM is the executor (spark-submit's --driver-memory).
        key = "spark.driver.memory"
        return parse_jvm_memory(conf.get(key, "1g")), 1, key
    key = "spark.executor.memory"
    executors = int(conf.get("spark.executor.instances", "1") or 1)
    return parse_jvm_memory(conf.get(key, "1g")), max(1, executors), key


def txn_bytes_budget(heap: int, executors: int, partitions: int) -> int:
    """The largest open transaction per partition the heap holds with all of them open."""
    groups = max(1, math.ceil(max(1, partitions) / executors))
    return int(heap * HEAP_SHARE / (groups * STATE_FACTOR))


def held_poll_records(
    share: int, heap: int, executors: int, partitions: int, fetch_bytes: int
) -> int:
    """``share`` records a poll where the heap holds a fetch per partition, else Kafka's 500."""
    groups = math.ceil(max(1, partitions) / executors)
    if share <= KAFKA_POLL_RECORDS or groups * fetch_bytes * POLL_FACTOR <= heap * POLL_HEAP_SHARE:
        return share
    return KAFKA_POLL_RECORDS
