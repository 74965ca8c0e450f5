"""The pipeline's files next to Spark's checkpoint are replaced atomically: a driver killed
while writing one leaves the old content or the new, never a torn file that stops every later
start (review 12-08: ``cdc-txn-limits.json`` rewritten in place)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.checkpoint_files import CheckpointFiles

pytestmark = pytest.mark.integration


def test_a_write_killed_half_way_leaves_the_old_content(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = CheckpointFiles(spark, str(tmp_path))
    files.write_json("cdc-x.json", {"v": 1})

    def killed(*_args: Any, **_kwargs: Any) -> str:
        raise SystemExit("kill -9")

    monkeypatch.setattr(json, "dumps", killed)
    with pytest.raises(SystemExit):
        files.write_json("cdc-x.json", {"v": 2})
    monkeypatch.undo()

    assert files.read_json("cdc-x.json") == {"v": 1}
    files.write_json("cdc-x.json", {"v": 2})
    assert files.read_json("cdc-x.json") == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "cdc-x.json"
    ]


def test_a_write_killed_between_its_delete_and_its_rename_is_read_from_its_copy(
    spark: Any, tmp_path: Path
) -> None:
    files = CheckpointFiles(spark, str(tmp_path))
    (tmp_path / "cdc-x.json.tmp").write_text(json.dumps({"v": 3}))  # the old file gone
    assert files.exists("cdc-x.json")
    assert files.read_json("cdc-x.json") == {"v": 3}
    files.write_json("cdc-x.json", {"v": 4})
    assert files.read_json("cdc-x.json") == {"v": 4}
    assert files.delete("cdc-x.json")
    assert not files.exists("cdc-x.json")
