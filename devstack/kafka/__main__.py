"""``python -m devstack.kafka --port 9092 --data-dir DIR``: run a local broker until SIGTERM.

Prints ``READY bootstrap=127.0.0.1:<port>`` once a metadata call succeeds, so scripts can wait
for that line; SIGTERM or SIGINT stops the broker (its data is saved) and exits 0. Exits 1 if
the broker cannot start or dies on its own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from devstack import children
from devstack.kafka.broker import start_broker
from devstack.kafka.errors import BrokerStartError


def main(argv: list[str] | None = None) -> int:
    """Parse flags, start the broker, wait for a stop signal or the broker's death."""
    parser = argparse.ArgumentParser(prog="python -m devstack.kafka", description=__doc__)
    parser.add_argument("--port", type=int, default=9092, help="Kafka port; 0 = ephemeral")
    parser.add_argument("--data-dir", type=Path, required=True, help="broker data directory")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to become ready")
    args = parser.parse_args(argv)

    stop = children.stop_on_signals()
    try:
        handle = start_broker(args.data_dir, port=args.port, timeout=args.timeout)
    except BrokerStartError as e:
        print(f"ERROR {e}", file=sys.stderr, flush=True)
        return 1
    print(f"READY bootstrap={handle.bootstrap}", flush=True)
    return children.hold(handle, "broker", stop)


if __name__ == "__main__":
    sys.exit(main())
