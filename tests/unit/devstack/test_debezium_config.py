"""devstack.debezium: the worker and connector settings the pipeline relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.debezium import PostgresSource, connector_properties, worker_properties

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
