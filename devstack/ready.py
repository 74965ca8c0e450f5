"""Waiting for a devstack child process to announce itself on its first stdout line.

The emulator and the fault proxy print ``READY ...`` with the ports they bound once they
accept connections; a launcher reads that one line with a deadline instead of polling ports.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time


def read_ready_line(
    proc: subprocess.Popen[bytes], timeout: float, what: str, error: type[Exception]
) -> str:
    """The first line ``proc`` prints on stdout (a pipe), without its newline.

    Raises:
        error: ``what`` printed nothing within ``timeout`` seconds, or exited first.
    """
    assert proc.stdout is not None  # the launchers pass stdout=PIPE
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buf = b""
    try:
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                msg = f"{what} did not print READY within {timeout}s (pid {proc.pid})"
                raise error(msg)
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                msg = f"{what} exited with {proc.wait(5)} before READY (cmd: {_cmd(proc)})"
                raise error(msg)
            buf += chunk
    finally:
        sel.close()
    return buf.split(b"\n", 1)[0].decode().strip()


def _cmd(proc: subprocess.Popen[bytes]) -> str:
    args = proc.args
    return " ".join(str(a) for a in args) if isinstance(args, list | tuple) else str(args)
