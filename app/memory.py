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
from typing import NamedTuple

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
#: Below this a computed ``max-txn-bytes`` dead-letters nearly every transaction: the start
#: warns, naming the memory setting (a bare number read in the wrong unit is the usual cause).
MIN_TXN_BUDGET = 2**20
_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_MIB = 2**20
# Spark's SparkMasterRegex.LOCAL_CLUSTER_REGEX: local-cluster[workers, cores, MiB per worker].
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*]")


class ExecutorHeap(NamedTuple):
    """The heap that holds the state store, and where it came from (for the start's logs)."""

    size: int  # bytes per executor
    executors: int
    key: str  # the Spark setting it came from
    value: str  # that setting as given ("" = Spark's default)

    def describe(self) -> str:
        """``spark.executor.memory='4096' (4096 MiB)``, for logs."""
        given = repr(self.value) if self.value else "(default)"
        return f"{self.key}={given} ({self.size // _MIB} MiB)"


def parse_jvm_memory(text: str, bare_unit: int = 1) -> int:
    """``"1g"``, ``"512m"``, ``"2048k"`` in bytes; a bare number counts ``bare_unit`` bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgtp]?)b?\s*", text.lower())
    if not m:
        msg = f"not a JVM memory size: {text!r}"
        raise ValueError(msg)
    return int(m.group(1)) * (_UNITS[m.group(2)] if m.group(2) else bare_unit)


def executor_heap(master: str, conf: Mapping[str, str]) -> ExecutorHeap:
    """The executors' heap for ``master`` and ``spark.conf``, read as Spark 4 reads it.

    A bare number is bytes where it becomes a JVM's ``-Xmx`` (the driver, the executor in
    local mode) or goes through ``Utils.memoryStringToMb`` (standalone and local-cluster:
    ``ResourceProfile`` takes ``SparkContext.executorMemoryInMb`` there), and MiB where Spark
    reads the ``spark.executor.memory`` entry (YARN, Kubernetes). Executors get whole MiB.
    """
    cluster = _LOCAL_CLUSTER.fullmatch(master.strip())
    if not cluster and (master.startswith("local") or not master):
        # Local mode: the driver JVM is the executor, its -Xmx spark-submit's --driver-memory.
        key = "spark.driver.memory"
        value = conf.get(key, "")
        return ExecutorHeap(parse_jvm_memory(value or "1g"), 1, key, value)
    key = "spark.executor.memory"
    value = conf.get(key, "")
    bare_unit = 1 if cluster or master.startswith("spark://") else _MIB
    size = parse_jvm_memory(value or "1g", bare_unit) // _MIB * _MIB
    if cluster:
        # One executor per worker JVM; the worker's MiB only bounds it (Spark refuses more).
        executors = int(cluster.group(1))
    else:
        executors = int(conf.get("spark.executor.instances", "1") or 1)
    return ExecutorHeap(size, max(1, executors), key, value)


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
