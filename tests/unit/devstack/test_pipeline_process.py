"""The harness signals the Python driver, never the JVM or a process the JVM is forking."""

from __future__ import annotations

import pytest

from devstack.pipeline_process import is_python_driver

pytestmark = pytest.mark.unit


def test_only_python_running_app_main_is_the_driver() -> None:
    driver = b"/work/.venv/bin/python\0/work/app/main.py\0--config\0conf/local.yaml\0"
    # The JVM (and, for an instant, every child it forks before the exec) names both.
    jvm = (
        b"/usr/lib/jvm/java-17/bin/java\0-cp\0x\0org.apache.spark.deploy.SparkSubmit\0--conf\0"
        b"spark.pyspark.python=/work/.venv/bin/python\0/work/app/main.py\0"
    )
    assert is_python_driver(driver)
    assert not is_python_driver(jvm)
    assert not is_python_driver(b"")
    assert not is_python_driver(b"/usr/bin/python3\0-m\0pyspark.daemon\0")
