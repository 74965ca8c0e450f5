from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.peer import side_by_side
from benchmarks.report import write_report
from benchmarks.run import (
    ceiling_ratios,
    flat_summary,
    median_round,
    own_costs,
    plan_steps,
    steady_own_us_per_row,
    steady_us_per_record,
)
from benchmarks.spark_queries import collections_between, full_collections

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


def test_the_assembler_alone_bounds_the_pipeline_ratios() -> None:
    res = ceiling_ratios(
        {
            **runs(5_000, 10_000, 2_000),
            "passthrough": {"rows_per_s": 8_000.0},
            "source_assembler": {"rows_per_s": 6_000.0},
        }
    )
    assert res["assembler_bounds"] == {"bare_stateful": 0.6, "passthrough": 0.75}
    assert ceiling_ratios(runs(5_000, 10_000, 2_000))["assembler_bounds"] == {}


def test_plan_names_the_source_and_drops_skipped_parts() -> None:
    labels = [label for label, _ in plan_steps({"sweeps", "flat", "latency", "state", "steady"})]
    assert labels[:4] == [
        "start broker + emulator",
        "ceilings: prefill",
        "broker consume",
        "emulator ingest",
    ]
    assert "pipeline (kafka)" in labels
    assert labels[-4:] == ["assembler", "catchup (kafka)", "idle (kafka)", "peer (kafka)"]
    assert "idle (kafka)" not in [label for label, _ in plan_steps({"idle"})]
    assert "peer (kafka)" not in [label for label, _ in plan_steps({"peer"})]
    everything = [label for label, _ in plan_steps(set())]
    assert everything.index("sweeps (kafka)") + 1 == everything.index("flat (kafka)")


def test_each_query_keeps_its_median_round_and_every_round_ratio() -> None:
    pipe = median_round([{"rows_per_s": r, "batches": i} for i, r in enumerate((30.0, 10.0, 20.0))])
    bare = median_round([{"rows_per_s": r} for r in (60.0, 40.0, 50.0)])
    assert (pipe["rows_per_s"], pipe["batches"]) == (20.0, 2)
    res = ceiling_ratios({"pipeline": pipe, "bare_stateful": bare})
    assert res["ratios"] == {"bare_stateful": 0.4}
    assert res["round_ratios"] == {"bare_stateful": [0.5, 0.25, 0.4]}


def test_plan_repeats_the_ceiling_queries_each_round() -> None:
    labels = [label for label, _ in plan_steps(set(), rounds=3)]
    assert labels.count("pipeline (kafka), round 3/3") == 1
    assert labels.count("pipeline_load_job (kafka), round 3/3") == 1
    assert labels.count("pipeline_writes_off (kafka), round 3/3") == 1
    assert sum(" round " in label for label in labels) == 21
    warm = [label for label, _ in plan_steps(set(), rounds=3, warm_up_round=True)]
    assert warm.count("pipeline (kafka), warm-up round") == 1
    assert sum(" round" in label for label in warm) == 28
    first = warm.index("source_only (kafka), round 1/3")
    assert warm.index("pipeline (kafka), warm-up round") < first
    # The round runs every query on the real data: no tiny warm-up query before it.
    assert "warm-up (kafka)" not in warm
    assert "warm-up (kafka)" in labels


def test_the_report_prints_the_assemblers_ratio_under_the_ratios(tmp_path: Path) -> None:
    ceil = ceiling_ratios(
        {**runs(5_000, 10_000, 2_000), "source_assembler": {"rows_per_s": 6_000.0}}
    )
    main = {"rows": 1, "records": 1, "shape": "4p", "row_bytes": 1, "max_offsets_per_trigger": 1}
    summary = write_report({"main": main, "ceilings": ceil}, tmp_path)
    assert "  asm / bare_stateful   0.60  (source -> assembler -> noop over it)" in summary
    assert (
        "Source -> real assembler -> noop over each ceiling: bare_stateful 0.60."
        in (tmp_path / "report.md").read_text()
    )


def test_the_report_gives_the_pipeline_with_the_stand_ins_writes_off_over_bare(
    tmp_path: Path,
) -> None:
    bare = median_round([{"rows_per_s": r} for r in (40.0, 50.0, 60.0)])
    off = median_round([{"rows_per_s": r} for r in (30.0, 36.0, 45.0)])
    ceil = ceiling_ratios({**runs(5, 10, 2), "bare_stateful": bare, "pipeline_writes_off": off})
    assert ceil["writes_off"] == {"ratio": 0.72, "rounds": [0.75, 0.72, 0.75]}
    main = {"rows": 1, "records": 1, "shape": "4p", "row_bytes": 1, "max_offsets_per_trigger": 1}
    summary = write_report({"main": main, "ceilings": ceil}, tmp_path)
    assert "  writes off / bare     0.72  (diagnostic" in summary
    report = (tmp_path / "report.md").read_text()
    assert "ran at **0.72** of bare (rounds 0.75, 0.72, 0.75)" in report
    assert ceiling_ratios(runs(5, 10, 2))["writes_off"] == {}


def test_the_summarys_ratios_line_up_whatever_the_querys_name(tmp_path: Path) -> None:
    ceil = ceiling_ratios(
        {**runs(5, 10, 2), "pipeline_writes_off": {"rows_per_s": 6.0}, "source_only": {}}
    )
    main = {"rows": 1, "records": 1, "shape": "4p", "row_bytes": 1, "max_offsets_per_trigger": 1}
    summary = write_report({"main": main, "ceilings": ceil}, tmp_path)
    lines = [line for line in summary.splitlines() if line.startswith("  / ")]
    assert len(lines) == 3
    # The ratio starts in the same column on every line, the longest name's included.
    assert len({line.index(" 0.") for line in lines}) == 1


def test_the_pipelines_own_cost_leaves_out_the_kafka_read_round_by_round() -> None:
    pipeline: list[dict[str, Any]] = [{"warm_rows_per_s": 8_000.0}, {"warm_rows_per_s": 5e3}, {}]
    source: list[dict[str, Any]] = [{"warm_rows_per_s": 4e4}, {"warm_rows_per_s": 1e4}, {"x": 1}]
    # 125 - 25 and 200 - 100 µs per row; a round without a warm rate has no cost.
    assert own_costs(pipeline, source) == [100.0, 100.0]


def test_the_scaling_table_gives_the_own_cost_and_its_64_over_4_partitions(
    tmp_path: Path,
) -> None:
    def point(partitions: int, pipe: float, read: float, own: list[float]) -> dict[str, object]:
        run = {"rows_per_s": pipe, "mb_per_s": 1.0, "warm_rows_per_s": pipe}
        return {
            "shape": f"{partitions}p",
            "partitions": partitions,
            "rows": 1,
            "pipeline": run,
            "bare_stateful": run,
            "source": {"warm_rows_per_s": read},
            "own_us_per_row": sorted(own)[1],
            "rounds_own_us_per_row": own,
            "ratio": 1.0,
            "warm_ratio": 1.0,
        }

    sweeps = {
        "partitions": [
            point(4, 8_000.0, 40_000.0, [100.0, 98.0, 104.0]),
            point(64, 6_000.0, 12_000.0, [90.0, 83.3, 95.0]),
        ]
    }
    summary = write_report({"sweeps": sweeps}, tmp_path)
    assert (
        "scaling: warm pipeline rows/s, 64 / 4 partitions 0.75; own µs per row (minus "
        "source -> noop), 64 / 4 partitions 0.90" in summary
    )
    assert "| 12,000 | 90.0 (83.3-95.0) |" in (tmp_path / "report.md").read_text()


def steady_run(ms: list[float], records: list[int], rows: int = 0) -> dict[str, Any]:
    durations = [{"triggerExecution": t} for t in ms]
    total = sum(records)
    return {"durations_ms": durations, "batch_records": records, "records": total, "rows": rows}


def test_a_steady_run_leaves_out_its_first_batches_and_a_short_last_one() -> None:
    # 1,000 records a batch: 900 ms, 500, then 100, 300, 200 µs per record; a last batch of
    # 100 records (400 µs per record) is the rate limit's rounding.
    run = steady_run([900, 500, 100, 300, 200, 40], [1000] * 5 + [100])
    assert steady_us_per_record(run, skip=2) == 200.0
    assert steady_us_per_record(run, skip=0) == 300.0
    with pytest.raises(ValueError, match="no batches after the first 6"):
        steady_us_per_record(run, skip=6)


def test_the_steady_own_cost_is_the_pipeline_minus_the_source_per_row() -> None:
    # 12 records per 10 rows: (200 - 50) µs per record is 180 µs per row.
    pipe = steady_run([999, 240, 240, 240], [1200] * 4, rows=4000)
    read = steady_run([999, 60, 60, 60], [1200] * 4)
    assert steady_own_us_per_row(pipe, read, skip=1) == 180.0


def test_the_flat_pair_gives_64_over_4_of_the_medians_and_round_by_round(
    tmp_path: Path,
) -> None:
    flat = flat_summary({64: [120.0, 110.0, 150.0], 4: [100.0, 100.0, 125.0]}, 10, 45)
    assert flat["ratio"] == 1.2
    assert flat["round_ratios"] == [1.2, 1.1, 1.2]
    summary = write_report({"flat": flat}, tmp_path)
    assert (
        "flat (target 6, steady): own µs per row, 64 / 4 partitions 1.20 (batches 11 on; "
        "by round 1.20, 1.10, 1.20)" in summary
    )
    report = (tmp_path / "report.md").read_text()
    assert "| 4 | 100.0, 100.0, 125.0 | 100.0 |" in report
    assert "| 64 | 120.0, 110.0, 150.0 | 120.0 |" in report
    assert "64 / 4 partitions: **1.20**" in report


def test_the_flat_pairs_warm_up_round_is_said(tmp_path: Path) -> None:
    flat = {**flat_summary({64: [120.0], 4: [100.0]}, 10, 45), "warm_up_round": True}
    write_report({"flat": flat}, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "one round of both shapes ran first and is left out" in md
    flat["warm_up_round"] = False
    write_report({"flat": flat}, tmp_path)
    assert "left out." not in (tmp_path / "report.md").read_text().split("Target 6")[1]


def test_the_flat_pair_tells_sparks_stateful_plan_from_the_product(tmp_path: Path) -> None:
    flat = flat_summary(
        {64: [120.0, 110.0, 150.0], 4: [100.0, 100.0, 125.0]},
        10,
        45,
        bare={64: [30.0, 40.0, 35.0], 4: [25.0, 20.0, 50.0]},
    )
    assert flat["ratio"] == 1.2
    assert flat["bare"]["ratio"] == 35.0 / 25.0
    assert flat["bare"]["round_ratios"] == [1.2, 2.0, 0.7]
    # Above bare, round by round: 64 partitions 90, 70, 115; 4 partitions 75, 80, 75.
    assert flat["above_bare"]["shapes"][1]["own_us_per_row"] == [90.0, 70.0, 115.0]
    assert flat["above_bare"]["ratio"] == 90.0 / 75.0
    assert flat["above_bare"]["round_ratios"] == [1.2, 0.88, 1.53]
    summary = write_report({"flat": flat}, tmp_path)
    assert (
        "flat (target 6, steady): own µs per row, 64 / 4 partitions 1.20 (batches 11 on; "
        "by round 1.20, 1.10, 1.20); bare by slot 1.40, the pipeline above bare 1.20" in summary
    )
    report = (tmp_path / "report.md").read_text()
    assert "| 4 | 100.0, 100.0, 125.0 | 100.0 | 25.0, 20.0, 50.0 | 25.0 | 75.0 |" in report
    assert "| 64 | 120.0, 110.0, 150.0 | 120.0 | 30.0, 40.0, 35.0 | 35.0 | 90.0 |" in report
    assert "Bare by slot: 1.40 (round by round 1.20, 2.00, 0.70)" in report
    assert "The pipeline above bare: 1.20 (round by round 1.20, 0.88, 1.53)" in report


def test_a_round_with_no_cost_above_bare_has_no_ratio() -> None:
    flat = flat_summary(
        {64: [50.0, 60.0], 4: [40.0, 45.0]}, 10, 45, bare={64: [20.0, 30.0], 4: [40.0, 30.0]}
    )
    assert flat["above_bare"]["round_ratios"] == [None, 2.0]


def test_the_report_gives_the_idle_pipelines_cost(tmp_path: Path) -> None:
    idle = {
        "idle_seconds": 60.0,
        "trigger_ms": 1000,
        "cpu_seconds_per_minute": 1.18,
        "micro_batches": 0,
        "starrocks_transactions_begun": 0,
    }
    summary = write_report({"idle": idle}, tmp_path)
    assert "idle: 1.18 CPU-s per minute, 0 micro-batches, 0 StarRocks transactions" in summary
    report = (tmp_path / "report.md").read_text()
    assert "## 3. As users run it" in report
    assert "| 1.18 | 0 | 0 |" in report


def test_the_report_splits_each_querys_cpu_per_record_by_process(tmp_path: Path) -> None:
    runs_: dict[str, dict[str, Any]] = dict(runs(5_000, 10_000, 2_000))
    runs_["bare_stateful"] = {
        **runs_["bare_stateful"],
        "records": 100_000,
        "cpu_s_by_role": {"jvm": 3.0, "python-worker": 0.2, "broker": 0.3},
        "jvm_cpu_s_by_thread": {"tasks": 1.5, "stream": 0.5, "jit": 1.0},
    }
    runs_["passthrough"] = {
        "rows_per_s": 8_000.0,
        "records": 100_000,
        "cpu_s_by_role": {"jvm": 2.0, "python-worker": 2.5, "broker": 0.5, "emulator": 0.5},
    }
    runs_["pipeline"] = {
        **runs_["pipeline"],
        "records": 100_000,
        "cpu_s_by_role": {"jvm": 5.0, "python-worker": 2.0, "broker": 0.5, "emulator": 0.5},
        "jvm_cpu_s_by_thread": {"tasks": 2.0, "stream": 1.0, "jit": 1.0, "gc": 0.5, "exited": 0.5},
    }
    main = {"rows": 1, "records": 1, "shape": "4p", "row_bytes": 1, "max_offsets_per_trigger": 1}
    summary = write_report({"main": main, "ceilings": ceiling_ratios(runs_)}, tmp_path)
    report = (tmp_path / "report.md").read_text()
    bare_row = "| Spark: source -> bare applyInPandasWithState (trivial fn) -> noop |"
    assert f"{bare_row} 30.0 | 2.0 | - | 3.0 | - | 35.0 |" in report
    assert "| 50.0 | 20.0 | - | 5.0 | 5.0 | 80.0 |" in report
    # The JVM's part by thread kind, for the runs that have it ("-": a kind not seen).
    assert f"{bare_row} 15.0 | 5.0 | 10.0 | - | - | - |" in report
    assert "| 20.0 | 10.0 | 10.0 | 5.0 | - | 5.0 |" in report
    assert (
        "The pipeline spends +45.0 µs per record more than bare (Spark JVM +20.0, Python "
        "workers +18.0, Python driver +0.0, Kafka broker +2.0, StarRocks emulator +5.0; the "
        "JVM's by thread: task threads +5.0, the query's driver thread +5.0, JIT compilers "
        "+0.0, collector +5.0, other live threads +0.0, threads ended meanwhile +5.0)." in report
    )
    assert "needs the pipeline at 50.0 µs per record or less; it spent 80.0." in report
    # Against the pass-through (its JVM not split by thread: no such part in the sentence).
    assert "more than the pass-through (Spark JVM +30.0, Python workers -5.0," in report
    assert "StarRocks emulator +0.0). With both" in report
    assert "pipeline / the pass-through >= 0.85 needs the pipeline at 64.7 µs" in report
    assert (
        "  CPU per record: pipeline 80.0 us, bare 35.0 us (0.7 x bare's rate needs <= 50.0 us)"
        in summary
    )


def test_the_report_has_no_cpu_table_for_runs_without_roles(tmp_path: Path) -> None:
    main = {"rows": 1, "records": 1, "shape": "4p", "row_bytes": 1, "max_offsets_per_trigger": 1}
    summary = write_report({"main": main, "ceilings": ceiling_ratios(runs(5, 10, 2))}, tmp_path)
    assert "CPU per Kafka record" not in (tmp_path / "report.md").read_text()
    assert "CPU per record" not in summary


def test_the_report_gives_the_uncounted_warm_up_round(tmp_path: Path) -> None:
    ceil = {
        **ceiling_ratios(runs(5_000, 10_000, 2_000)),
        "warm_up_round_rows_per_s": {"bare_stateful": 4_000.0, "pipeline": 3_000.0},
    }
    main = {"rows": 1, "records": 1, "shape": "4p", "row_bytes": 1, "max_offsets_per_trigger": 1}
    write_report({"main": main, "ceilings": ceil}, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "A warm-up round ran before them on the same data, not counted" in text
    assert "(trivial fn) -> noop 0.75." in text


def test_a_part_that_failed_is_named_in_the_report_and_the_summary(tmp_path: Path) -> None:
    error = "RuntimeError: bare: query ended early: OutOfMemoryError\n\tat somewhere"
    summary = write_report({"errors": {"sweeps": error}}, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "## Parts that failed" in text
    assert "- **sweeps**: RuntimeError: bare: query ended early: OutOfMemoryError (the" in text
    assert "FAILED sweeps: RuntimeError: bare: query ended early: OutOfMemoryError" in summary


def peer_run(ready_rate: float, rate: float, per_cpu: float) -> dict[str, Any]:
    return {
        "ready_s": 4.0,
        "wall_s": 20.0,
        "rows_per_s_after_ready": ready_rate,
        "rows_per_s": rate,
        "rows_per_cpu_s": per_cpu,
        "memory": {"jvm_mb": 800.0, "python-worker_mb": 500.0, "python-worker-max_mb": 250.0},
    }


def test_the_peer_part_gives_ours_over_the_peer_by_the_median_round(tmp_path: Path) -> None:
    rounds = [
        {"order": ["peer", "ours"], "peer": peer_run(30_000, 40_000, 24_000),
         "ours": peer_run(18_000, 30_000, 12_000)},
        {"order": ["ours", "peer"], "peer": peer_run(30_000, 40_000, 24_000),
         "ours": peer_run(21_000, 34_000, 13_200)},
        {"order": ["peer", "ours"], "peer": peer_run(20_000, 40_000, 24_000),
         "ours": peer_run(30_000, 38_000, 14_400)},
    ]  # fmt: skip
    peer = {
        "rows": 372_741,
        "transactions": 83_390,
        "topic_bytes": 108_716_781,
        "flavour": "per-table",
        "rounds": rounds,
        **side_by_side(rounds),
    }
    assert peer["ratios_by_round"]["rows_per_s_after_ready"] == [0.6, 0.7, 1.5]
    assert peer["ratios"] == {
        "rows_per_s_after_ready": 0.7,
        "rows_per_s": 0.85,
        "rows_per_cpu_s": 0.55,
    }
    summary = write_report({"peer": peer}, tmp_path)
    assert (
        "peer (target 2, aim >= 1.0; connector per-table): ours / peer rows/s after start-up "
        "0.70, first visible row to last 0.85, per CPU-second 0.55" in summary
    )
    report = (tmp_path / "report.md").read_text()
    assert "| | peer, round 1 | ours, round 1 | ours, round 2 | peer, round 2 |" in report
    assert "| rows/s after start-up | 30,000 | 18,000 | 21,000 | 30,000 |" in report
    assert "rows/s after start-up **0.70** (0.60, 0.70, 1.50)" in report
    assert "| peak RSS of its processes, MB | 1,300 | 1,300 | 1,300 | 1,300 |" in report


def test_a_round_a_system_did_not_finish_has_no_ratio() -> None:
    rounds = [
        {"order": ["peer", "ours"], "peer": peer_run(30_000, 40_000, 24_000),
         "ours": {"caught_up": False}},
        {"order": ["ours", "peer"], "peer": peer_run(30_000, 40_000, 24_000),
         "ours": peer_run(15_000, 20_000, 12_000)},
    ]  # fmt: skip
    assert side_by_side(rounds)["ratios_by_round"]["rows_per_s_after_ready"] == [0.5]


def test_the_flat_pair_counts_the_pipelines_full_collections(tmp_path: Path) -> None:
    flat = flat_summary(
        {64: [120.0, 110.0], 4: [100.0, 100.0]},
        10,
        45,
        full_gc={64: [(1, 250), (2, 450)], 4: [(0, 0), (0, 0)]},
    )
    assert flat["full_collections"] == [
        {"partitions": 4, "count": 0, "ms": 0, "runs": 2},
        {"partitions": 64, "count": 3, "ms": 700, "runs": 2},
    ]
    summary = write_report({"flat": flat}, tmp_path)
    assert "full collections in the pipeline runs, 4 / 64 partitions: 0 / 3 (0 / 700 ms)" in summary
    report = (tmp_path / "report.md").read_text()
    assert "The driver JVM's full collections in the pipeline runs" in report


def test_only_the_old_generations_collectors_are_full_collections() -> None:
    before = {"PS Scavenge": (10, 100), "PS MarkSweep": (1, 200)}
    after = {"PS Scavenge": (14, 160), "PS MarkSweep": (3, 650)}
    assert collections_between(before, after) == {
        "PS Scavenge": {"count": 4, "ms": 60},
        "PS MarkSweep": {"count": 2, "ms": 450},
    }
    assert full_collections(collections_between(before, after)) == (2, 450)
    g1 = {
        "G1 Young Generation": {"count": 9, "ms": 90},
        "G1 Concurrent GC": {"count": 2, "ms": 5},
        "G1 Old Generation": {"count": 1, "ms": 300},
    }
    assert full_collections(g1) == (1, 300)
