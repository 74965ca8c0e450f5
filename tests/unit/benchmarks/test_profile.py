"""py-spy summaries name files from the project's packages, wherever the checkout is."""

from __future__ import annotations

from pathlib import Path

from benchmarks.profile import summarize


def test_functions_are_named_by_project_relative_paths(tmp_path: Path) -> None:
    raw = tmp_path / "workers.txt"
    raw.write_text(
        "main (/tmp/ci-x/app/main.py:3);encode_row (/tmp/ci-x/sinks/starrocks/loader.py:9) 3\n"
        "f (/srv/checkout/.venv/lib/python3.11/site-packages/pandas/core/frame.py:1) 2\n"
        "g (/usr/lib/python3.11/json/decoder.py:5) 1\n"
    )
    top = dict(summarize(raw)["top_self"])
    assert set(top) == {
        "encode_row (sinks/starrocks/loader.py)",
        "f (pandas/core/frame.py)",
        "g (json/decoder.py)",
    }
    assert top["encode_row (sinks/starrocks/loader.py)"] == 0.5
