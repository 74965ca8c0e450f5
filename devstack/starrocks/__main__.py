"""CLI: ``python -m devstack.starrocks --fe-port 8030 --be-port 8040 --query-port 9030 ...``.

Prints exactly one line ``READY fe=<port> be=<port> query=<port>`` on stdout when every
listener accepts connections (port 0 = ephemeral, so callers read the real ports from it),
then logs to stderr. SIGTERM or SIGINT stops it with exit status 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from devstack.starrocks.server import Emulator, EmulatorConfig


def _parse(argv: list[str] | None) -> EmulatorConfig:
    p = argparse.ArgumentParser(prog="python -m devstack.starrocks", description=__doc__)
    p.add_argument("--fe-port", type=int, default=8030)
    p.add_argument("--be-port", type=int, default=8040)
    p.add_argument("--query-port", type=int, default=9030)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--user", default="root")
    p.add_argument("--password", default="")
    p.add_argument("--max-running-txns", type=int, default=100)
    p.add_argument("--label-keep-seconds", type=float, default=3 * 86400.0)
    p.add_argument("--checker-period", type=float, default=0.2)
    p.add_argument(
        "--multi-registration",
        choices=("commit", "first_load"),
        default="commit",
        help="when get_load_state sees a multi-table label: at commit (4.0) or first load",
    )
    p.add_argument(
        "--publish-gap-ms",
        type=float,
        default=0.0,
        help="a committed label stays COMMITTED this long before VISIBLE (publish)",
    )
    p.add_argument("--log-level", default="WARNING")
    a = p.parse_args(argv)
    logging.basicConfig(
        level=a.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    return EmulatorConfig(
        data_dir=a.data_dir,
        host=a.host,
        fe_port=a.fe_port,
        be_port=a.be_port,
        query_port=a.query_port,
        user=a.user,
        password=a.password,
        max_running_txns=a.max_running_txns,
        label_keep_seconds=a.label_keep_seconds,
        checker_period=a.checker_period,
        multi_registration=a.multi_registration,
        publish_gap_s=a.publish_gap_ms / 1000.0,
    )


def main(argv: list[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT."""
    cfg = _parse(argv)
    emu = Emulator(cfg)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    emu.start()
    sys.stdout.write(f"READY fe={emu.fe_port} be={emu.be_port} query={emu.query_port}\n")
    sys.stdout.flush()
    while not stop.wait(0.1):
        pass
    emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
