"""Run the real application (``spark-submit.sh``) as a child process: start, stop, kill -9.

Used by ``make demo``, the end-to-end tests and the chaos runner, so that all of them drive
the product exactly as a user does, through its supported entry point.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class PipelineProcess:
    """One run of ``spark-submit.sh --config CONFIG --set ...``.

    Output goes to ``log_path`` (appended, so restarts of one pipeline share a log), and the
    progress lines are also kept in memory for callers that watch them.
    """

    config: Path
    overrides: Sequence[str]
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    echo: bool = False
    process: subprocess.Popen[bytes] | None = None
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    def start(self) -> PipelineProcess:
        """Launch it (returns at once; Spark needs 10-20 s before the first batch)."""
        cmd = [str(REPO_ROOT / "spark-submit.sh"), "--config", str(self.config)]
        for item in self.overrides:
            cmd += ["--set", item]
        env = dict(os.environ)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        # Spark's scratch (~10 MB: the connector jars, the project zip) in the run's own folder:
        # a killed run leaves it behind, and /tmp collected one per chaos restart.
        env.setdefault("SPARK_LOCAL_DIRS", str(self.log_path.parent / "spark-local"))
        env.update(self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(  # noqa: S603 - our own script, arguments as a list
            cmd,
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill -9 reaches the JVM too
        )
        assert self.process.stdout is not None
        self._reader = threading.Thread(
            target=self._pump, args=(self.process.stdout,), daemon=True, name="pipeline-log"
        )
        self._reader.start()
        return self

    def _pump(self, stream: IO[bytes]) -> None:
        with self.log_path.open("ab") as log:
            for raw in iter(stream.readline, b""):
                log.write(raw)
                log.flush()
                line = raw.decode("utf-8", "replace").rstrip()
                self.lines.append(line)
                if self.echo and (line.startswith("batch ") or "level=ERROR" in line):
                    print(f"  [pipeline] {line}", flush=True)

    @property
    def pid(self) -> int:
        """The spark-submit (driver) PID."""
        assert self.process is not None
        return self.process.pid

    def running(self) -> bool:
        """Whether the driver is still alive."""
        return self.process is not None and self.process.poll() is None

    def wait_for_line(self, predicate: str, timeout_s: float) -> bool:
        """Wait until a log line contains ``predicate`` (or the process ends)."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            while seen < len(self.lines):
                if predicate in self.lines[seen]:
                    return True
                seen += 1
            if not self.running():
                return False
            time.sleep(0.1)
        return False

    def stop(self, timeout_s: float = 60.0) -> int:
        """Graceful stop: SIGTERM to the Python driver, which stops the query and exits.

        spark-submit runs the Python driver as a child of its JVM; signalling the JVM first
        would tear the SparkContext down under the running batch.
        """
        if self.process is None:
            return 0
        if self.running():
            driver = python_driver_pid(self.process.pid)
            if driver is not None:
                os.kill(driver, signal.SIGTERM)
            else:
                self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def kill(self) -> None:
        """Kill -9 of the whole process group: no cleanup, as a crash."""
        if self.process is None:
            return
        if self.running():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        # Python workers of a killed driver lose their parent and exit on their own, but
        # wait for the log pump so that the next run's lines do not interleave.
        if self._reader is not None:
            self._reader.join(5)

    def driver_pid(self) -> int | None:
        """PID of the Python driver (``app/main.py``) under spark-submit, once started."""
        return None if self.process is None else python_driver_pid(self.process.pid)

    def command_lines(self) -> list[bytes]:
        """Command lines of the run's live processes (JVM, Python driver, daemon, workers)."""
        return [] if self.process is None else [cmd for _, cmd in descendants(self.process.pid)]

    def returncode(self) -> int | None:
        """Exit status once ended."""
        return None if self.process is None else self.process.poll()


def python_driver_pid(root: int) -> int | None:
    """The descendant of ``root`` whose command line runs ``app/main.py``."""
    return next((pid for pid, cmd in descendants(root) if is_python_driver(cmd)), None)


def descendants(root: int) -> list[tuple[int, bytes]]:
    """``(pid, /proc/PID/cmdline)`` of every live descendant of ``root``, parents first."""
    found = []
    for pid in descendant_pids(root):
        try:
            cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes()
        except OSError:
            cmdline = b""
        found.append((pid, cmdline))
    return found


def descendant_pids(root: int) -> list[int]:
    """Every live process below ``root`` (from /proc), parents first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 of /proc/PID/stat is the parent PID; the command name may hold spaces.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def is_python_driver(cmdline: bytes) -> bool:
    """Whether a ``/proc/PID/cmdline`` is the Python driver, ``python ... app/main.py ...``.

    The program itself must be Python: the JVM's command line also names ``app/main.py`` and
    the venv's python (``spark.pyspark.python``), and so does every child it forks, for an
    instant before the exec (Hadoop runs ``chmod`` that way); a SIGTERM meant for the driver
    once killed such a spawn helper and failed the batch.
    """
    args = cmdline.split(b"\0")
    program = Path(args[0].decode(errors="replace")).name if args and args[0] else ""
    return program.startswith("python") and any(a.endswith(b"app/main.py") for a in args[1:])
