"""``python -m devstack.postgres --data-dir DIR [--port 0]``: run PostgreSQL until SIGTERM.

Prints ``READY host=127.0.0.1 port=<port> pid=<pid> socket_dir=<dir>`` once the server
accepts connections, so scripts can wait for that line; SIGTERM or SIGINT stops the server
(fast shutdown, data kept) and exits 0. Exits 1 if it cannot start or dies on its own.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from devstack.postgres.errors import PostgresStartError
from devstack.postgres.server import start_postgres


def main(argv: list[str] | None = None) -> int:
    """Parse flags, start the server, wait for a stop signal or the server's death."""
    parser = argparse.ArgumentParser(prog="python -m devstack.postgres", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 = ephemeral")
    parser.add_argument("--data-dir", type=Path, required=True, help="server data directory")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to become ready")
    args = parser.parse_args(argv)

    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        handle = start_postgres(args.data_dir, port=args.port, timeout=args.timeout)
    except PostgresStartError as e:
        print(f"ERROR {e}", file=sys.stderr, flush=True)
        return 1
    print(
        f"READY host={handle.host} port={handle.port} pid={handle.pid} "
        f"socket_dir={handle.socket_dir}",
        flush=True,
    )
    try:
        while not stop.wait(0.5):
            if not handle.is_running():
                print(f"ERROR postgres pid={handle.pid} exited on its own", file=sys.stderr)
                return 1
    finally:
        handle.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
