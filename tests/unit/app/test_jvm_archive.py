"""The driver JVM's class archive is named by its JDK and Spark jars (app/jvm_archive.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app import jvm_archive

pytestmark = pytest.mark.unit


@pytest.fixture
def jdk_and_jars(tmp_path: Path) -> tuple[Path, Path]:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_bytes(b"java")
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("spark-core.jar", "spark-sql.jar"):
        (jars / name).write_bytes(b"classes")
    return java, jars


def test_the_key_changes_with_the_jdk_or_any_spark_jar(jdk_and_jars: tuple[Path, Path]) -> None:
    java, jars = jdk_and_jars
    key = jvm_archive.archive_key(java, jars)
    assert key is not None
    assert jvm_archive.archive_key(java, jars) == key
    (jars / "spark-sql.jar").write_bytes(b"other classes")
    changed_jar = jvm_archive.archive_key(java, jars)
    assert changed_jar not in (None, key)
    os.utime(java, ns=(1, 1))
    assert jvm_archive.archive_key(java, jars) not in (None, key, changed_jar)


def test_the_option_names_the_archive_only_once_it_exists(
    jdk_and_jars: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java, jars = jdk_and_jars
    monkeypatch.setattr(jvm_archive, "java_binary", lambda: java)
    monkeypatch.setattr(jvm_archive, "spark_jars_dir", lambda: jars)
    monkeypatch.setattr(jvm_archive, "ARCHIVE_DIR", tmp_path / "cds")
    path = jvm_archive.archive_path()
    assert path is not None
    assert path.parent == tmp_path / "cds"
    # No archive (setup not run, or another JDK's): the JVM starts as it always did.
    assert jvm_archive.archive_option() == ""
    assert jvm_archive.with_archive("-Xss8m") == "-Xss8m"
    path.parent.mkdir()
    path.write_bytes(b"archive")
    assert jvm_archive.archive_option() == f"-XX:SharedArchiveFile={path}"
    assert jvm_archive.with_archive("-Xss8m") == f"-Xss8m -XX:SharedArchiveFile={path}"
    # A new PySpark: another key, so the old archive is not offered to its JVM.
    (jars / "spark-core.jar").write_bytes(b"newer classes")
    assert jvm_archive.archive_option() == ""


def test_no_key_without_a_jdk_or_pyspark(
    jdk_and_jars: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    java, jars = jdk_and_jars
    monkeypatch.setattr(jvm_archive, "java_binary", lambda: None)
    assert jvm_archive.archive_key(None, jars) is None
    monkeypatch.setattr(jvm_archive, "java_binary", lambda: java)
    monkeypatch.setattr(jvm_archive, "spark_jars_dir", lambda: None)
    assert jvm_archive.archive_key() is None
    assert jvm_archive.archive_option() == ""


def test_java_is_the_one_java_home_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_bytes(b"java")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert jvm_archive.java_binary() == java.resolve()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    assert jvm_archive.java_binary() is None
