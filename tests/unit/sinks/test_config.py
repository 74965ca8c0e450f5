import re

import pytest

from common.errors import ConfigError
from sinks.starrocks.config import Secret, StarRocksSinkConfig

pytestmark = pytest.mark.unit

BASE = {
    "load-url": "fe1:8030, fe2:8030",
    "jdbc-url": "jdbc:mysql://fe1:9030",
    "database-name": "shop",
    "table-name": "orders,order_items",
    "username": "loader",
    "password": "s3cr3t-pw",
}


def parse(**overrides):
    options = {**BASE, **overrides}
    return StarRocksSinkConfig.from_options({k: v for k, v in options.items() if v is not None})


def test_minimal_options_and_defaults():
    cfg = parse()
    assert cfg.load_urls == ("http://fe1:8030", "http://fe2:8030")
    assert (cfg.jdbc_host, cfg.jdbc_port) == ("fe1", 9030)
    assert cfg.tables == ("orders", "order_items")
    assert cfg.multi_table is True
    assert cfg.label_prefix == "cdc"
    assert cfg.pipeline_name == "cdc"
    assert cfg.txn_timeout_s == 300  # at most query_timeout: audit finding 5
    assert cfg.progress_table == "_cdc_progress"
    assert cfg.dead_letter_table == "_cdc_dead_letter"
    assert cfg.properties_for("orders") == {
        "format": "json",
        "strip_outer_array": "true",
        "ignore_json_size": "true",
        # A value StarRocks cannot convert fails the load instead of loading as NULL.
        "strict_mode": "true",
    }


def test_all_options():
    cfg = parse(
        **{
            "sink.label-prefix": "shop_cdc",
            "sink.pipeline-name": "shop pipeline",
            "sink.transaction.multi-table.enabled": "false",
            "sink.buffer-flush.max-bytes": "1048576",
            "sink.buffer-flush.interval-ms": "2000",
            "sink.connect.timeout-ms": "1500",
            "sink.socket.timeout-ms": "2500",
            "sink.max-retries": "2",
            "sink.retry.backoff-ms": "10",
            "sink.retry.max-backoff-ms": "20",
            "sink.transaction.timeout-s": "60",
            "sink.prepared-timeout-s": "3600",
            "sink.commit.check-timeout-ms": "5000",
            "sink.batch.max-attempts": "4",
            "sink.progress-table": "prog",
            "sink.dead-letter-table": "dlq",
            "sink.create-system-tables": "false",
            "sink.ddl.replication-num": "1",
            "sink.properties.max_filter_ratio": "0.1",
            "sink.allow-filtered-rows": "true",
            "sink.properties.orders.partial_update": "true",
        }
    )
    assert cfg.multi_table is False
    assert cfg.max_bytes_per_load == 1048576
    assert not hasattr(cfg, "flush_interval_ms")  # the app's trigger interval, not the sink's
    assert cfg.connect_timeout_s == 1.5
    assert cfg.socket_timeout_s == 2.5
    assert cfg.retry_backoff_s == 0.01
    assert cfg.prepared_timeout_s == 3600
    assert cfg.batch_max_attempts == 4
    assert cfg.system_tables() == ("prog", "dlq")
    assert cfg.replication_num == 1
    assert cfg.properties_for("orders")["partial_update"] == "true"
    assert "partial_update" not in cfg.properties_for("order_items")
    assert cfg.properties_for("order_items")["max_filter_ratio"] == "0.1"


@pytest.mark.parametrize("key", ["load-url", "jdbc-url", "database-name", "table-name", "username"])
def test_required_options_are_named(key):
    with pytest.raises(ConfigError, match=key):
        parse(**{key: None})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sink.max-retries", "many"),
        ("sink.max-retries", "-1"),
        ("sink.buffer-flush.max-bytes", "10"),
        ("sink.transaction.multi-table.enabled", "maybe"),
        ("sink.label-prefix", "bad prefix"),
        ("sink.label-prefix", "x" * 40),
        ("jdbc-url", "mysql://fe:9030"),
        ("jdbc-url", "jdbc:mysql://fe"),
        ("load-url", "fe1"),
        ("load-url", " , "),
        ("load-url", "fe1:99999"),  # urlsplit's ValueErrors, not a traceback without the key
        ("load-url", "fe1:http"),
        ("load-url", "[::1:8030"),
        ("jdbc-url", "jdbc:mysql://[::1:9030"),
        ("database-name", "shop;drop"),
        ("table-name", "orders,bad-name"),
        ("table-name", " , "),
        ("sink.progress-table", "orders x"),
        ("sink.retry.max-backoff-ms", "1"),
        ("sink.properties.format", "csv"),
        ("sink.properties.strip_outer_array", "false"),
        ("sink.properties.label", "x"),
        ("sink.properties.orders.transaction_type", "multi"),
        ("sink.batch.max-attempts", "0"),
    ],
)
def test_invalid_values_name_the_key(key, value):
    with pytest.raises(ConfigError, match=re.escape(repr(key))):
        parse(**{key: value})


def test_unknown_option_is_rejected():
    with pytest.raises(ConfigError, match=r"sink\.lable-prefix"):
        parse(**{"sink.lable-prefix": "x"})


def test_tables_in_another_database_are_rejected_like_the_flink_connector():
    with pytest.raises(ConfigError, match="one sink writes one database"):
        parse(**{"table-name": "shop.orders,other.items"})
    assert parse(**{"table-name": "shop.orders"}).tables == ("orders",)


def test_wildcard_tables():
    cfg = parse(**{"table-name": "*"})
    assert cfg.tables is None
    assert cfg.allows_table("anything")
    assert not cfg.allows_table("_cdc_progress")


def test_allowed_tables():
    cfg = parse()
    assert cfg.allows_table("orders")
    assert cfg.allows_table("_cdc_dead_letter")
    assert not cfg.allows_table("customers")
    assert not cfg.allows_table("_cdc_progress")


def test_progress_table_cannot_be_a_target():
    with pytest.raises(ConfigError, match="progress table"):
        parse(**{"table-name": "orders,_cdc_progress"})


def test_password_is_masked_everywhere():
    cfg = parse()
    assert "s3cr3t-pw" not in repr(cfg)
    assert "s3cr3t-pw" not in str(cfg)
    assert "s3cr3t-pw" not in f"{cfg.password}"
    assert cfg.password.reveal() == "s3cr3t-pw"
    assert repr(Secret("x")) == "Secret('******')"


def test_secret_equality_and_pickle():
    import pickle

    secret = Secret("pw")
    assert pickle.loads(pickle.dumps(secret)) == secret
    assert secret != Secret("other")


def test_a_multi_table_timeout_above_query_timeout_is_a_caveat():
    """Audit finding 5: older 4.0 builds may cap a multi-table txn at query_timeout (300 s)."""
    assert parse().caveats() == []
    notes = parse(**{"sink.transaction.timeout-s": "10m"}).caveats()
    assert len(notes) == 1
    assert "query_timeout" in notes[0]
    per_table = {"sink.transaction.timeout-s": "10m", "sink.transaction.multi-table.enabled": "no"}
    assert parse(**per_table).caveats() == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sink.properties.max_filter_ratio", "0.1"),
        ("sink.properties.orders.max_filter_ratio", "1"),
        ("sink.properties.max_filter_ratio", "lots"),
    ],
)
def test_dropping_rows_needs_explicit_consent(key, value):
    # max_filter_ratio > 0 lets StarRocks drop rows silently: refuse it without the flag.
    with pytest.raises(ConfigError, match=key.replace(".", r"\.") + ".*sink.allow-filtered-rows"):
        parse(**{key: value})
    assert parse(**{key: "0"}).allow_filtered_rows is False
    per_table = {"sink.transaction.multi-table.enabled": "false"}
    if value != "lots":
        consent = {key: value, "sink.allow-filtered-rows": "true"}
        assert parse(**consent, **per_table).allow_filtered_rows
        # Multi-table answers never report dropped rows: no consent can make them visible.
        with pytest.raises(ConfigError, match=r"sink\.allow-filtered-rows.*multi-table"):
            parse(**consent)


def test_redirect_hosts_are_the_fes_plus_the_allow_list():
    cfg = parse()
    assert cfg.allows_redirect_to("fe1")
    assert cfg.allows_redirect_to("FE2")
    assert not cfg.allows_redirect_to("be1")
    cfg = parse(**{"sink.redirect.allowed-hosts": "be1, BE2"})
    assert cfg.allows_redirect_to("be1")
    assert cfg.allows_redirect_to("be2")
    assert not cfg.allows_redirect_to("evil")
    assert parse(**{"sink.redirect.allowed-hosts": "*"}).allows_redirect_to("anything")
