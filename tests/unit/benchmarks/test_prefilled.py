"""``prefilled`` removes its stack's directory after a run, and keeps it when the run fails.

The stack and the session are stand-ins: what is tested is the directory's life, not them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

import benchmarks.workload
import devstack.kafka
import devstack.stack
from benchmarks import spark_queries
from benchmarks.workload import Shape

pytestmark = pytest.mark.unit


class _Stack:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.bootstrap = "stand-in:9092"

    def __enter__(self) -> _Stack:
        # What the broker and the emulator would write there.
        self.workdir.mkdir(parents=True)
        (self.workdir / "broker.log").write_text("log")
        return self

    def __exit__(self, *_exc: object) -> None:
        pass


class _Session:
    stopped = False

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _Session:
    spark = _Session()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(devstack.stack, "LocalStack", _Stack)
    monkeypatch.setattr(benchmarks.workload, "create_tables", lambda _stack: None)
    monkeypatch.setattr(benchmarks.workload, "prefill", lambda *_a: None)
    monkeypatch.setattr(devstack.kafka, "create_topic", lambda *_a: None)
    monkeypatch.setattr(spark_queries, "make_session", lambda _conf: spark)
    return spark


def test_a_finished_run_leaves_no_directory(session: _Session, tmp_path: Path) -> None:
    with spark_queries.prefilled(Shape(1, 1, 100), 10, 10) as bench:
        work = Path(str(spark_queries.CHECKPOINT_ROOT))
        assert (work / "stack" / "broker.log").exists()
        assert bench.max_offsets == 10
    assert session.stopped
    assert not work.exists()
    assert list(tmp_path.iterdir()) == []
    assert spark_queries.CHECKPOINT_ROOT is None


def test_a_failed_run_keeps_its_directory_and_says_where(
    session: _Session, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Path] = []

    def fail_in_run() -> None:
        with spark_queries.prefilled(Shape(1, 1, 100), 10, 10):
            seen.append(Path(str(spark_queries.CHECKPOINT_ROOT)))
            raise RuntimeError("query ended early")

    with pytest.raises(RuntimeError, match="query ended early"):
        fail_in_run()
    [work] = seen
    assert session.stopped
    assert (work / "stack" / "broker.log").exists()
    assert str(work) in capsys.readouterr().err
    assert spark_queries.CHECKPOINT_ROOT is None
