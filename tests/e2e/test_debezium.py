"""PostgreSQL -> Debezium -> Kafka -> pipeline (source.envelope=debezium) -> StarRocks emulator.

The orders workload runs in Postgres as real multi-statement transactions (an order with its
items, an order updated with all its items, an order deleted with its items); the verifier
watches the emulator's invariants throughout; the pipeline is killed with SIGKILL mid-run and
restarted; then PostgreSQL crashes (SIGKILL to every server process) and recovers from its WAL
while Debezium reconnects on its own; last Kafka Connect is killed, between two offset flushes,
so that it re-sends transactions. At the end the emulator must equal Postgres' own final
state, row by row, with each committed row change loaded once. The same run as
``make demo-debezium`` (``devstack/demo_debezium.py``), smaller.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.demo_debezium import run_demo

pytestmark = pytest.mark.e2e


def test_postgres_transactions_exactly_once_through_kills_of_pipeline_postgres_and_connect(
    tmp_path: Path,
) -> None:
    result = run_demo(tmp_path / "demo", transactions=120, rate=10.0)
    print(result)
    assert result["examples"] == []
    assert (result["missing"], result["extra"]) == (0, 0)
    assert result["rows_in_postgres"] > 50
    assert result["watch_checks"] > 10, "the watch must actually have looked"
    assert result["partial_visibility_observations"] == 0
    # Connect re-sent transactions, and none of them was applied twice or dead-lettered.
    assert result["transactions_re_sent_by_connect"] > 0
    assert result["rows_applied_in_starrocks"] == result["row_changes_in_postgres"]
    assert result["dead_letter_records"] == 0
    # PostgreSQL crashed inside a transaction, which it rolled back on recovery (so it is not
    # in the count above), and the transactions after its crash reached StarRocks.
    assert result["postgres_kill_9"] == 1
    assert result["transactions_cut_by_postgres_crash"] == 1
    assert result["begin_to_visible_ms_across_postgres_crash"]["n"] > 0
    # Transactions waited out the kill, and others were applied by the restarted pipeline.
    assert result["begin_to_visible_ms_across_the_kill"]["n"] > 0
    assert result["begin_to_visible_ms_running"]["n"] > 0
    log = (tmp_path / "demo" / "pipeline.log").read_text()
    assert log.count("query started") == 2  # killed once, restarted from the checkpoint
