"""The sink against the other StarRocks behaviours the audit found (spec §4.3a/§4.3b).

The default emulator registers a multi-table label at commit (4.0); here it registers at the
first load (newest) and keeps a committed label COMMITTED before VISIBLE (publish).
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.starrocks.launcher import start_emulator

from .conftest import DB, batch, create_schema, make_sink, order_txn, table_rows

pytestmark = pytest.mark.integration

QID = "dddddddd-0000-0000-0000-000000000000"


class SimulatedCrash(BaseException):
    """Like kill -9."""


@pytest.fixture
def newest(tmp_path: Path) -> Iterator[Any]:
    proc = start_emulator(
        tmp_path / "sr",
        stderr_path=tmp_path / "sr.log",
        extra_args=["--multi-registration", "first_load", "--publish-gap-ms", "400"],
    )
    try:
        create_schema(proc.handle)
        yield proc.handle
    finally:
        proc.stop()


def test_crash_after_load_recovers_with_first_load_registration_and_publish_gap(newest, spark):
    def crash(point: str) -> None:
        if point == "after_load":
            raise SimulatedCrash(point)

    rows = order_txn(1) + order_txn(2, partition=1, items=3)
    crashed = make_sink(newest, query_id=QID, fault_hook=crash)
    crashed.open()
    with pytest.raises(SimulatedCrash):
        crashed.write_batch(batch(spark, rows), 1)
    assert newest.control.load_states(DB) == {f"t-{QID}-1-0": "PREPARE"}  # the first load
    result = make_sink(newest, query_id=QID).write_batch(batch(spark, rows), 1)
    assert (result.outcome, result.attempt) == ("committed", 1)
    assert len(table_rows(newest, "order_items")) == 5
    replay = make_sink(newest, query_id=QID).write_batch(batch(spark, rows), 1)
    assert replay.outcome == "already_applied"
