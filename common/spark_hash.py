"""Spark's hash partitioning, reproduced on the driver to choose keys that do not collide.

Spark puts a row of ``repartition(n, key)`` (and a group of a stateful operator) in partition
``pmod(murmur3_x86_32(key, seed 42), n)``. Keyed by a small index, two indexes share a
partition about as often as not, and a task then does two tasks' work while a core idles.
:func:`partition_keys` gives, for each partition, an INT key that Spark sends there.
"""

from __future__ import annotations


def partition_keys(n: int) -> list[int]:
    """For each partition ``i`` of ``n``, the smallest INT key Spark's hashing sends to ``i``."""
    keys: dict[int, int] = {}
    candidate = 0
    while len(keys) < n:
        keys.setdefault(spark_hash_int(candidate) % n, candidate)
        candidate += 1
    return [keys[i] for i in range(n)]


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of one INT column: ``Murmur3_x86_32.hashInt`` (a signed int32)."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k1 = (value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF
    k1 = rotl(k1, 15) * 0x1B873593 & 0xFFFFFFFF
    h1 = rotl(seed ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4  # the input's length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1
