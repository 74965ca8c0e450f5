from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks import procstat
from benchmarks.procstat import cpu_by_role, cpu_delta, window_cpu_seconds

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


def test_a_windows_cpu_does_not_fall_when_a_process_leaves_with_its_cpu(tmp_path: Path) -> None:
    # As Python workers do: a process whose parent ignores SIGCHLD spends 0.8 s, idles, and
    # ends in the window. The kernel reaps it and adds its CPU to no parent's, so two reads of
    # the tree's total fall by what it had spent; the window counts what it spent in it. The
    # tree is the helper's: this process may have busy children of other fixtures.
    idle = tmp_path / "idle"
    helper = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        "if os.fork() == 0:\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < 0.8: pass\n"
        "    open(sys.argv[1], 'w').close()\n"
        "    time.sleep(1.0)\n"
        "    os._exit(0)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", helper, str(idle)])
    try:
        deadline = time.monotonic() + 30
        while not idle.exists():
            assert time.monotonic() < deadline, "the child never finished its work"
            time.sleep(0.02)
        before = procstat.tree_cpu_seconds(proc.pid)
        cpu = window_cpu_seconds(proc.pid, 2.5, interval_s=0.1)
        fell = procstat.tree_cpu_seconds(proc.pid) - before
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert fell < -0.5  # the old measure
    assert 0.0 <= cpu < 0.3


@contextmanager
def _waiting_jvm(tmp_path: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A JVM that prints ``ready`` and sleeps; ``args`` end its command line."""
    # The source launcher compiles the file with javac inside the JVM: its JIT is busy.
    source = tmp_path / "Wait.java"
    source.write_text(
        "public class Wait { public static void main(String[] a) throws Exception {"
        ' System.out.println("ready"); Thread.sleep(60000); } }'
    )
    java = subprocess.Popen(
        ["java", "-XX:+UseSerialGC", str(source), *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert java.stdout is not None
        assert java.stdout.readline().strip() == "ready"
        yield java
    finally:
        java.kill()
        java.wait(10)


def test_jit_compiler_threads_are_read_from_a_running_jvm(tmp_path: Path) -> None:
    with _waiting_jvm(tmp_path) as java:
        jit = procstat.jit_cpu_seconds(java.pid)
        assert 0 < jit <= procstat.cpu_seconds(java.pid)
        kinds = {kind for kind, _ in procstat.jvm_threads(java.pid).values()}
        assert {"jit", "gc", "other"} <= kinds
        # Read through the tree: this test's process has the JVM below it. A gone one: 0.
        assert procstat.jit_cpu_seconds(os.getpid()) >= jit
        assert procstat.jit_cpu_seconds(2**22 + 7) == 0


def test_the_jit_of_a_jvm_that_is_not_sparks_is_left_out(tmp_path: Path) -> None:
    # The benchmark's own Kafka broker is a JVM too (its main class on the command line).
    with _waiting_jvm(tmp_path, "kafka.Kafka") as broker:
        assert procstat.classify(broker.pid) == "broker"
        assert procstat.cpu_seconds(broker.pid) > 0
        assert procstat.jit_cpu_seconds(broker.pid) == 0


def test_jvm_threads_are_told_apart_by_their_names() -> None:
    # /proc keeps 15 bytes of a thread's name.
    kinds = {
        "Executor task l": "tasks",
        "stream executio": "stream",
        "C1 CompilerThre": "jit",
        "C2 CompilerThre": "jit",
        "GC Thread#1": "gc",
        "VM Thread": "gc",
        "dag-scheduler-e": "other",
    }
    assert {name: procstat.jvm_thread_kind(name) for name in kinds} == kinds


def test_jvm_cpu_by_thread_counts_new_threads_from_zero_and_ended_ones_apart() -> None:
    before = {(1, 10): ("tasks", 1.0), (1, 11): ("jit", 2.0), (1, 12): ("stream", 0.5)}
    # Thread 12 ended, thread 13 began; the JVM as a whole spent 4.0 s meanwhile.
    after = {(1, 10): ("tasks", 3.0), (1, 11): ("jit", 2.5), (1, 13): ("stream", 0.7)}
    by_kind = procstat.jvm_cpu_by_thread(before, after, 4.0)
    assert by_kind == pytest.approx({"tasks": 2.0, "jit": 0.5, "stream": 0.7, "exited": 0.8})
    # Never less than nothing when the threads were read a moment after the JVM.
    assert procstat.jvm_cpu_by_thread(before, after, 3.0)["exited"] == 0.0
