"""``python -m devstack.postgres --data-dir DIR [--port 0]``: run PostgreSQL until SIGTERM.

Prints ``READY host=127.0.0.1 port=<port> pid=<pid> socket_dir=<dir>`` once the server
accepts connections, so scripts can wait for that line; SIGTERM or SIGINT stops the server
(fast shutdown, data kept) and exits 0. Exits 1 if it cannot start or dies on its own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from devstack import children
from devstack.postgres.errors import PostgresStartError
from devstack.postgres.server import start_postgres


def main(argv: list[str] | None = None) -> int:
    """Parse flags, start the server, wait for a stop signal or the server's death."""
    parser = argparse.ArgumentParser(prog="python -m devstack.postgres", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 = ephemeral")
    parser.add_argument("--data-dir", type=Path, required=True, help="server data directory")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to become ready")
    args = parser.parse_args(argv)

    stop = children.stop_on_signals()
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
    return children.hold(handle, "postgres", stop)


if __name__ == "__main__":
    sys.exit(main())
