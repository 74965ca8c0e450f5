"""A deliberately raw Stream Load transaction client for the proxy tests."""

from __future__ import annotations

import json
from typing import Any

import requests

from devstack.starrocks.launcher import EmulatorHandle

DB = "fp"


class TxnClient:
    """Deliberately raw Stream Load txn client: follows 307s by hand with identical headers,
    ``Authorization`` and body (spec §1), and remembers the last ``Location`` it saw."""

    def __init__(self, base_url: str, auth: tuple[str, str]) -> None:
        self.base_url = base_url
        self.auth = auth
        self.session = requests.Session()
        self.last_location: str | None = None

    def call(
        self,
        op: str,
        label: str,
        *,
        table: str | None = None,
        multi: bool = True,
        data: Any = None,
        timeout: float = 30,
        query: str = "",
    ) -> requests.Response:
        headers = {"label": label, "db": DB}
        if table is not None:
            headers["table"] = table
        if multi:
            headers["transaction_type"] = "multi"
        method = "POST"
        if op == "load":
            method = "PUT"
            headers.update({"format": "json", "strip_outer_array": "true"})
            if isinstance(data, list):
                data = json.dumps(data).encode()
        url = f"{self.base_url}/api/transaction/{op}{query}"
        self.last_location = None
        r = self.session.request(
            method,
            url,
            headers=headers,
            data=data,
            auth=self.auth,
            allow_redirects=False,
            timeout=timeout,
        )
        if r.status_code == 307:
            self.last_location = r.headers["Location"]
            r = self.session.request(
                method,
                self.last_location,
                headers=headers,
                data=data,
                auth=self.auth,
                allow_redirects=False,
                timeout=timeout,
            )
        return r

    def status(self, op: str, label: str, **kw: Any) -> str:
        r = self.call(op, label, **kw)
        assert r.status_code == 200, r.text
        return str(r.json()["Status"])

    def state(self, label: str) -> str:
        r = self.session.get(
            f"{self.base_url}/api/{DB}/get_load_state",
            params={"label": label},
            auth=self.auth,
            timeout=10,
        )
        return str(r.json()["state"])


def make_tables(h: EmulatorHandle) -> None:
    h.sql(f"CREATE DATABASE {DB}")
    for t in ("t1", "t2"):
        h.sql(
            f"CREATE TABLE {DB}.{t} (id BIGINT NOT NULL, v VARCHAR(32)) "
            "ENGINE=OLAP PRIMARY KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1"
        )


def rows(h: EmulatorHandle, table: str) -> list[tuple[Any, ...]]:
    return h.sql(f"SELECT id, v FROM {DB}.{table} ORDER BY id")
