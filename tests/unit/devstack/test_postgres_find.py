"""find_pg_bin: Debian's side-by-side layout, newest usable major first."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.postgres import PostgresStartError, server

pytestmark = pytest.mark.unit


def _major(root: Path, name: str) -> Path:
    folder = root / name / "bin"
    folder.mkdir(parents=True)
    (folder / "initdb").write_text("")
    (folder / "postgres").write_text("")
    return folder


def test_newest_major_at_least_15_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PG_BIN", raising=False)
    monkeypatch.setattr(server, "DEBIAN_ROOT", tmp_path)
    _major(tmp_path, "13")
    _major(tmp_path, "15")
    newest = _major(tmp_path, "17")
    (tmp_path / "notaversion").mkdir()
    assert server.find_pg_bin() == newest


def test_only_old_majors_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PG_BIN", raising=False)
    monkeypatch.setattr(server, "DEBIAN_ROOT", tmp_path)
    _major(tmp_path, "14")
    with pytest.raises(PostgresStartError, match=r"found: 14.*PG_BIN"):
        server.find_pg_bin()


def test_pg_bin_overrides_the_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    custom = _major(tmp_path / "custom", "x")
    monkeypatch.setenv("PG_BIN", str(custom))
    monkeypatch.setattr(server, "DEBIAN_ROOT", tmp_path / "missing")
    assert server.find_pg_bin() == custom
