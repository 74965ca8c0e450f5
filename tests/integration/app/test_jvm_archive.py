"""The driver JVM maps Spark's classes from `make setup`'s archive (app/jvm_archive.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.jvm_archive import archive_option
from tests.fixtures.submit import submitted_java_options

pytestmark = pytest.mark.integration

SETUP = (
    "no class archive for this JDK and PySpark: `make setup` makes it (python -m app.jvm_archive)"
)


def test_spark_submit_script_gives_the_driver_the_archive(tmp_path: Path) -> None:
    option = archive_option()
    assert option, SETUP
    # The script maps the archive only for this Python's own spark-submit (the archive is of
    # its jars): a Python beside a fake spark-submit that prints what it was given.
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = {
        k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT", "PYSPARK_DRIVER_PYTHON")
    }
    options = submitted_java_options(
        tmp_path / "spark-submit", {**env, "PYSPARK_PYTHON": str(python)}
    )
    assert option in options


def test_the_drivers_spark_classes_come_from_the_archive(tmp_path: Path) -> None:
    option = archive_option()
    assert option, SETUP
    job = tmp_path / "job.py"
    job.write_text(
        "from pyspark.sql import SparkSession\n"
        "s = SparkSession.builder.master('local[1]').getOrCreate()\n"
        "print('rows', s.range(10).count())\n"
        "s.stop()\n"
    )
    loaded = tmp_path / "classes.log"
    # -Xshare:on: a JVM that cannot map the archive fails instead of starting without it.
    java_options = f"-Xshare:on {option} -Xlog:class+load=info:file={loaded}"
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--driver-java-options",
            java_options,
            str(job),
        ],
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "rows 10" in done.stdout
    sources = {
        line.split()[1]: line
        for line in loaded.read_text().splitlines()
        if "org.apache.spark." in line and len(line.split()) > 1
    }
    spark_context = sources["org.apache.spark.SparkContext"]
    assert "shared objects file (top)" in spark_context, spark_context
    # Lambdas' hidden classes name their defining class as source; the rest is the archive or
    # a jar (a class the training run never loaded).
    shared = sum("shared objects file (top)" in line for line in sources.values())
    from_jars = sum("source: jar:" in line or "source: file:" in line for line in sources.values())
    assert shared > 9 * from_jars, f"{shared} Spark classes from the archive, {from_jars} from jars"
