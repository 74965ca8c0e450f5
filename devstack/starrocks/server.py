"""Wires storage, transaction manager, faults, the two HTTP listeners and the query port."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from devstack.starrocks.faults import FaultRegistry
from devstack.starrocks.http_api import make_server
from devstack.starrocks.sqlfront import make_mysql_server
from devstack.starrocks.storage import Storage
from devstack.starrocks.txns import TxnManager

log = logging.getLogger(__name__)
# mysql-mimic logs every failed statement at ERROR; a bad query is the client's business.
logging.getLogger("mysql_mimic").setLevel(logging.CRITICAL)


@dataclass(frozen=True)
class EmulatorConfig:
    """CLI settings."""

    data_dir: Path
    host: str = "127.0.0.1"
    fe_port: int = 8030
    be_port: int = 8040
    query_port: int = 9030
    user: str = "root"
    password: str = ""
    max_running_txns: int = 100
    label_keep_seconds: float = 3 * 86400.0
    # The real txn manager checks every few seconds and the BE cleaner every 30 s; a short
    # period keeps timeout tests fast (documented deviation).
    checker_period: float = 0.2
    # When get_load_state starts to see a multi-table label: "commit" (4.0) or "first_load".
    multi_registration: str = "commit"
    # Seconds a committed label stays COMMITTED before VISIBLE (0: visible at once).
    publish_gap_s: float = 0.0


class Emulator:
    """One running emulator: call :meth:`start`, then :meth:`stop`."""

    def __init__(self, cfg: EmulatorConfig) -> None:
        self.cfg = cfg
        self.host = cfg.host
        self.user = cfg.user
        self.password = cfg.password
        self.storage = Storage(cfg.data_dir)
        self.faults = FaultRegistry()
        self._fe = make_server(cfg.host, cfg.fe_port, "fe", self)
        self._be = make_server(cfg.host, cfg.be_port, "be", self)
        self.fe_port = self._fe.server_address[1]
        self.be_port = self._be.server_address[1]
        self.txns = TxnManager(
            self.storage,
            be_address=f"{cfg.host}:{self.be_port}",
            max_running_txns=cfg.max_running_txns,
            label_keep_s=cfg.label_keep_seconds,
            multi_registration=cfg.multi_registration,
            publish_gap_s=cfg.publish_gap_s,
        )
        self.query_port = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._loop = asyncio.new_event_loop()
        self._mysql = make_mysql_server(self.storage, cfg.user, cfg.password)

    def start(self) -> None:
        """Start every listener and the checker; returns once all accept connections."""
        for srv, name in ((self._fe, "fe"), (self._be, "be")):
            t = threading.Thread(
                target=srv.serve_forever, args=(0.05,), name=f"http-{name}", daemon=True
            )
            t.start()
            self._threads.append(t)
        ready = threading.Event()
        errors: list[BaseException] = []

        def run_loop() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(
                    self._mysql.start_server(host=self.cfg.host, port=self.cfg.query_port)
                )
                self.query_port = self._mysql.sockets()[0].getsockname()[1]
            except BaseException as e:  # reported to start()'s caller below
                errors.append(e)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()

        t = threading.Thread(target=run_loop, name="mysql", daemon=True)
        t.start()
        self._threads.append(t)
        ready.wait(10)
        if errors:
            raise errors[0]
        c = threading.Thread(target=self._checker, name="txn-checker", daemon=True)
        c.start()
        self._threads.append(c)

    def _checker(self) -> None:
        while not self._stop.wait(self.cfg.checker_period):
            try:
                self.txns.check_timeouts()
            except Exception:
                log.exception("timeout checker failed")

    def stop(self) -> None:
        """Stop listeners and close storage."""
        self._stop.set()
        self._fe.shutdown()
        self._be.shutdown()
        self._fe.server_close()
        self._be.server_close()
        self._loop.call_soon_threadsafe(self._mysql.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self.storage.close()
