"""StarRocks' own client against the emulator: the released Flink connector, unchanged.

The peer's per-table build (``make peer``: flink-connector-starrocks 1.2.10, the newest release
on Maven Central) drives the emulator's single-table transaction API (begin, load, prepare,
commit per table) as it drives a real StarRocks. If it cannot load the orders demo workload
whole through the emulator, the emulator is wrong, and so may be our sink (docs/peer.md).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.peer import PEER_DIR, Harness, mode_check, parse_args
from devstack.stack import LocalStack

pytestmark = pytest.mark.integration

JAR = PEER_DIR / "target" / "per-table" / "flink-starrocks-peer.jar"


def test_the_released_starrocks_connector_loads_the_demo_through_the_emulator(
    tmp_path: Path,
) -> None:
    assert JAR.is_file(), f"{JAR} is missing: make peer (make test builds it)"
    args = parse_args(["--workdir", str(tmp_path), "--orders", "300", "--timeout", "120"])
    with LocalStack(tmp_path / "stack") as stack:
        harness = Harness(stack, tmp_path, args.parallelism, args.checkpoint_ms)
        try:
            result = mode_check(harness, args)
        finally:
            harness.kill_leftovers()
    log = (tmp_path / "peer-check" / "peer.log").read_text(errors="replace")
    assert result["passed"], (result["verdict"], log[-4000:])
    # The connector's own log of its requests: each table through the transaction API, every
    # transaction it began prepared and committed.
    begun = re.findall(r"Transaction start, db: demo, table: (\w+)", log)
    assert set(begun) == {"orders", "order_items"}, begun
    assert re.search(r"PUT http://[\d.:]+/api/transaction/load", log), "no transaction load"
    assert len(re.findall(r"Transaction prepared, label", log)) == len(begun)
    assert len(re.findall(r"Transaction committed, la", log)) == len(begun)
    assert not re.search(r"\bERROR\b", log), [ln for ln in log.splitlines() if "ERROR" in ln][:5]
