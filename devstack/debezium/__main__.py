"""``python -m devstack.debezium --bootstrap B --pg-port P --dbname D --prefix X --data-dir DIR``.

Runs Kafka Connect (standalone) with Debezium's PostgreSQL connector until SIGTERM. Prints
``READY rest=http://127.0.0.1:<port> connector=<name> transaction_topic=<prefix>.transaction``
once the connector and its task are RUNNING; SIGTERM or SIGINT stops the worker (offsets
flushed) and exits 0. Exits 1 if it cannot start or dies on its own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from devstack import children
from devstack.debezium.connect import PostgresSource, start_connect
from devstack.debezium.errors import ConnectStartError


def main(argv: list[str] | None = None) -> int:
    """Parse flags, start the worker, wait for a stop signal or the worker's death."""
    parser = argparse.ArgumentParser(prog="python -m devstack.debezium", description=__doc__)
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-port", type=int, required=True)
    parser.add_argument("--pg-user", default="postgres")
    parser.add_argument("--dbname", default="postgres")
    parser.add_argument("--prefix", required=True, help="topic.prefix")
    parser.add_argument("--tables", default="", help="table.include.list (schema.table,...)")
    parser.add_argument("--slot", default="txncdc", help="replication slot name")
    parser.add_argument("--schemas", action="store_true", help="JsonConverter schemas.enable")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--rest-port", type=int, default=0, help="REST port; 0 = ephemeral")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)

    stop = children.stop_on_signals()
    source = PostgresSource(
        host=args.pg_host,
        port=args.pg_port,
        user=args.pg_user,
        dbname=args.dbname,
        topic_prefix=args.prefix,
        tables=tuple(t for t in args.tables.split(",") if t),
        slot_name=args.slot,
        schemas_enable=args.schemas,
    )
    try:
        handle = start_connect(
            args.data_dir, args.bootstrap, source, rest_port=args.rest_port, timeout=args.timeout
        )
    except ConnectStartError as e:
        print(f"ERROR {e}", file=sys.stderr, flush=True)
        return 1
    print(
        f"READY rest={handle.rest_url} connector={handle.connector} "
        f"transaction_topic={source.transaction_topic} pid={handle.pid}",
        flush=True,
    )
    return children.hold(handle, "connect", stop)


if __name__ == "__main__":
    sys.exit(main())
