"""The committer's :class:`~sinks.starrocks.txnapi.TxnApi` over HTTP (driver side)."""

from __future__ import annotations

from sinks.starrocks.client import StarRocksClient
from sinks.starrocks.protocol import LoadState


class HttpTxnApi:
    """``TxnApi`` on a :class:`StarRocksClient`; ``table=None`` selects multi-table mode."""

    def __init__(self, client: StarRocksClient, *, txn_timeout_s: int) -> None:
        self._client = client
        self._timeout_s = txn_timeout_s

    def begin(self, label: str, table: str | None) -> None:
        """Begin with the configured ``timeout`` (a multi-table task defaults to 20 s)."""
        self._client.begin(label, multi=table is None, table=table, timeout_s=self._timeout_s)

    def load(self, label: str, table: str, body: bytes, *, multi: bool) -> None:
        """One JSON-array body into ``label``."""
        self._client.load(label, table, body, multi=multi)

    def prepare(self, label: str, table: str) -> None:
        """Single-table prepare."""
        self._client.prepare(label, table=table)

    def commit(self, label: str, table: str | None) -> None:
        """Commit (idempotent on a committed label)."""
        self._client.commit(label, multi=table is None, table=table)

    def rollback(self, label: str, table: str | None) -> None:
        """Roll back (idempotent on an aborted label)."""
        self._client.rollback(label, multi=table is None, table=table)

    def cancel(self, label: str, table: str) -> None:
        """FE cancel of a single-table label."""
        self._client.cancel(label, table)

    def get_load_state(self, label: str) -> LoadState:
        """The FE transaction manager's status of ``label``."""
        return self._client.get_load_state(label)
