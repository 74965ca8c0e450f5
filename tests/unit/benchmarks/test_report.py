from __future__ import annotations

import pytest

from benchmarks.report import side_by_side
from benchmarks.run import ceiling_ratios

pytestmark = pytest.mark.unit


def runs(pipeline: float, bare: float, cpu: float) -> dict[str, dict[str, float]]:
    return {
        "broker": {"rows_per_s": 100_000.0},
        "bare_stateful": {"rows_per_s": bare, "rows_per_cpu_s": bare / 2},
        "pipeline": {"rows_per_s": pipeline, "rows_per_cpu_s": cpu},
    }


def test_ratios_are_the_pipeline_over_each_other_run() -> None:
    res = ceiling_ratios(runs(5_000, 10_000, 2_000))
    assert res["ratios"] == {"broker": 0.05, "bare_stateful": 0.5}
    assert res["ratios_cpu"] == {"bare_stateful": 0.4}


def test_ratios_without_a_pipeline_run_are_empty() -> None:
    res = ceiling_ratios({"broker": {"rows_per_s": 1.0}})
    assert res["ratios"] == {}


def test_side_by_side_puts_sources_in_columns_with_their_quotient() -> None:
    md = side_by_side(
        {
            "kafka": ceiling_ratios(runs(6_000, 10_000, 3_000)),
            "cdc-kafka": ceiling_ratios(runs(4_000, 10_000, 2_000)),
        }
    )
    assert md[0] == (
        "| | JVM source (`kafka`) | old Python source (`cdc-kafka`) | kafka ÷ cdc-kafka |"
    )
    assert "| **pipeline** rows/s | 6,000 | 4,000 | 1.50 |" in md
    assert "| pipeline ÷ bare applyInPandasWithState (target >= 0.7) | 0.60 | 0.40 | 1.50 |" in md
    # Runs neither source has are left out (no pass-through here).
    assert not any(line.startswith("| pass-through") for line in md)
