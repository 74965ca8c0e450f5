"""``benchmarks.e2e.batch_breakdown``: a run's batch costs from the pipeline's log lines."""

from __future__ import annotations

from pathlib import Path

from benchmarks.e2e import batch_breakdown

_TS = "2026-12-07 22:04:14,961 level=INFO"


def _log(tmp_path: Path, triggers: list[int]) -> Path:
    lines = []
    for batch_id, trigger in enumerate(triggers):
        lines += [
            f"{_TS} logger=sinks.starrocks.sink starrocks batch batch_id={batch_id} "
            "outcome=committed attempt=0 commit_ms=30 total_ms=200",
            f"{_TS} logger=app.pipeline batch done batch_id={batch_id} rows=10 sink_ms=200 "
            "total_ms=210 skipped=False",
            f"{_TS} logger=app.progress batch timing batch_id={batch_id} addBatch_ms=250 "
            f"triggerExecution_ms={trigger} walCommit_ms=9",
        ]
    path = tmp_path / "pipeline.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sums_and_the_warm_half(tmp_path: Path) -> None:
    # The first batch (the start) and the cold ones do not reach the warm median.
    out = batch_breakdown(_log(tmp_path, [3000, 900, 800, 400, 380, 500]))
    assert out["batches"] == 6
    assert out["trigger_ms"] == 5980
    assert out["add_batch_ms"] == 1500
    assert out["commit_ms"] == 180
    assert out["sink_ms"] == 1200
    assert out["foreach_ms"] == 1260
    assert out["warm_trigger_ms"] == 400  # median of 400, 380, 500


def test_one_batch_has_no_warm_half(tmp_path: Path) -> None:
    out = batch_breakdown(_log(tmp_path, [3000]))
    assert out["trigger_ms"] == 3000
    assert out["warm_trigger_ms"] == 0.0


def test_missing_log(tmp_path: Path) -> None:
    out = batch_breakdown(tmp_path / "absent.log")
    assert out["batches"] == 0
    assert out["warm_trigger_ms"] == 0.0
