"""devstack.debezium: the worker and connector settings the pipeline relies on."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from devstack.debezium import (
    ConnectError,
    ConnectHandle,
    PostgresSource,
    connector_properties,
    worker_properties,
)

pytestmark = pytest.mark.unit


def test_connector_settings_the_assembly_depends_on() -> None:
    source = PostgresSource(
        host="127.0.0.1",
        port=5433,
        dbname="shop",
        topic_prefix="shop",
        tables=("public.orders",),
        extra={"snapshot.mode": "never"},
    )
    props = connector_properties("c1", source)
    assert props["provide.transaction.metadata"] == "true"
    assert props["plugin.name"] == "pgoutput"
    assert props["decimal.handling.mode"] == "string"
    assert props["table.include.list"] == "public.orders"
    assert props["publication.autocreate.mode"] == "filtered"
    assert props["snapshot.mode"] == "never"  # extra wins
    assert source.transaction_topic == "shop.transaction"
    assert source.data_topic("public.orders") == "shop.public.orders"


@pytest.mark.parametrize("schemas", [True, False])
def test_worker_uses_json_and_keeps_offsets_in_the_data_dir(tmp_path: Path, schemas: bool) -> None:
    props = worker_properties("b:9092", tmp_path, 8083, schemas)
    assert props["value.converter"] == "org.apache.kafka.connect.json.JsonConverter"
    assert props["value.converter.schemas.enable"] == str(schemas).lower()
    assert props["offset.storage.file.filename"] == str(tmp_path / "offsets.dat")
    assert props["listeners"] == "http://127.0.0.1:8083"


def _handle(data_dir: Path) -> ConnectHandle:
    source = PostgresSource(host="h", port=1, dbname="d", topic_prefix="p")
    return ConnectHandle("http://127.0.0.1:1", "c1", 1, data_dir, source)


def test_a_flush_is_seen_as_the_offsets_file_being_rewritten(tmp_path: Path) -> None:
    offsets = tmp_path / "offsets.dat"
    offsets.write_bytes(b"before")
    rewrite = threading.Timer(0.2, lambda: os.utime(offsets, ns=(1, 10**18)))
    rewrite.start()
    started = time.monotonic()
    _handle(tmp_path).wait_for_offset_flush(timeout=10)
    assert 0.15 < time.monotonic() - started < 5
    rewrite.join()


def test_no_flush_in_time_names_the_offsets_file(tmp_path: Path) -> None:
    (tmp_path / "offsets.dat").write_bytes(b"never rewritten")
    with pytest.raises(ConnectError, match=r"no offset flush to .*offsets\.dat in 0\.2 s"):
        _handle(tmp_path).wait_for_offset_flush(timeout=0.2)
