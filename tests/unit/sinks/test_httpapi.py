"""The HTTP TxnApi only maps ``table=None`` to multi-table calls and passes the timeout."""

import pytest

from sinks.starrocks.httpapi import HttpTxnApi
from sinks.starrocks.protocol import LoadState

pytestmark = pytest.mark.unit


class Recorder:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return LoadState.VISIBLE if name == "get_load_state" else None

        return call


def test_calls_map_to_the_client():
    client = Recorder()
    api = HttpTxnApi(client, txn_timeout_s=42)  # type: ignore[arg-type]
    api.begin("l", None)
    api.begin("l-t", "t")
    api.load("l", "t", b"[]", multi=True)
    api.prepare("l-t", "t")
    api.commit("l", None)
    api.rollback("l-t", "t")
    api.cancel("l-t", "t")
    assert api.get_load_state("l") is LoadState.VISIBLE
    assert client.calls == [
        ("begin", ("l",), {"multi": True, "table": None, "timeout_s": 42}),
        ("begin", ("l-t",), {"multi": False, "table": "t", "timeout_s": 42}),
        ("load", ("l", "t", b"[]"), {"multi": True}),
        ("prepare", ("l-t",), {"table": "t"}),
        ("commit", ("l",), {"multi": True, "table": None}),
        ("rollback", ("l-t",), {"multi": False, "table": "t"}),
        ("cancel", ("l-t", "t"), {}),
        ("get_load_state", ("l",), {}),
    ]
