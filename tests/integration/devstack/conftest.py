"""Shared fixtures for the emulator's own tests.

Most tests share one emulator per module and isolate themselves with a fresh database
(`db`), because starting a process per test would blow the suite's time budget on a loaded
2-core machine; tests that need a pristine process (restart, limits) use
``starrocks_emulator`` or start their own.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from devstack.starrocks.launcher import EmulatorHandle, start_emulator
from tests.integration.devstack.srclient import TxnClient, make_tables

_dbs = itertools.count()


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    d = tmp_path_factory.mktemp("emu")
    proc = start_emulator(d / "data", stderr_path=d / "emulator.log")
    try:
        yield proc.handle
    finally:
        proc.stop()


@pytest.fixture
def db(emu: EmulatorHandle) -> str:
    name = f"db{next(_dbs)}"
    make_tables(emu, name)
    emu.control.reset()
    return name


@pytest.fixture
def c(emu: EmulatorHandle, db: str) -> TxnClient:
    return TxnClient(emu, db)
