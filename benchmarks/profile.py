"""Summaries of py-spy ``--format raw`` output (collapsed stacks: ``f1;f2;...;fN count``).

Self time is attributed to the leaf frame; each leaf is also put in a coarse category by the
file it is in, and the inclusive share of a few project entry points is counted per stack.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^():]+)(?::(?P<line>\d+))?\)$")

# (category, substring of the file path), first match wins.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("Python imports (worker start-up)", "<frozen zipimport>"),
    ("Python imports (worker start-up)", "<frozen importlib"),
    ("assembler core (assembler/)", "/assembler/"),
    ("assembler adapter (app/assembly.py)", "app/assembly.py"),
    ("StarRocks sink (sinks/)", "/sinks/"),
    ("pipeline / driver (app/)", "/app/"),
    ("confluent-kafka", "confluent_kafka"),
    ("pandas", "/pandas/"),
    ("pyarrow", "/pyarrow/"),
    ("PySpark worker / serializers", "/pyspark/"),
    ("py4j (driver <-> JVM)", "/py4j/"),
    ("json", "/json/"),
    ("requests / urllib3 / http", "requests/"),
    ("requests / urllib3 / http", "urllib3/"),
    ("requests / urllib3 / http", "/http/"),
    ("socket / select (I/O wait)", "socket.py"),
    ("socket / select (I/O wait)", "selectors.py"),
    ("threading", "threading.py"),
)

# Inclusive shares: a stack counts once for each of these if any of its frames matches.
INCLUSIVE: tuple[tuple[str, str, str], ...] = (
    ("assembler adapter + core (AssembleSlot.__call__)", "__call__", "app/assembly.py"),
    ("TransactionAssembler.process", "process", "assembler/machine.py"),
    ("event decoding (assembler/codecs.py)", "", "assembler/codecs.py"),
    ("state buffer encode/decode (assembler/buffer.py)", "", "assembler/buffer.py"),
    ("pandas -> SourceRecord (_chunk_records)", "_chunk_records", "app/assembly.py"),
    ("Arrow <-> pandas (pyspark/sql/pandas)", "", "pyspark/sql/pandas/"),
    ("sink loader on executors (sinks/starrocks/loader.py)", "", "sinks/starrocks/loader.py"),
)


def category(file: str) -> str:
    for name, needle in CATEGORIES:
        if needle in file:
            return name
    return "other Python" if file.endswith(".py") else "native / other"


def parse(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        head, _, count = line.rpartition(" ")
        if not head or not count.isdigit():
            continue
        stacks.append((head.split(";"), int(count)))
    return stacks


def summarize(path: Path, top: int = 15) -> dict[str, Any]:
    """Top self-time functions, self time by category, inclusive shares of key entry points."""
    stacks = parse(path)
    total = sum(c for _, c in stacks)
    if not total:
        return {"samples": 0}
    by_func: Counter[str] = Counter()
    by_cat: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    idle = 0
    for frames, count in stacks:
        leaf = frames[-1]
        m = _FRAME.match(leaf)
        file = m.group("file") if m else ""
        if (m and m.group("func") == "manager" and file.endswith("daemon.py")) or (
            not m and leaf.startswith("process ")
        ):
            # The pyspark.daemon parent waiting for work (py-spy does not see it as idle).
            idle += count
            continue
        func = f"{m.group('func')} ({_short(file)})" if m else leaf
        by_func[func] += count
        by_cat[category(file)] += count
        parsed = [_FRAME.match(f) for f in frames]
        for name, func_name, needle in INCLUSIVE:
            if any(
                p is not None
                and needle in p.group("file")
                and (not func_name or p.group("func") == func_name)
                for p in parsed
            ):
                inclusive[name] += count
    total -= idle
    if total <= 0:
        return {"samples": 0}
    return {
        "samples": total,
        "daemon_idle_samples": idle,
        "top_self": [(f, c / total) for f, c in by_func.most_common(top)],
        "self_by_category": [(k, c / total) for k, c in by_cat.most_common()],
        "inclusive": [(k, c / total) for k, c in inclusive.most_common()],
    }


#: The project's top-level packages (this checkout's): a path is shown from the first of them,
#: wherever the profiled checkout is (py-spy records absolute paths).
_PROJECT_PACKAGES = frozenset(
    init.parent.name for init in Path(__file__).resolve().parents[1].glob("*/__init__.py")
)


def _short(file: str) -> str:
    if "site-packages/" in file:
        return file.split("site-packages/", 1)[1]
    parts = file.split("/")
    for i, part in enumerate(parts[:-1]):
        if i and part in _PROJECT_PACKAGES:
            return "/".join(parts[i:])
    if "python3.11/" in file:
        return file.split("python3.11/", 1)[1]
    return file
