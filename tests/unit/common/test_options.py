"""One options layer: the same spelling rules in every section."""

from __future__ import annotations

import pickle

import pytest

from common.errors import ConfigError
from common.options import Options, Secret, is_secret_key

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "want"),
    [("true", True), ("ON", True), ("yes", True), ("1", True), ("off", False), ("No", False)],
)
def test_bool_spellings(text, want):
    assert Options({"k": text}).boolean("k", not want) is want


def test_bool_from_yaml_and_default():
    assert Options({"k": True}).boolean("k", False) is True
    assert Options({}).boolean("k", True) is True
    with pytest.raises(ConfigError, match=r"setting 'sec\.k': 'maybe' is not a boolean"):
        Options({"k": "maybe"}, "sec").boolean("k", True)


@pytest.mark.parametrize(
    ("text", "unit", "seconds"),
    [("10m", "s", 600), ("600", "s", 600), ("500ms", "s", 0.5), ("1500", "ms", 1.5),
     ("2h", "ms", 7200), ("1d", "s", 86400), ("10min", "ms", 600)],
)  # fmt: skip
def test_durations_with_the_unit_the_key_names(text, unit, seconds):
    assert Options({"k": text}).duration_s("k", 0, unit=unit) == pytest.approx(seconds)


def test_bad_duration_names_the_key():
    with pytest.raises(ConfigError, match=r"'a\.k': 'soon' is not a duration"):
        Options({"k": "soon"}, "a").duration_s("k", 0, unit="s")


@pytest.mark.parametrize(
    ("text", "size"),
    [("1048576", 1048576), ("64KiB", 65536), ("64k", 64000), ("1MB", 10**6), ("2GiB", 2 << 30)],
)
def test_sizes(text, size):
    assert Options({"k": text}).size("k", 0) == size


def test_int_bounds_and_underscores():
    assert Options({"k": "1_000"}).integer("k", 0, minimum=1) == 1000
    with pytest.raises(ConfigError, match="must be >= 1"):
        Options({"k": "0"}).integer("k", 5, minimum=1)
    with pytest.raises(ConfigError, match="not a whole number"):
        Options({"k": "many"}).integer("k", 5)


def test_secret_never_prints_and_survives_pickling():
    s = Options({"password": "hunter2"}).secret("password")
    assert "hunter2" not in f"{s} {s!r}"
    assert pickle.loads(pickle.dumps(s)) == Secret("hunter2")


@pytest.mark.parametrize(
    ("key", "secret"),
    [("starrocks.password", True), ("source.options.kafka.sasl.jaas.config", True),
     ("source.driver-options.sasl.password", True),
     # Private keys as text: Kafka's and librdkafka's names.
     ("source.options.kafka.ssl.keystore.key", True), ("source.driver-options.ssl.key.pem", True),
     ("source.driver-options.ssl.key.location", False),
     ("starrocks.username", False), ("source.format", False)],
)  # fmt: skip
def test_secret_keys(key, secret):
    assert is_secret_key(key) is secret


def test_the_issue_disagreements_are_gone():
    """``on`` and ``10m`` mean the same in the sink as in the other sections."""
    from sinks.starrocks.config import StarRocksSinkConfig

    cfg = StarRocksSinkConfig.from_options(
        {
            "load-url": "fe:8030",
            "jdbc-url": "jdbc:mysql://fe:9030",
            "database-name": "d",
            "table-name": "t",
            "username": "u",
            "sink.create-system-tables": "on",
            "sink.transaction.timeout-s": "10m",
            "sink.buffer-flush.max-bytes": "1MiB",
            "sink.commit.check-timeout-ms": "30s",
        }
    )
    assert cfg.create_system_tables is True
    assert cfg.txn_timeout_s == 600
    assert cfg.max_bytes_per_load == 1 << 20
    assert cfg.commit_check_timeout_s == 30
