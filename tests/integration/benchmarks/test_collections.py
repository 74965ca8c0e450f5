"""``spark_queries``' reading of the driver JVM's collectors, on the session's real JVM."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.spark_queries import collections_between, full_collections, jvm_collections

pytestmark = pytest.mark.integration


def test_a_full_collection_of_the_driver_jvm_is_counted_as_one(spark: Any) -> None:
    before = jvm_collections()
    assert before, "no collector read from the session's JVM"
    spark._jvm.java.lang.System.gc()  # a full collection, whichever collector runs
    during = collections_between(before, jvm_collections())
    count, ms = full_collections(during)
    assert count >= 1
    assert ms >= 0
    assert set(during) == set(before)
