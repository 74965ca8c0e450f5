"""Markdown report and PNG plots from ``results.json`` (``python -m benchmarks.report DIR``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CEILING_ORDER = (
    ("broker", "Broker consume (1 confluent-kafka consumer, no Spark)"),
    ("emulator", "Emulator ingest alone (same rows, batch-sized multi-table txns)"),
    ("source_only", "Spark: Kafka source (Spark's connector) -> noop"),
    ("bare_stateful", "Spark: source -> bare applyInPandasWithState (trivial fn) -> noop"),
    ("source_assembler", "Spark: source -> real assembler -> noop"),
    ("passthrough", "Spark: source -> decode -> plain Stream Load (no assembly, no EO)"),
    (
        "pipeline_load_job",
        "Pipeline with a load job of its own (`sink.load-in-task: false`, as before 11-27)",
    ),
    ("pipeline", "**Pipeline**: source -> assembler -> exactly-once StarRocks sink"),
    (
        "pipeline_writes_off",
        "Pipeline, the stand-in's row writes off (diagnostic: StarRocks writes on its own nodes)",
    ),
)
TARGETS = {"bare_stateful": 0.7, "passthrough": 0.85}


#: Steady-rate runs (benchmarks.run ``e2e_steady``): trigger 1 s, then 250 ms.
STEADY_KEYS = ("e2e_steady", "e2e_steady_250")


def _spread(values: list[float] | None, fmt: str = ",.0f") -> str:
    """`` (low-high)`` of a few rounds' values, or nothing for one round."""
    if not values or len(values) < 2:
        return ""
    return f" ({min(values):{fmt}}-{max(values):{fmt}})"


def _f(x: Any, fmt: str = ",.0f") -> str:
    if x is None or x == "":
        return "-"
    try:
        return format(float(x), fmt)
    except (TypeError, ValueError):
        return str(x)


def _mb(mem: dict[str, float], key: str) -> str:
    return _f(mem.get(f"{key}_mb"), ",.0f")


def plots(res: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: list[str] = []
    ceil = res.get("ceilings", {}).get("runs", {})
    if ceil:
        names = [k for k, _ in CEILING_ORDER if ceil.get(k, {}).get("rows_per_s")]
        vals = [ceil[k]["rows_per_s"] for k in names]
        fig, ax = plt.subplots(figsize=(8, 4))
        colors = ["#c44" if k == "pipeline" else "#59a" for k in names]
        ax.barh(names, vals, color=colors)
        ax.set_xscale("log")
        ax.set_xlabel("committed rows/s (log)")
        ax.set_title("Pipeline vs ceilings (same data)")
        for i, v in enumerate(vals):
            ax.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "ceilings.png", dpi=110)
        plt.close(fig)
        made.append("ceilings.png")
    sweeps = res.get("sweeps", {})
    if sweeps:
        axes_def = [
            ("partitions", "partitions", False),
            ("txn_rows", "rows per transaction", True),
            ("row_bytes", "row size (bytes)", True),
        ]
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
        for ax, (key, label, logx) in zip(axes, axes_def, strict=True):
            pts = sweeps.get(key, [])
            xs = [p[key] for p in pts]
            ax.plot(xs, [p["pipeline"]["rows_per_s"] for p in pts], "o-", label="pipeline")
            ax.plot(
                xs, [p["bare_stateful"]["rows_per_s"] for p in pts], "s--", label="bare stateful"
            )
            if logx:
                ax.set_xscale("log")
            ax.set_xlabel(label)
            ax.set_ylabel("rows/s")
            ax.grid(alpha=0.3)
        axes[0].legend()
        fig.suptitle("Throughput scaling (in-process, warm session)")
        fig.tight_layout()
        fig.savefig(out / "scaling.png", dpi=110)
        plt.close(fig)
        made.append("scaling.png")
    lat = res.get("latency_vs_trigger", [])
    if lat:
        fig, ax = plt.subplots(figsize=(6, 4))
        for r in lat:
            samples = r.get("samples") or []
            if samples:
                ys = [i / len(samples) for i in range(1, len(samples) + 1)]
                ax.plot([s / 1000 for s in samples], ys, label=f"trigger {r['trigger_ms']} ms")
        ax.set_xlabel("visibility latency (s)")
        ax.set_ylabel("fraction of transactions")
        ax.set_title("Visibility latency CDF at a steady rate")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "latency.png", dpi=110)
        plt.close(fig)
        made.append("latency.png")
    state = res.get("state_memory", [])
    if state:
        fig, ax = plt.subplots(figsize=(6, 4))
        xs = [r["open_rows"] for r in state]
        ax.plot(xs, [r["state_memory_mb"] for r in state], "o-", label="state store memory")
        ax.plot(xs, [r["open_row_json_mb"] for r in state], "s--", label="open rows' JSON")
        ax.plot(
            xs,
            [r["rss"].get("python-worker_mb", 0) for r in state],
            "^:",
            label="Python workers RSS",
        )
        ax.set_xlabel("buffered rows in open transactions (all partitions)")
        ax.set_ylabel("MB")
        ax.set_title("Memory with open transactions")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "state_memory.png", dpi=110)
        plt.close(fig)
        made.append("state_memory.png")
    return made


def write_report(res: dict[str, Any], out: Path, image_prefix: str = "") -> str:
    """Write ``report.md`` and the plots to ``out``; return the console summary."""
    try:
        images = plots(res, out)
    except ImportError:
        images = []
    env = res.get("env", {})
    md: list[str] = ["# Benchmark report", ""]
    md += [
        f"Started {env.get('started_utc')} UTC, {env.get('duration_s', 0) / 60:.1f} min, "
        f"{env.get('cpus')} CPUs. Load average (1/5/15 min) at start {env.get('loadavg_start')}, "
        f"at end {env.get('loadavg_end')}; 1-min load sampled every 5 s: mean "
        f"{_f(env.get('loadavg_1m_mean'), '.1f')}, max {_f(env.get('loadavg_1m_max'), '.1f')}."
        + (" **Quick (smoke) sizes.**" if env.get("quick") else ""),
        "",
    ]
    others = env.get("other_load_start") or []
    if others:
        md += [
            f"Other heavy processes at start ({len(others)}): numbers below are wall-clock on a "
            "shared machine; the rows-per-CPU-second column is less sensitive to that.",
            "",
        ]
    summary: list[str] = []
    errors = res.get("errors") or {}
    if errors:
        # A part that failed has no section below: say so first, not by its absence.
        md += ["## Parts that failed", ""]
        for part, error in errors.items():
            lines = str(error).strip().splitlines()
            first = lines[0] if lines else "?"
            md.append(f"- **{part}**: {first} (the whole error is in `results.json`)")
            summary.append(f"FAILED {part}: {first}")
        md.append("")
    main = res.get("main")
    ceil = res.get("ceilings")
    if main and ceil:
        md += [
            "## 1. Pipeline vs ceilings (same data, warm local[2] session)",
            "",
            f"Data: {main['rows']:,} rows ({main['records']:,} records, {main['shape']}), "
            f"{main['row_bytes'] / 1e6:.1f} MB of row JSON, max-offsets-per-trigger "
            f"{main['max_offsets_per_trigger']:,}. Rates are committed DATA rows per second of "
            "micro-batch time (query start excluded); MB/s counts row JSON.",
            "",
        ]
        md += [
            "| run | rows/s | MB/s | rows per CPU-s | batches | wall s | pipeline / this |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for key, title in CEILING_ORDER:
            r = ceil["runs"].get(key)
            if not r:
                continue
            ratio = ceil["ratios"].get(key)
            md.append(
                f"| {title} | {_f(r.get('rows_per_s'))} | {_f(r.get('mb_per_s'), '.2f')} | "
                f"{_f(r.get('rows_per_cpu_s'))} | "
                f"{r.get('batches', r.get('transactions', '-'))} | "
                f"{_f(r.get('wall_s'), '.1f')} | {_f(ratio, '.2f') if ratio else '-'} |"
            )
        md.append("")
        rounds = ceil["runs"].get("pipeline", {}).get("rounds_rows_per_s") or []
        if len(rounds) > 1:
            md += [
                f"Each query ran {len(rounds)} times, the queries one after the other each "
                "round; the table shows each query's median round. Pipeline / this, round by "
                "round: "
                + "; ".join(
                    f"{title} {', '.join(f'{x:.2f}' for x in ceil['round_ratios'][key])}"
                    for key, title in CEILING_ORDER
                    if key in ceil.get("round_ratios", {})
                )
                + ".",
                "",
            ]
        cold = ceil.get("warm_up_round_rows_per_s") or {}
        if cold.get("pipeline"):
            md += [
                "A warm-up round ran before them on the same data, not counted (the JIT has "
                "compiled little by then). Pipeline / this in it: "
                + "; ".join(
                    f"{title} {cold['pipeline'] / cold[key]:.2f}"
                    for key, title in CEILING_ORDER
                    if cold.get(key) and key != "pipeline"
                )
                + ".",
                "",
            ]
        md += ["Targets: pipeline >= 0.7 x bare stateful, >= 0.85 x pass-through.", ""]
        off = ceil.get("writes_off") or {}
        if off:
            md += [
                f"The same pipeline with the emulator dropping the data table's rows at commit "
                f"(its transactions unchanged) ran at **{off['ratio']:.2f}** of bare (rounds "
                + ", ".join(f"{x:.2f}" for x in off["rounds"])
                + "). StarRocks writes a commit's rows on its own nodes; the stand-in writes "
                "them in SQLite on the two cores under test, inside each batch's commit, which "
                "the next batch waits for. A diagnostic, not the target.",
                "",
            ]
        md += _cpu_by_role_table(ceil["runs"])
        bounds = ceil.get("assembler_bounds") or {}
        if bounds:
            md += [
                "Source -> real assembler -> noop over each ceiling: "
                + ", ".join(f"{k} {v:.2f}" for k, v in bounds.items())
                + ". That query hands the assembler's rows back to the JVM and writes them "
                "nowhere; the pipeline's tasks load their rows instead "
                "(`sink.load-in-task`), so it is no bound on the pipeline, only what the "
                "assembler costs with its output.",
                "",
            ]
        if "ceilings.png" in images:
            md += [f"![ceilings]({image_prefix}ceilings.png)", ""]
        summary.append("pipeline / ceiling (rows/s; per CPU-second in brackets):")
        width = max(len(key) for key, _ in CEILING_ORDER)
        for key, _ in CEILING_ORDER:
            if key in ceil["ratios"]:
                target = TARGETS.get(key)
                spread = ceil.get("round_ratios", {}).get(key)
                summary.append(
                    f"  / {key:<{width}} {ceil['ratios'][key]:6.2f}  "
                    f"({_f(ceil['ratios_cpu'].get(key), '.2f')})"
                    + (f"   target >= {target}" if target else "")
                    + (f"   rounds {min(spread):.2f}-{max(spread):.2f}" if spread else "")
                )
        for key, bound in bounds.items():
            summary.append(f"  asm / {key:<13} {bound:6.2f}  (source -> assembler -> noop over it)")
        if off:
            summary.append(
                f"  writes off / bare   {off['ratio']:6.2f}  (diagnostic: the pipeline with the "
                "stand-in's SQLite writes off)"
            )
        pipe = ceil["runs"].get("pipeline", {})
        summary.append(f"  pipeline: {_f(pipe.get('rows_per_s'))} rows/s in process")
        p_us = sum(cpu_per_record(pipe).values())
        b_us = sum(cpu_per_record(ceil["runs"].get("bare_stateful", {})).values())
        if p_us and b_us:
            summary.append(
                f"  CPU per record: pipeline {p_us:.1f} us, bare {b_us:.1f} us "
                f"(0.7 x bare's rate needs <= {b_us / TARGETS['bare_stateful']:.1f} us)"
            )
    asm = res.get("assembler")
    if asm:
        md += [
            "## 2. The assembler alone (parquet file stream, no Kafka, no sink)",
            "",
            f"{asm['rows']:,} rows ({asm['shape']}), {asm['files']} micro-batches, noop sink.",
            "",
            "| function in applyInPandasWithState | rows/s | rows per CPU-s | batch s |",
            "| --- | ---: | ---: | ---: |",
        ]
        for kind, title in (
            ("real", "real state machine (`app.assembly.assemble_transactions`)"),
            ("trivial", "trivial (count rows, counter state)"),
        ):
            r = asm[kind]
            md.append(
                f"| {title} | {_f(r['rows_per_s'])} | {_f(r['rows_per_cpu_s'])} | "
                f"{_f(r['batch_s'], '.2f')} |"
            )
        md += [
            "",
            f"real / trivial = **{asm['ratio']:.2f}** (per CPU-second {asm['ratio_cpu']:.2f})",
            "",
        ]
        summary.append(
            f"assembler alone: real {_f(asm['real']['rows_per_s'])} rows/s, trivial "
            f"{_f(asm['trivial']['rows_per_s'])} rows/s (real/trivial {asm['ratio']:.2f})"
        )
    e2e = res.get("e2e_catchup")
    steadies = [res[k] for k in STEADY_KEYS if res.get(k)]
    idle = res.get("idle")
    if e2e or steadies or idle:
        md += ["## 3. As users run it (`spark-submit.sh --config conf/local.yaml`)", ""]
    if e2e:
        mem = e2e.get("memory", {})
        md += [
            f"Catch-up on the pre-filled topic (same data as section 1, trigger interval 0): "
            f"{_f(e2e.get('rows'))} rows committed, caught up: {e2e.get('caught_up')}.",
            "",
            "| rows/s from query start | MB/s | rows/s after 1st batch | 1st batch s | batches |",
            "| ---: | ---: | ---: | ---: | ---: |",
            f"| {_f(e2e.get('rows_per_s'))} | {_f(e2e.get('mb_per_s'), '.2f')} | "
            f"{_f(e2e.get('steady_rows_per_s'))} | {_f(e2e.get('first_batch_s'), '.1f')} | "
            f"{e2e.get('batches')} |",
            "",
        ]
        bd = e2e.get("breakdown") or {}
        if bd.get("batches") and e2e.get("query_s"):
            q_ms = e2e["query_s"] * 1000
            assemble = bd["foreach_ms"] - bd["sink_ms"]
            md += [
                "Where the time went (sums over the batches, from the app's INFO log lines):",
                "",
                "| part | s | share of query time |",
                "| --- | ---: | ---: |",
                f"| query start -> last batch line | {q_ms / 1000:.1f} | 100% |",
                "| foreachBatch outside the sink (a count job, when not in the load) | "
                f"{assemble / 1000:.1f} | {assemble / q_ms:.0%} |",
                "| foreachBatch: sink write_batch (recovery, begin, the job: source, assembler, "
                "load; commit) | "
                f"{bd['sink_ms'] / 1000:.1f} | {bd['sink_ms'] / q_ms:.0%} |",
                f"| of which the commit call | {bd['commit_ms'] / 1000:.1f} | "
                f"{bd['commit_ms'] / q_ms:.0%} |",
                f"| outside foreachBatch (first-batch start-up, planning, offsets, state "
                f"commit) | {(q_ms - bd['foreach_ms']) / 1000:.1f} | "
                f"{(q_ms - bd['foreach_ms']) / q_ms:.0%} |",
                "",
            ]
        md += _memory_table("catch-up (profiled: py-spy attached)", mem)
        summary.append(
            f"spark-submit catch-up: {_f(e2e.get('rows_per_s'))} rows/s from query start, "
            f"{_f(e2e.get('steady_rows_per_s'))} after the first batch"
        )
    for steady in steadies:
        lat = steady.get("latency", {})
        md += [
            f"Steady rate: {steady['rate_txn_s']:.0f} txn/s x 10 rows = "
            f"{steady['rate_rows_s']:.0f} rows/s offered for {steady['duration_s']:.0f} s, "
            f"trigger {steady['trigger_ms']} ms; {steady['visible']}/{steady['transactions']} "
            "transactions seen visible. Latency = progress row committed past the TXN_END offset "
            "(polled every 50 ms) - TXN_END produce time. Steady state: transactions produced "
            f"from {steady.get('warmup_s', 0):.0f} s after the first one became visible; "
            + (
                f"its first {steady['first_s']:.0f} s are the window of runs before 2026-11-24 "
                "14:12 UTC, when the JVM's JIT compilers are at their busiest; "
                if "first_s" in steady
                else ""
            )
            + "after start: from the first visible one on (JIT and Python-worker warm-up "
            "included).",
            "",
            "| window | p50 ms | p95 ms | p99 ms | max ms | n | target p99 |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        first = f"first {steady.get('first_s', 0):.0f} s of it"
        for window, key in (
            ("steady state", "latency"),
            (first, "latency_first"),
            ("after start", "latency_after_start"),
        ):
            w = steady.get(key)
            if w is None:  # runs before the first-window split
                continue
            md.append(
                f"| {window} | {_f(w.get('p50'))} | {_f(w.get('p95'))} | {_f(w.get('p99'))} | "
                f"{_f(w.get('max'))} | {_f(w.get('n'))} | <= {steady['trigger_ms'] + 1000} |"
            )
        md.append("")
        md.append(
            f"Pipeline CPU in the steady-state window (JVM, Python driver and workers): "
            f"{_f(steady.get('cpu_cores'), '.2f')} cores busy on average, of which the JVM's "
            f"JIT compiler threads {_f(steady.get('jit_cores'), '.2f')}."
        )
        md.append("")
        md += _memory_table("steady rate", steady.get("memory", {}))
        summary.append(
            f"steady {steady['rate_rows_s']:.0f} rows/s, trigger {steady['trigger_ms']} ms: "
            f"p50 {_f(lat.get('p50'))} p95 {_f(lat.get('p95'))} p99 {_f(lat.get('p99'))} ms "
            f"(after start: p99 {_f(steady.get('latency_after_start', {}).get('p99'))} ms"
            + (
                f", first {steady['first_s']:.0f} s: "
                f"p99 {_f(steady.get('latency_first', {}).get('p99'))} ms"
                if "first_s" in steady
                else ""
            )
            + f"); pipeline CPU {_f(steady.get('cpu_cores'), '.2f')} cores"
            + (f" (JIT compilers {steady['jit_cores']:.2f})" if "jit_cores" in steady else "")
        )
        mem = steady.get("memory", {})
        summary.append(
            f"peak RSS (steady): JVM {_mb(mem, 'jvm')} MB, Python driver "
            f"{_mb(mem, 'python-driver')} MB, Python workers {_mb(mem, 'python-worker')} MB total"
        )
    if idle:
        md += [
            f"Idle: after {_f(idle.get('idle_seconds'))} s with nothing new on the topic and one "
            f"transaction left open (its timeout pending in the state store), trigger "
            f"{idle.get('trigger_ms')} ms:",
            "",
            "| CPU-s per minute (JVM, Python driver and workers) | micro-batches | StarRocks "
            "transactions begun |",
            "| ---: | ---: | ---: |",
            f"| {_f(idle.get('cpu_seconds_per_minute'), '.2f')} | {idle.get('micro_batches')} | "
            f"{idle.get('starrocks_transactions_begun')} |",
            "",
        ]
        summary.append(
            f"idle: {_f(idle.get('cpu_seconds_per_minute'), '.2f')} CPU-s per minute, "
            f"{idle.get('micro_batches')} micro-batches, "
            f"{idle.get('starrocks_transactions_begun')} StarRocks transactions"
        )
    sweeps = res.get("sweeps")
    if sweeps:
        md += [
            "## 4. Scaling (in-process, warm session)",
            "",
            "Rates over all batches, and over the batches after the first (warm: Kafka "
            "consumers, Python workers and plans exist), leaving out a last batch of less than "
            "half a full one (the rate limit's rounding left over at the end of the data).",
            "",
        ]
        rounds = len(sweeps["partitions"][0]["pipeline"].get("rounds_warm_rows_per_s") or [])
        if rounds > 1:
            md += [
                f"Each shape ran {rounds} times, every shape once per round; each row is the "
                "median round by warm rate (pipeline and bare each their own).",
                "",
            ]
        md += [
            "The pipeline's own cost is its warm time per row minus that of Spark's reading "
            "of the same topic (source -> noop, the same round): the assembler, the sink and "
            "their stages, without the Kafka read that any query of the topic pays.",
            "",
            "| axis | shape | rows | pipeline rows/s | MB/s | bare stateful rows/s "
            "| pipeline / bare | warm pipeline rows/s | warm bare rows/s | warm pipeline / bare "
            "| warm source -> noop rows/s | pipeline's own µs per row |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for axis, pts in sweeps.items():
            for p in pts:
                pipe, bare = p["pipeline"], p["bare_stateful"]
                md.append(
                    f"| {axis} | {p['shape']} | {p['rows']:,} | {_f(pipe['rows_per_s'])} | "
                    f"{_f(pipe['mb_per_s'], '.2f')} | {_f(bare['rows_per_s'])} "
                    f"| {_f(p['ratio'], '.2f')} | {_f(pipe.get('warm_rows_per_s'))}"
                    f"{_spread(pipe.get('rounds_warm_rows_per_s'))} "
                    f"| {_f(bare.get('warm_rows_per_s'))} | {_f(p.get('warm_ratio'), '.2f')} "
                    f"| {_f((p.get('source') or {}).get('warm_rows_per_s'))} "
                    f"| {_f(p.get('own_us_per_row'), '.1f')}"
                    f"{_spread(p.get('rounds_own_us_per_row'), '.1f')} |"
                )
        md.append("")
        by_partitions = {p["partitions"]: p for p in sweeps["partitions"]}
        if 4 in by_partitions and 64 in by_partitions:
            four, many = by_partitions[4], by_partitions[64]
            rate = four["pipeline"].get("warm_rows_per_s") or 0.0
            flat = (many["pipeline"].get("warm_rows_per_s") or 0.0) / rate if rate else 0.0
            line = f"scaling: warm pipeline rows/s, 64 / 4 partitions {flat:.2f}"
            if four.get("own_us_per_row") and many.get("own_us_per_row"):
                line += (
                    f"; own µs per row (minus source -> noop), 64 / 4 partitions "
                    f"{many['own_us_per_row'] / four['own_us_per_row']:.2f}"
                )
            summary.append(line)
        if "scaling.png" in images:
            md += [f"![scaling]({image_prefix}scaling.png)", ""]
    flat = res.get("flat")
    if flat:
        md += _flat_section(flat)
        line = (
            f"flat (target 6, steady): own µs per row, 64 / 4 partitions "
            f"{_f(flat['ratio'], '.2f')} (batches {flat['skip'] + 1} on; by round "
            f"{_ratios(flat)})"
        )
        if flat.get("bare") and flat.get("above_bare"):
            line += (
                f"; bare by slot {_f(flat['bare']['ratio'], '.2f')}, the pipeline above bare "
                f"{_f(flat['above_bare']['ratio'], '.2f')}"
            )
        if flat.get("full_collections"):
            line += f"; {_full_collections(flat['full_collections'])}"
        summary.append(line)
    lat_rows = res.get("latency_vs_trigger")
    if lat_rows:
        md += [
            "### Visibility latency vs trigger interval (in-process pipeline, steady rate)",
            "",
            "| trigger ms | offered rows/s | p50 ms | p95 ms | p99 ms | max ms | n | p99 target |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in lat_rows:
            lt = r["latency"]
            md.append(
                f"| {r['trigger_ms']} | {r['rate_rows_s']:.0f} | {_f(lt.get('p50'))} | "
                f"{_f(lt.get('p95'))} | {_f(lt.get('p99'))} | {_f(lt.get('max'))} | "
                f"{_f(lt.get('n'))} | <= {r['trigger_ms'] + 1000} |"
            )
        md.append("")
        if "latency.png" in images:
            md += [f"![latency]({image_prefix}latency.png)", ""]
    state = res.get("state_memory")
    if state:
        md += [
            "### State memory with open transactions (one open per partition, real assembler)",
            "",
            "| open txns | rows each | buffered rows | row JSON MB | state store MB | state rows | "
            "JVM RSS MB | Python workers RSS MB |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in state:
            md.append(
                f"| {r['open_txns']} | {r['open_rows_per_txn']:,} | {r['open_rows']:,} | "
                f"{r['open_row_json_mb']:.1f} | {r['state_memory_mb']:.1f} | "
                f"{_f(r['state_rows'])} | {_mb(r['rss'], 'jvm')} | "
                f"{_mb(r['rss'], 'python-worker')} |"
            )
        md.append("")
        if "state_memory.png" in images:
            md += [f"![state memory]({image_prefix}state_memory.png)", ""]
    prof = (e2e or {}).get("profile_summary") or {}
    if prof:
        md += ["## 5. Profile (py-spy, spark-submit catch-up run)", ""]
        for role, s in prof.items():
            if not s.get("samples"):
                continue
            md += [
                f"### Python {role} ({s['samples']:,} samples)",
                "",
                "| self time by category | share |",
                "| --- | ---: |",
            ]
            md += [f"| {k} | {v:.1%} |" for k, v in s["self_by_category"][:10]]
            md += ["", "| inclusive (any frame in the stack) | share |", "| --- | ---: |"]
            md += [f"| {k} | {v:.1%} |" for k, v in s["inclusive"]]
            md += ["", "| top self-time functions | share |", "| --- | ---: |"]
            md += [f"| `{k}` | {v:.1%} |" for k, v in s["top_self"][:12]]
            md.append("")
            top = s["self_by_category"][0] if s["self_by_category"] else None
            if top:
                summary.append(f"profile ({role}): top self-time category {top[0]} {top[1]:.0%}")
    peer = res.get("peer")
    if peer:
        md += _peer_section(peer)
        summary.append(_peer_summary(peer))
    (out / "report.md").write_text("\n".join(md) + "\n")
    return "\n".join(summary)


def _flat_section(flat: dict[str, Any]) -> list[str]:
    """Target 6 in steady state (``benchmarks.run`` part ``flat``)."""
    shapes = flat["shapes"]
    bare, above = flat.get("bare"), flat.get("above_bare")
    md = [
        "### Target 6 in steady state: the pipeline's own cost at 4 and 64 partitions",
        "",
        f"Each query reads {flat['batches']} micro-batches of the sweep's size; its first "
        f"{flat['skip']} are left out (a query's first seconds cost more). Own cost: the "
        "median µs of `triggerExecution` per record, minus that of source -> noop run just "
        "before it on the same topic, per row. The two shapes alternate their order round by "
        "round.",
        "",
    ]
    if flat.get("warm_up_round"):
        md += [
            "The part ran on a new session (the parts before it skipped): one round of both "
            "shapes ran first and is left out.",
            "",
        ]
    if bare and above:
        md += [
            "Bare `applyInPandasWithState` grouped by slot as the pipeline is (its function "
            "only counts) runs between them and is measured the same way: what of the growth "
            "is Spark's stateful plan. The pipeline above bare is the difference, round by "
            "round: what the product adds.",
            "",
            "| partitions | pipeline, by round | median | bare by slot, by round | median "
            "| pipeline above bare, median |",
            "| ---: | --- | ---: | --- | ---: | ---: |",
        ]
        for shape, b, a in zip(shapes, bare["shapes"], above["shapes"], strict=True):
            md.append(
                f"| {shape['partitions']} | {_rounds(shape['own_us_per_row'])} "
                f"| {shape['median']:.1f} | {_rounds(b['own_us_per_row'])} | {b['median']:.1f} "
                f"| {a['median']:.1f} |"
            )
    else:
        md += ["| partitions | own µs per row, by round | median |", "| ---: | --- | ---: |"]
        for shape in shapes:
            md.append(
                f"| {shape['partitions']} | {_rounds(shape['own_us_per_row'])} "
                f"| {shape['median']:.1f} |"
            )
    line = (
        f"{shapes[-1]['partitions']} / {shapes[0]['partitions']} partitions: "
        f"**{_f(flat['ratio'], '.2f')}** (round by round {_ratios(flat)})."
    )
    if bare and above:
        line += (
            f" Bare by slot: {_f(bare['ratio'], '.2f')} (round by round {_ratios(bare)}). "
            f"The pipeline above bare: {_f(above['ratio'], '.2f')} (round by round "
            f"{_ratios(above)})."
        )
    if flat.get("full_collections"):
        line += (
            f" The driver JVM's {_full_collections(flat['full_collections'])}: at many "
            "partitions each cached Kafka consumer keeps the rest of its last poll between "
            'batches, which the collector promotes (docs/benchmarks.md, "Target 6: the '
            "consumers' held records\")."
        )
    return [*md, "", line, ""]


def _full_collections(rows: list[dict[str, Any]]) -> str:
    """``full collections in the pipeline runs, 4 / 64 partitions: 0 / 3 (0 / 700 ms)``."""
    parts = " / ".join(str(r["partitions"]) for r in rows)
    counts = " / ".join(str(r["count"]) for r in rows)
    ms = " / ".join(str(r["ms"]) for r in rows)
    return f"full collections in the pipeline runs, {parts} partitions: {counts} ({ms} ms)"


#: The peer part's rows: (label, key in each system's run, format).
PEER_ROWS = (
    ("start-up (process start -> ready), s", "ready_s", ".1f"),
    ("process start -> everything visible, s", "wall_s", ".1f"),
    ("rows/s after start-up", "rows_per_s_after_ready", ",.0f"),
    ("rows/s, first visible row -> last", "rows_per_s", ",.0f"),
    ("rows per CPU-second of its own processes", "rows_per_cpu_s", ",.0f"),
)


def _peer_section(peer: dict[str, Any]) -> list[str]:
    """Target 2: the Flink peer and ours over one backlog, round by round."""
    rounds = peer.get("rounds", [])
    md = [
        "## 6. Side by side with the Flink + StarRocks-connector peer (target 2)",
        "",
        f"The orders demo workload, {peer['rows']:,} row changes in "
        f"{peer['transactions']:,} transactions ({peer['topic_bytes'] / 1e6:.0f} MB of events), "
        f"read from the start of one topic by each system in turn, fresh tables each time: the "
        f"peer (`make peer`, flavour `{peer['flavour']}`) and ours (`spark-submit.sh`, "
        "`conf/local.yaml`). Neither counts the broker nor the stand-in's CPU.",
        "",
        "| | "
        + " | ".join(
            f"{sys}, round {i + 1}" for i, one in enumerate(rounds) for sys in one["order"]
        )
        + " |",
        "| --- |" + " ---: |" * sum(len(one["order"]) for one in rounds),
    ]
    for label, key, fmt in PEER_ROWS:
        cells = [_f(one[sys].get(key), fmt) for one in rounds for sys in one["order"]]
        md.append(f"| {label} | " + " | ".join(cells) + " |")
    rss = [_f(_total_rss(one[sys].get("memory", {}))) for one in rounds for sys in one["order"]]
    md.append("| peak RSS of its processes, MB | " + " | ".join(rss) + " |")
    ratios = peer.get("ratios", {})
    by_round = peer.get("ratios_by_round", {})
    md += [
        "",
        "Ours over the peer (median round; by round): "
        + "; ".join(
            f"{label} **{ratios[key]:.2f}** ({', '.join(f'{x:.2f}' for x in by_round[key])})"
            for label, key, _ in PEER_ROWS
            if key in ratios
        )
        + ". Target 2 (an aim): >= 1.0.",
        "",
    ]
    return md


def _total_rss(memory: dict[str, float]) -> float | None:
    """MB of every process role's peak RSS (``benchmarks.procstat.RssSampler``), summed."""
    roles = [v for k, v in memory.items() if k.endswith("_mb") and not k.endswith("-max_mb")]
    return sum(roles) if roles else None


def _peer_summary(peer: dict[str, Any]) -> str:
    ratios = peer.get("ratios", {})
    return (
        f"peer (target 2, aim >= 1.0; connector {peer['flavour']}): ours / peer rows/s after "
        f"start-up {_f(ratios.get('rows_per_s_after_ready'), '.2f')}, first visible row to last "
        f"{_f(ratios.get('rows_per_s'), '.2f')}, per CPU-second "
        f"{_f(ratios.get('rows_per_cpu_s'), '.2f')}"
    )


def _rounds(costs: list[float]) -> str:
    return ", ".join(f"{c:.1f}" for c in costs)


def _ratios(pair: dict[str, Any]) -> str:
    """A pair's round-by-round ratios (``-`` for a round without one)."""
    return ", ".join(_f(r, ".2f") for r in pair["round_ratios"])


CPU_ROLES = (
    ("jvm", "Spark JVM"),
    ("python-worker", "Python workers"),
    ("python-driver", "Python driver"),
    ("broker", "Kafka broker"),
    ("emulator", "StarRocks emulator"),
)


def cpu_per_record(run: dict[str, Any], field: str = "cpu_s_by_role") -> dict[str, float]:
    """A run's CPU microseconds per Kafka record by process role (or by the keys of another
    ``field`` of CPU seconds, e.g. ``jvm_cpu_s_by_thread``); empty if not measured."""
    by_key, records = run.get(field), run.get("records")
    if not by_key or not records:
        return {}
    return {key: cpu_s / records * 1e6 for key, cpu_s in by_key.items()}


#: The Spark JVM's threads by kind (``benchmarks.procstat.JVM_THREAD_KINDS``), as reported.
JVM_THREAD_COLUMNS = (
    ("tasks", "task threads"),
    ("stream", "the query's driver thread"),
    ("jit", "JIT compilers"),
    ("gc", "collector"),
    ("other", "other live threads"),
    ("exited", "threads ended meanwhile"),
)


def _cpu_by_role_table(runs: dict[str, dict[str, Any]]) -> list[str]:
    """CPU microseconds per Kafka record by process, for the Spark queries of section 1."""
    rows = [
        (key, title, us, cpu_per_record(runs.get(key) or {}, "jvm_cpu_s_by_thread"))
        for key, title in CEILING_ORDER
        if (us := cpu_per_record(runs.get(key) or {}))
    ]
    if not rows:
        return []
    heads = " | ".join(title for _, title in CPU_ROLES)
    md = [
        "CPU per Kafka record by process (µs of user+system CPU, the median round's run), "
        "the same runs as the table above:",
        "",
        f"| run | {heads} | total |",
        "| --- |" + " ---: |" * (len(CPU_ROLES) + 1),
    ]
    for _, title, us, _ in rows:
        cells = " | ".join(_f(us.get(role), ".1f") for role, _ in CPU_ROLES)
        md.append(f"| {title} | {cells} | {_f(sum(us.values()), '.1f')} |")
    md.append("")
    threads = [(title, jvm) for _, title, _, jvm in rows if jvm]
    if threads:
        heads = " | ".join(title for _, title in JVM_THREAD_COLUMNS)
        md += [
            "The Spark JVM's part by thread (µs per record, the same runs; /proc per thread, "
            "read before the query stops): Spark's task threads (on a local master in the "
            "driver's JVM), the query's stream execution thread on the driver (planning, "
            "the batch's steps, the sink's calls into the JVM), the JIT compilers (a fresh JVM "
            "compiles Spark's code for minutes), the collector, the JVM's other threads "
            "(scheduler, RPC, listeners), and threads that ended during the run:",
            "",
            f"| run | {heads} |",
            "| --- |" + " ---: |" * len(JVM_THREAD_COLUMNS),
        ]
        for title, jvm in threads:
            cells = " | ".join(_f(jvm.get(kind), ".1f") for kind, _ in JVM_THREAD_COLUMNS)
            md.append(f"| {title} | {cells} |")
        md.append("")
    measured = {key: us for key, _, us, _ in rows}
    jvms = {key: jvm for key, _, _, jvm in rows}
    for key, name in (("bare_stateful", "bare"), ("passthrough", "the pass-through")):
        if "pipeline" not in measured or key not in measured:
            continue
        p_us, c_us = measured["pipeline"], measured[key]
        extra = ", ".join(
            f"{title} {p_us.get(role, 0.0) - c_us.get(role, 0.0):+.1f}" for role, title in CPU_ROLES
        )
        p_jvm, c_jvm = jvms.get("pipeline"), jvms.get(key)
        if p_jvm and c_jvm:
            parts = ", ".join(
                f"{title} {p_jvm.get(kind, 0.0) - c_jvm.get(kind, 0.0):+.1f}"
                for kind, title in JVM_THREAD_COLUMNS
            )
            extra += f"; the JVM's by thread: {parts}"
        target = TARGETS[key]
        budget = sum(c_us.values()) / target
        md += [
            f"The pipeline spends {sum(p_us.values()) - sum(c_us.values()):+.1f} µs per record "
            f"more than {name} ({extra}). With both keeping the cores as busy, pipeline / "
            f"{name} >= {target} needs the pipeline at {budget:.1f} µs per record or less; it "
            f"spent {sum(p_us.values()):.1f}.",
            "",
        ]
    return md


def _memory_table(title: str, mem: dict[str, float]) -> list[str]:
    return [
        f"Peak RSS ({title}):",
        "",
        "| JVM (driver + executors) | Python driver | Python workers (sum) | largest worker "
        "| workers |",
        "| ---: | ---: | ---: | ---: | ---: |",
        f"| {_mb(mem, 'jvm')} MB | {_mb(mem, 'python-driver')} MB "
        f"| {_mb(mem, 'python-worker')} MB | {_mb(mem, 'python-worker-max')} MB | "
        f"{_f(mem.get('python-workers'))} |",
        "",
    ]


def main() -> None:
    """Re-render a results folder; ``--docs FILE`` also writes FILE with plots in FILE's bench/.

    ``python -m benchmarks.report results/bench [--docs docs/bench/report.md]``
    """
    import argparse
    import shutil

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("folder", type=Path, nargs="?", default=Path("results/bench"))
    p.add_argument("--docs", type=Path, help="also write this markdown file + its PNGs")
    a = p.parse_args()
    res = json.loads((a.folder / "results.json").read_text())
    catchup = res.get("e2e_catchup") or {}
    if catchup.get("profiles"):
        from benchmarks.profile import summarize

        catchup["profile_summary"] = {
            role: summarize(Path(path)) for role, path in catchup["profiles"].items()
        }
    print(write_report(res, a.folder))
    if a.docs is not None:
        a.docs.parent.mkdir(parents=True, exist_ok=True)
        for png in a.folder.glob("*.png"):
            shutil.copy(png, a.docs.parent / png.name)
        shutil.copy(a.folder / "report.md", a.docs)


if __name__ == "__main__":
    main()
