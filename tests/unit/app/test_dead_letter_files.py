"""Dead-letter files (``dead-letter.destination: file``) are on disk before Spark records the
batch, which it never replays after: written to a temporary name, synced, renamed, and the
folder synced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.pipeline import write_lines_durably

pytestmark = pytest.mark.unit


def test_the_file_is_synced_before_its_rename_and_the_folder_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync folder" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync file")
        real_fsync(fd)

    def replace(src: Path, dst: Path) -> None:
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "batch-000000000007.jsonl"

    assert write_lines_durably(target, iter(['{"a":1}\n', '{"a":2}\n'])) == 2

    assert events == ["fsync file", "rename", "fsync folder"]
    assert target.read_text() == '{"a":1}\n{"a":2}\n'
    assert list(tmp_path.iterdir()) == [target]


def test_no_lines_leave_no_file(tmp_path: Path) -> None:
    assert write_lines_durably(tmp_path / "batch-1.jsonl", iter([])) == 0
    assert list(tmp_path.iterdir()) == []
