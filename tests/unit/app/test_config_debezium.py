"""source.envelope=debezium: settings, topics subscribed, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import load_config
from common.errors import ConfigError
from tests.unit.app.test_config import BASE

pytestmark = pytest.mark.unit

DEBEZIUM = """
  envelope: debezium
  debezium:
    transaction-topic: shop.transaction
    table:
      public:
        orders: demo.orders
        order_items: demo.order_items
"""


@pytest.fixture
def debezium_conf(tmp_path: Path) -> Path:
    text = BASE.replace(
        "  topics: cdc.orders\n",
        "  topics: shop.public.orders,shop.public.order_items\n" + DEBEZIUM,
    )
    path = tmp_path / "conf.yaml"
    path.write_text(text)
    return path


def test_debezium_envelope_is_read_and_subscribes_the_transaction_topic(
    debezium_conf: Path,
) -> None:
    config = load_config(debezium_conf)
    dbz = config.source.debezium
    assert config.source.envelope == "debezium"
    assert dbz is not None
    assert dbz.transaction_topic == "shop.transaction"
    assert dbz.target("public", "orders") == ("demo", "orders")
    assert dbz.database == "demo"  # from starrocks.database-name
    assert dbz.core.txn_timeout_ms == 30_000  # the assembler section's limits and policies
    assert config.source.reader_options()["subscribe"] == (
        "shop.public.orders,shop.public.order_items,shop.transaction"
    )


def test_set_overrides_and_bad_keys_are_named(debezium_conf: Path) -> None:
    config = load_config(debezium_conf, ["source.debezium.snapshot-batch-rows=7"])
    assert config.source.debezium is not None
    assert config.source.debezium.snapshot_batch_rows == 7
    with pytest.raises(ConfigError, match=r"source\.debezium: unknown debezium option 'nope'"):
        load_config(debezium_conf, ["source.debezium.nope=1"])
    with pytest.raises(ConfigError, match="expected txn, debezium or maxwell"):
        load_config(debezium_conf, ["source.envelope=canal"])


def test_debezium_options_without_the_envelope_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "conf.yaml"
    path.write_text(BASE)
    assert load_config(path).source.debezium is None
    with pytest.raises(ConfigError, match=r"source\.envelope is not debezium"):
        load_config(path, ["source.debezium.transaction-topic=x.transaction"])
