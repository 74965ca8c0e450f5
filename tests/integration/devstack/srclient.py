"""A deliberately raw Stream Load transaction client for protocol tests.

It follows 307s by hand (as the spec says a client must) and records which node answered, so
tests can assert both the body and who produced it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import requests

from devstack.starrocks.launcher import EmulatorHandle


@dataclass
class Resp:
    http: int
    body: dict[str, Any]
    node: str
    redirected: bool
    text: str
    location: str | None = None

    @property
    def status(self) -> str:
        return str(self.body.get("Status", self.body.get("status", "")))

    @property
    def message(self) -> str:
        return str(self.body.get("Message", self.body.get("message", "")))


class TxnClient:
    def __init__(self, h: EmulatorHandle, db: str) -> None:
        self.h = h
        self.db = db
        self.session = requests.Session()
        self.auth = (h.user, h.password)

    def call(
        self,
        op: str,
        label: str,
        *,
        table: str | None = None,
        multi: bool = False,
        data: bytes | str | None = None,
        follow: bool = True,
        auth: Any = "default",
        method: str = "POST",
        **headers: str,
    ) -> Resp:
        hdrs = {"label": label, "db": self.db}
        if table is not None:
            hdrs["table"] = table
        if multi:
            hdrs["transaction_type"] = "multi"
        hdrs.update(headers)
        if op == "load":
            method = "PUT"
            hdrs.setdefault("format", "json")
            hdrs.setdefault("strip_outer_array", "true")
        body = data.encode() if isinstance(data, str) else data
        a = self.auth if auth == "default" else auth
        url = f"{self.h.fe_url}/api/transaction/{op}"
        r = self.session.request(
            method, url, headers=hdrs, data=body, auth=a, allow_redirects=False, timeout=30
        )
        node, redirected, location = "fe", False, None
        if r.status_code == 307 and follow:
            location = r.headers["Location"]
            r = self.session.request(
                method, location, headers=hdrs, data=body, auth=a, allow_redirects=False, timeout=30
            )
            node, redirected = "be", True
        elif r.status_code == 307:
            location = r.headers["Location"]
        try:
            parsed = json.loads(r.text) if r.text else {}
        except ValueError:
            parsed = {}
        return Resp(r.status_code, parsed, node, redirected, r.text, location)

    def load(
        self,
        label: str,
        table: str,
        rows: Sequence[object],
        *,
        multi: bool = False,
        **headers: str,
    ) -> Resp:
        extra: dict[str, Any] = dict(headers)  # header names never clash with call()'s own
        return self.call("load", label, table=table, multi=multi, data=json.dumps(rows), **extra)

    def state(self, label: str, db: str | None = None) -> str:
        r = self.session.get(
            f"{self.h.fe_url}/api/{db or self.db}/get_load_state",
            params={"label": label},
            auth=self.auth,
            timeout=10,
        )
        return str(r.json()["state"])


def make_tables(h: EmulatorHandle, db: str = "d") -> None:
    h.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    h.sql(
        f"CREATE TABLE {db}.t1 (id BIGINT NOT NULL, v VARCHAR(32), amt DECIMAL(18,2)) "
        "ENGINE=OLAP PRIMARY KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1"
    )
    h.sql(
        f"CREATE TABLE {db}.t2 (id BIGINT NOT NULL, ref BIGINT, note STRING) "
        "ENGINE=OLAP PRIMARY KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1"
    )
