"""Fixtures: an emulator (``starrocks_emulator``) with two tables, the proxy in front of it
(in-process) and a raw txn client pointed at the proxy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.faultproxy import ProxyHandle, start_proxy
from devstack.starrocks.launcher import EmulatorHandle
from tests.integration.faultproxy.txnclient import TxnClient, make_tables


@pytest.fixture
def emulator(starrocks_emulator: EmulatorHandle) -> EmulatorHandle:
    make_tables(starrocks_emulator)
    return starrocks_emulator


@pytest.fixture
def proxy(emulator: EmulatorHandle) -> Iterator[ProxyHandle]:
    handle = start_proxy(emulator.fe_url)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def client(proxy: ProxyHandle, emulator: EmulatorHandle) -> TxnClient:
    return TxnClient(proxy.url, (emulator.user, emulator.password))
