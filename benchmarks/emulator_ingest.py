"""Ingest ceiling of the StarRocks emulator itself: rows/s and MB/s loaded *and committed*.

Each scenario runs begin -> loads of N-row JSON chunks (307 followed by hand, as a real client
does) -> commit, and the clock covers all of it. Bodies are serialised before the clock starts,
so the numbers are the emulator's (HTTP + JSON parse + type conversion + SQLite commit), not the
client's. Run: ``.venv/bin/python -m benchmarks.emulator_ingest [--rows N] [--chunk N]`` (as a
module: it imports ``devstack`` from the project root).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import requests

from devstack.starrocks.launcher import EmulatorHandle, start_emulator

DDL = (
    "CREATE TABLE bench.{t} (id BIGINT NOT NULL, customer VARCHAR(32), amount DECIMAL(18,2), "
    "qty INT, ts DATETIME, note VARCHAR(64)) PRIMARY KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 4"
)


def cpu_seconds(pid: int) -> float:
    """User+system CPU of the emulator process.

    On a shared, loaded machine wall-clock rows/s mostly measures the neighbours; rows per
    emulator CPU-second does not.
    """
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make_chunks(rows: int, chunk: int, offset: int) -> list[bytes]:
    out = []
    for start in range(0, rows, chunk):
        docs = [
            {
                "id": offset + i,
                "customer": f"customer-{i % 9973:05d}",
                "amount": f"{(i % 100000) / 100:.2f}",
                "qty": i % 17,
                "ts": "2026-11-22 07:00:00",
                "note": "lorem ipsum dolor sit",
                "__op": 0,
            }
            for i in range(start, min(rows, start + chunk))
        ]
        out.append(json.dumps(docs, separators=(",", ":")).encode())
    return out


def call(
    s: requests.Session,
    h: EmulatorHandle,
    op: str,
    headers: dict[str, str],
    body: bytes | None = None,
) -> dict[str, object]:
    method = "PUT" if op == "load" else "POST"
    url = f"{h.fe_url}/api/transaction/{op}"
    r = s.request(
        method,
        url,
        headers=headers,
        data=body,
        auth=(h.user, h.password),
        allow_redirects=False,
        timeout=300,
    )
    if r.status_code == 307:
        r = s.request(
            method,
            r.headers["Location"],
            headers=headers,
            data=body,
            auth=(h.user, h.password),
            allow_redirects=False,
            timeout=300,
        )
    out: dict[str, object] = r.json()
    if out.get("Status") != "OK":
        raise RuntimeError(f"{op} failed: {out}")
    return out


def run(
    h: EmulatorHandle, label: str, tables: list[str], rows: int, chunk: int, multi: bool
) -> tuple[float, int]:
    s = requests.Session()
    per_table = rows // len(tables)
    bodies = {t: make_chunks(per_table, chunk, 0) for t in tables}
    nbytes = sum(len(b) for bs in bodies.values() for b in bs)
    base = {"label": label, "db": "bench", "timeout": "600"}
    if multi:
        base["transaction_type"] = "multi"
    else:
        base["table"] = tables[0]
    load_h = {"format": "json", "strip_outer_array": "true"}
    t0 = time.perf_counter()
    call(s, h, "begin", base)
    for i in range(len(bodies[tables[0]])):
        for t in tables:
            call(s, h, "load", {**base, **load_h, "table": t}, bodies[t][i])
    call(s, h, "commit", base)
    elapsed = time.perf_counter() - t0
    got = h.sql(f"SELECT COUNT(*) FROM bench.{tables[0]}")[0][0]
    assert got == per_table, (got, per_table)
    return elapsed, nbytes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=200_000, help="rows per scenario (all tables)")
    p.add_argument("--chunk", type=int, default=10_000, help="rows per load request")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        proc = start_emulator(Path(d) / "data")
        try:
            h = proc.handle
            h.sql("CREATE DATABASE bench")
            scenarios = [
                ("single-table txn, 1 table", ["s1"], False),
                ("multi-table txn, 1 table", ["m1"], True),
                ("multi-table txn, 2 tables", ["a2", "b2"], True),
            ]
            print(f"rows={a.rows} chunk={a.chunk} (rows/s and MB/s: loaded and committed)")
            print(
                f"{'scenario':<28} {'rows':>9} {'MB':>7} {'s':>7} {'rows/s':>10} {'MB/s':>7}"
                f" {'emu cpu-s':>9} {'rows/cpu-s':>10}"
            )
            for i, (name, tables, multi) in enumerate(scenarios):
                for t in tables:
                    h.sql(DDL.format(t=t))
                cpu0 = cpu_seconds(h.pid)
                secs, nbytes = run(h, f"bench{i}", tables, a.rows, a.chunk, multi)
                cpu = cpu_seconds(h.pid) - cpu0
                mb = nbytes / 1e6
                print(
                    f"{name:<28} {a.rows:>9} {mb:>7.1f} {secs:>7.2f} "
                    f"{a.rows / secs:>10.0f} {mb / secs:>7.1f} {cpu:>9.2f} {a.rows / cpu:>10.0f}"
                )
        finally:
            proc.stop()


if __name__ == "__main__":
    main()
