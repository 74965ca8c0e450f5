from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import procstat
from benchmarks.procstat import cpu_by_role, cpu_delta

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("cmd", "role"),
    [
        ("/usr/bin/java -Xmx1g -cp /jars/* kafka.Kafka /tmp/server.properties", "broker"),
        ("/usr/bin/java -cp /x org.apache.spark.deploy.SparkSubmit pyspark-shell", "jvm"),
        ("/venv/bin/python -m app.pydaemon pyspark.worker", "python-worker"),
        ("/venv/bin/python /repo/app/main.py --config conf/local.yaml", "python-driver"),
        ("/venv/bin/python -m devstack.starrocks --host 127.0.0.1 --fe-port 1", "emulator"),
        ("/bin/sleep 5", "other"),
    ],
)
def test_processes_are_told_apart_by_command_line(
    monkeypatch: pytest.MonkeyPatch, cmd: str, role: str
) -> None:
    monkeypatch.setattr(procstat, "cmdline", lambda _pid: cmd)
    assert procstat.classify(1) == role


def test_the_delta_is_per_role_and_never_negative() -> None:
    before = {"jvm": 10.0, "python-worker": 2.0, "broker": 1.0}
    after = {"jvm": 12.5, "python-worker": 2.0, "emulator": 0.5, "broker": 0.5}
    # A role first seen afterwards counts from 0; one that lost a process does not go below 0.
    assert cpu_delta(before, after) == {
        "jvm": 2.5,
        "python-worker": 0.0,
        "emulator": 0.5,
        "broker": 0.0,
    }


def test_a_childs_cpu_counts_under_its_role_then_under_its_parents_once_it_exits() -> None:
    # A process whose command line names the emulator's module: 0.3 s of CPU, then asleep.
    busy = (
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
        "time.sleep(30)\n"
    )
    me = os.getpid()
    before = cpu_by_role(me, driver=me)
    child = subprocess.Popen([sys.executable, "-c", busy, "devstack.starrocks"])
    try:
        deadline = time.monotonic() + 20
        while cpu_by_role(me, driver=me).get("emulator", 0.0) < 0.3:
            assert time.monotonic() < deadline, "the child never showed its CPU"
            time.sleep(0.05)
        alive = cpu_by_role(me, driver=me)
    finally:
        child.kill()
        child.wait(timeout=30)
    gone = cpu_by_role(me, driver=me)
    assert alive["emulator"] >= 0.3
    assert "emulator" not in gone
    # Waited for, the child's CPU is in this process's cutime: the driver's.
    assert gone["python-driver"] - before["python-driver"] >= 0.3


def test_jit_compiler_threads_are_read_from_a_running_jvm(tmp_path: Path) -> None:
    # The source launcher compiles the file with javac inside the JVM: its JIT is busy.
    source = tmp_path / "Wait.java"
    source.write_text(
        "public class Wait { public static void main(String[] a) throws Exception {"
        ' System.out.println("ready"); Thread.sleep(60000); } }'
    )
    java = subprocess.Popen(
        ["java", "-XX:+UseSerialGC", str(source)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert java.stdout is not None
        assert java.stdout.readline().strip() == "ready"
        jit = procstat.jit_cpu_seconds(java.pid)
        assert 0 < jit <= procstat.cpu_seconds(java.pid)
        # Read through the tree: this test's process has the JVM below it. A gone one: 0.
        assert procstat.jit_cpu_seconds(os.getpid()) >= jit
        assert procstat.jit_cpu_seconds(2**22 + 7) == 0
    finally:
        java.kill()
        java.wait(10)
