from __future__ import annotations

import pytest

from benchmarks.run import ceiling_ratios, plan_steps

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


def test_plan_names_the_source_and_drops_skipped_parts() -> None:
    labels = [label for label, _ in plan_steps({"sweeps", "latency", "state", "steady"})]
    assert labels[:4] == [
        "start broker + emulator",
        "ceilings: prefill",
        "broker consume",
        "emulator ingest",
    ]
    assert "pipeline (kafka)" in labels
    assert labels[-2:] == ["assembler", "catchup (kafka)"]
