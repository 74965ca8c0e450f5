"""The holder the devstack's servers share (Kafka, PostgreSQL, Kafka Connect)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devstack.children import Service
from devstack.debezium.connect import DebeziumConnect, PostgresSource
from devstack.debezium.errors import ConnectStartError
from devstack.kafka.broker import KafkaBroker
from devstack.kafka.errors import BrokerStartError
from devstack.postgres.errors import PostgresStartError
from devstack.postgres.server import PostgresServer


class FakeHandle:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def stop(self) -> None:
        self.calls.append("stop")

    def kill(self) -> None:
        self.calls.append("kill")


class StartError(Exception):
    pass


class FakeService(Service[FakeHandle]):
    what = "fake"
    start_error = StartError

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.launched: list[FakeHandle] = []

    def _launch(self) -> FakeHandle:
        self.launched.append(FakeHandle())
        return self.launched[-1]


def test_a_service_never_started_names_itself_and_its_dir(tmp_path: Path) -> None:
    service = FakeService(tmp_path)
    service.stop()
    service.kill()
    with pytest.raises(StartError, match=f"fake for {tmp_path} is not started"):
        _ = service.handle


def test_a_restart_gives_a_new_handle_and_a_block_stops_the_last(tmp_path: Path) -> None:
    with FakeService(tmp_path) as service:
        first = service.handle
        service.kill()
        second = service.start()
        assert service.handle is second is not first
    assert first.calls == ["kill"]
    assert second.calls == ["stop"]


SOURCE = PostgresSource(host="127.0.0.1", port=5432, dbname="demo", topic_prefix="demo")


@pytest.mark.parametrize(
    ("make", "error", "what"),
    [
        (KafkaBroker, BrokerStartError, "broker"),
        (PostgresServer, PostgresStartError, "postgres"),
        (lambda d: DebeziumConnect(d, "127.0.0.1:9092", SOURCE), ConnectStartError, "connect"),
    ],
)
def test_each_server_says_which_it_is_before_its_start(
    tmp_path: Path, make: Callable[[Path], Service[Any]], error: type[Exception], what: str
) -> None:
    with pytest.raises(error, match=f"{what} for {tmp_path} is not started"):
        _ = make(tmp_path).handle
