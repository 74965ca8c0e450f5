"""The READY-line wait shared by the emulator and fault-proxy launchers."""

import subprocess
import sys

import pytest

from devstack.ready import read_ready_line

pytestmark = pytest.mark.unit


class BoomError(Exception):
    pass


def child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)


def test_returns_the_first_line() -> None:
    proc = child("print('READY port=1', flush=True); print('more')")
    assert read_ready_line(proc, 10, "thing", BoomError) == "READY port=1"
    proc.wait(5)


def test_a_silent_child_times_out_with_its_pid() -> None:
    proc = child("import time; time.sleep(30)")
    try:
        with pytest.raises(
            BoomError, match=rf"thing did not print READY within 0.3s \(pid {proc.pid}\)"
        ):
            read_ready_line(proc, 0.3, "thing", BoomError)
    finally:
        proc.kill()
        proc.wait(5)


def test_a_child_that_exits_first_says_so() -> None:
    proc = child("import sys; sys.exit(3)")
    with pytest.raises(BoomError, match="thing exited with 3 before READY"):
        read_ready_line(proc, 10, "thing", BoomError)
