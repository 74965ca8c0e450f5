"""``python -m devstack.faultproxy --fe http://HOST:8030 [--listen-port 0] [--control-port 0]``.

Prints exactly one stdout line ``READY proxy=<port>`` (plus `` control=<port>`` when
``--control-port`` is given) once listening, then logs to stderr; SIGTERM/SIGINT stop it
(exit 0).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

from devstack.faultproxy.errors import FaultProxyError
from devstack.faultproxy.server import FaultProxy, ProxyConfig, Target


def _pair(text: str) -> tuple[str, str]:
    left, sep, right = text.partition("=")
    if not sep or not left or not right:
        msg = f"{text!r}: expected LEFT=RIGHT"
        raise argparse.ArgumentTypeError(msg)
    return left, right


def parse_args(argv: list[str] | None = None) -> ProxyConfig:
    """Read the command line into a :class:`ProxyConfig`."""
    p = argparse.ArgumentParser(prog="python -m devstack.faultproxy", description=__doc__)
    p.add_argument("--fe", required=True, help="FE HTTP address, http://host:8030")
    p.add_argument("--listen-host", default="127.0.0.1", help="bind address (all listeners)")
    p.add_argument("--listen-port", type=int, default=0, help="FE listener port, 0=ephemeral")
    p.add_argument("--control-port", type=int, default=None, help="extra /__faults-only port")
    p.add_argument(
        "--advertise-host",
        default=None,
        help="host written into rewritten Location headers (default: the client's Host)",
    )
    p.add_argument(
        "--be-port",
        action="append",
        type=_pair,
        default=[],
        metavar="BE_HOST:BE_PORT=PORT",
        help="fixed proxy port for a BE named in Location (repeatable; default ephemeral)",
    )
    p.add_argument(
        "--map",
        action="append",
        type=_pair,
        default=[],
        metavar="HOST:PORT=HOST:PORT",
        help="connect to the right side when a Location names the left side (repeatable)",
    )
    p.add_argument("--upstream-timeout", type=float, default=300.0, help="seconds")
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    logging.basicConfig(
        level=a.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    try:
        return ProxyConfig(
            fe=Target.parse(a.fe),
            listen_host=a.listen_host,
            listen_port=a.listen_port,
            control_port=a.control_port,
            advertise_host=a.advertise_host,
            be_ports={Target.parse(k): int(v) for k, v in a.be_port},
            upstream_map={Target.parse(k): Target.parse(v) for k, v in a.map},
            upstream_timeout=a.upstream_timeout,
        )
    except (FaultProxyError, ValueError) as e:
        p.error(str(e))


def main(argv: list[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT."""
    config = parse_args(argv)
    proxy = FaultProxy(config)
    try:
        proxy.start()
    except FaultProxyError as e:
        print(f"faultproxy: {e}", file=sys.stderr)
        return 2
    done = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    ready = f"READY proxy={proxy.port}"
    if proxy.control_port is not None:
        ready += f" control={proxy.control_port}"
    print(ready, flush=True)
    while not done.wait(1.0):
        pass
    proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
