"""A Spark standalone cluster on this machine, started with pyspark's own ``bin/spark-class``.

``sbin/start-master.sh`` and ``start-worker.sh`` run exactly these classes through
``spark-daemon.sh``; pyspark's pip package ships ``spark-class`` but not those two scripts.
The master and each worker are separate JVMs, stopped by PID on exit; each executor is a
further JVM that a worker starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devstack.kafka.broker import free_port


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as resp:
            return int(json.load(resp).get("aliveworkers", 0))
    except OSError:
        return 0


@contextmanager
def standalone(
    workers: int, workdir: Path, *, cores: int = 1, memory: str = "1g", timeout_s: float = 120
) -> Iterator[str]:
    """Yield the master URL of a running master with ``workers`` registered workers."""
    workdir.mkdir(parents=True, exist_ok=True)
    port, ui = free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        log = (workdir / f"{name}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [str(spark_class()), *args], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        )

    try:
        master_args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)]
        start("master", "org.apache.spark.deploy.master.Master", *master_args)
        url = f"spark://127.0.0.1:{port}"
        for n in range(workers):
            start(
                f"worker-{n}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--cores", str(cores), "--memory", memory),
                *("--webui-port", str(free_port()), "--work-dir", str(workdir / f"w{n}")),
                url,
            )
        deadline = time.monotonic() + timeout_s
        while alive_workers(ui) < workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                msg = f"standalone cluster did not start: see {workdir}/*.log"
                raise RuntimeError(msg)
            time.sleep(0.5)
        yield url
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
