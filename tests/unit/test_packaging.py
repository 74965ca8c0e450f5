"""docker-compose.yml, the Dockerfile and spark-submit.sh: checked here, since Docker cannot run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import load_config
from tests.fixtures.submit import submitted_java_options

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_the_whole_demo_with_health_checks() -> None:
    services = compose()["services"]
    assert set(services) >= {"kafka", "starrocks", "ddl", "generator", "pipeline", "verifier"}
    assert "healthcheck" in services["kafka"]
    assert "healthcheck" in services["starrocks"]
    assert services["starrocks"]["image"].startswith("starrocks/allin1-ubuntu:4.")
    assert "KAFKA_PROCESS_ROLES" in services["kafka"]["environment"]  # KRaft, no ZooKeeper
    pipeline = services["pipeline"]
    assert pipeline["command"][:3] == ["./spark-submit.sh", "--config", "conf/docker.yaml"]
    assert pipeline["depends_on"]["ddl"]["condition"] == "service_completed_successfully"
    for name, service in services.items():
        for dep in service.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown service {dep}"


def test_compose_files_exist_and_its_config_is_valid() -> None:
    services = compose()["services"]
    for service in services.values():
        build = service.get("build")
        if build:
            assert (ROOT / build["context"] / build["dockerfile"]).is_file()
        for arg in service.get("command", []):
            if arg.startswith(("conf/", "./")):
                assert (ROOT / arg).exists(), arg
    config = load_config(ROOT / "conf" / "docker.yaml")
    assert config.source.format == "kafka"  # the official connector on the real stack
    assert config.source.bootstrap_servers == "kafka:9092"


def test_dockerfile_copies_only_what_exists() -> None:
    for line in (ROOT / "docker" / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), src


def test_local_config_is_valid() -> None:
    config = load_config(ROOT / "conf" / "local.yaml")
    assert config.source.format == "kafka"
    assert config.pipeline.trigger_interval_ms == 1000


def test_spark_submit_script_parses_and_rejects_bad_settings() -> None:
    script = ROOT / "spark-submit.sh"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    bad = subprocess.run(
        [str(script), "--config", "conf/local.yaml", "--set", "source.format=jdbc"],
        cwd=ROOT,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert "source.format" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("args", "out"),
    [
        (["--get", "source.format"], "kafka\n"),
        (["--check-config"], "config ok\n"),
        (["--help"], "usage: "),
    ],
)
def test_spark_submit_script_answers_setting_queries_without_spark(
    args: list[str], out: str
) -> None:
    # A script reading one setting must get just that line: no JVM start, no Spark log lines.
    done = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "--config", "conf/local.yaml", *args],
        cwd=ROOT,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_SUBMIT": "/bin/false"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(out)


def _python_wrapper(path: Path, *flags: str) -> Path:
    """A Python launcher alone in its folder (no ``spark-submit`` beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" {" ".join(flags)} "$@"\n')
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("flags", "path", "says"),
    [
        # -S: no site-packages, so neither PySpark nor PyYAML.
        (("-S",), "/usr/bin:/bin", "has no PySpark: run 'make setup'"),
        ((), "/usr/bin:/bin", "set SPARK_SUBMIT"),
    ],
)
def test_spark_submit_script_says_what_is_missing_before_a_set_up(
    tmp_path: Path, flags: tuple[str, ...], path: str, says: str
) -> None:
    python = _python_wrapper(tmp_path / "bin" / "python", *flags)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT", "SPARK_HOME")}
    done = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "--config", "conf/local.yaml"],
        cwd=ROOT,
        env={**env, "PYSPARK_PYTHON": str(python), "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert says in done.stderr


def _pom_property(pom: Path, name: str) -> str:
    match = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text())
    assert match, f"{name} not in {pom}"
    return match.group(1)


def test_connector_is_the_pinned_pyspark_release() -> None:
    pin = re.search(r'"pyspark==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin, "pyspark must be pinned to the connector's release"
    assert _pom_property(ROOT / "jvm" / "spark-kafka" / "pom.xml", "spark.version") == pin.group(1)


def test_compose_runs_the_local_stacks_kafka_release() -> None:
    kafka = _pom_property(ROOT / "jvm" / "kafka-broker" / "pom.xml", "kafka.version")
    assert compose()["services"]["kafka"]["image"] == f"apache/kafka:{kafka}"
    for port in compose()["services"]["starrocks"]["ports"]:
        assert port.startswith("127.0.0.1:"), "StarRocks' root has no password: loopback only"


def test_wheel_and_executor_zip_ship_only_the_product() -> None:
    # devstack/ and demo/ run from a checkout; executors and users' installs never import them.
    from setuptools import find_packages

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = set(find_packages(str(ROOT), include=include))
    assert {"app", "assembler", "sinks", "sinks.starrocks", "common"} <= shipped
    assert not {p for p in shipped if p.split(".")[0] in ("devstack", "demo", "tests")}
    zipped = (ROOT / "spark-submit.sh").read_text()
    assert 'for pkg in ("app", "assembler", "sinks", "common")' in zipped


def test_spark_submit_script_gives_the_driver_the_apps_java_options(tmp_path: Path) -> None:
    # spark-submit starts the driver JVM before app.session runs: the script must pass the
    # same options (the stack size, the collector) that an in-process start gets.
    from app.session import DRIVER_JAVA_OPTIONS

    fake = tmp_path / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_SUBMIT": str(fake)}
    options = submitted_java_options(fake, env)
    assert DRIVER_JAVA_OPTIONS.split() == options[: len(DRIVER_JAVA_OPTIONS.split())]
    assert "-XX:+UseParallelGC" in options
