"""Spark's Kafka source through its v1 reader against its DSv2 reader (numbers only).

    .venv/bin/python -m benchmarks.kafka_reader [--partitions 64] [--rows 45000]
        [--max-offsets 3000] [--rounds 3] [--queries source,pipeline]

One warm local[2] session on a pre-filled topic (``benchmarks.spark_queries.prefilled``);
each round runs every query with the DSv2 reader, then with the v1 reader
(``app.session.KAFKA_V2_OFF``, a runtime SQL setting read at each query's start), so both
see the same JVM warmth. Prints each run's warm rate and CPU per Kafka record (all
processes, and the Spark JVM's), then each side's medians.
"""

from __future__ import annotations

import argparse
import statistics

from app.session import KAFKA_PROVIDER, KAFKA_V2_OFF

SIDES = {"dsv2": "", "v1": KAFKA_PROVIDER}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--rows", type=int, default=45_000)
    parser.add_argument("--max-offsets", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", default="source,pipeline")
    args = parser.parse_args(argv)

    from benchmarks import spark_queries as q
    from benchmarks.workload import Shape

    queries = args.queries.split(",")
    runs: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with q.prefilled(Shape(args.partitions, 10, 100), args.rows, args.max_offsets) as bench:
        for name in queries:
            bench.measure("warm", bench.query(name))
        for r in range(1, args.rounds + 1):
            for side, value in SIDES.items():
                bench.spark.conf.set(KAFKA_V2_OFF, value)
                for name in queries:
                    run = bench.measure(name, bench.query(name))
                    warm = float(run.extra.get("warm_rows_per_s", 0.0))
                    cpu = run.cpu_s / run.records * 1e6
                    jvm = run.extra["cpu_s_by_role"].get("jvm", 0.0) / run.records * 1e6
                    runs.setdefault((name, side), []).append((warm, cpu, jvm))
                    print(
                        f"round {r} {name:9s} {side:4s}: {warm:9,.0f} rows/s after the first "
                        f"batch, {cpu:6.1f} µs CPU per record (Spark JVM {jvm:6.1f})",
                        flush=True,
                    )
    print(
        f"medians, {args.partitions} partitions, {args.max_offsets:,}-record batches, "
        f"{args.rounds} rounds:"
    )
    for name in queries:
        med = {
            side: [statistics.median(x[i] for x in runs[(name, side)]) for i in range(3)]
            for side in SIDES
        }
        v1, v2 = med["v1"], med["dsv2"]
        print(
            f"  {name:9s} v1 {v1[0]:9,.0f} rows/s, {v1[1]:6.1f} µs/record (JVM {v1[2]:6.1f}); "
            f"DSv2 {v2[0]:9,.0f} rows/s, {v2[1]:6.1f} µs/record (JVM {v2[2]:6.1f}); "
            f"v1 / DSv2 rate {v1[0] / v2[0] if v2[0] else 0.0:.2f}"
        )


if __name__ == "__main__":
    main()
