"""No warm-up where Spark would not hand the warmed workers on (app/warmup.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from app.warmup import warm_python_workers


def _session(conf: dict[str, str]) -> Any:
    def fail(*_: Any) -> None:
        raise AssertionError("no job without worker reuse")

    context = SimpleNamespace(getConf=lambda: SimpleNamespace(get=conf.get), defaultParallelism=2)
    return SimpleNamespace(sparkContext=context, range=fail)


def test_no_warm_up_when_workers_are_not_reused() -> None:
    assert warm_python_workers(_session({"spark.python.worker.reuse": "false"})) is None
