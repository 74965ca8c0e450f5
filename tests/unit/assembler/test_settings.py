"""AssemblerSettings.from_options: keys, units, defaults, errors naming the key."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from assembler import AssemblerSettings, Policy, Violation
from assembler.events import EVENT_SCHEMA_PATH
from assembler.settings import OPTION_KEYS
from common.errors import ConfigError

pytestmark = pytest.mark.unit


def test_defaults() -> None:
    s = AssemblerSettings.from_options({})
    assert s == AssemblerSettings()
    assert all(s.policy(v) is Policy.REJECT for v in Violation)
    assert (s.max_txn_rows, s.max_txn_bytes, s.txn_timeout_ms) == (1_000_000, 256 * 2**20, 600_000)
    assert s.codec.encoding == "json"


def test_every_option(tmp_path: Path) -> None:
    schema = tmp_path / "x.avsc"
    schema.write_text(EVENT_SCHEMA_PATH.read_text())
    s = AssemblerSettings.from_options(
        {
            "encoding": "confluent",
            "schema-path": str(schema),
            "registry-url": "http://r:8081",
            "registry-timeout": "3s",
            "max-txn-rows": "500",
            "max-txn-bytes": "64MiB",
            "txn-timeout": "30s",
            "on-error.default": "fail",
            "on-error.no-begin": "reject",
            "on-error.txn-timeout": "REJECT",
        }
    )
    assert s.codec.encoding == "confluent"
    assert s.codec.schema_path == str(schema)
    assert s.codec.registry_url == "http://r:8081"
    assert s.codec.registry_timeout_s == 3.0
    assert (s.max_txn_rows, s.max_txn_bytes, s.txn_timeout_ms) == (500, 64 * 2**20, 30_000)
    assert s.policy(Violation.NO_BEGIN) is Policy.REJECT
    assert s.policy(Violation.TXN_TIMEOUT) is Policy.REJECT
    assert s.policy(Violation.UNDECODABLE) is Policy.FAIL
    assert pickle.loads(pickle.dumps(s)) == s


def test_every_violation_has_an_option_key() -> None:
    for v in Violation:
        s = AssemblerSettings.from_options({f"on-error.{v.value}": "fail"})
        assert [w for w in Violation if s.policy(w) is Policy.FAIL] == [v]
    assert len(OPTION_KEYS) == len(set(OPTION_KEYS))


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("10m", 600_000),
        ("30s", 30_000),
        ("500ms", 500),
        ("1500", 1500),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
    ],
)
def test_durations(value: str, ms: int) -> None:
    assert AssemblerSettings.from_options({"txn-timeout": value}).txn_timeout_ms == ms


@pytest.mark.parametrize(
    ("value", "n"),
    [
        ("1024", 1024),
        ("64MiB", 64 * 2**20),
        ("1GB", 10**9),
        ("100mb", 10**8),
        ("8k", 8000),
        ("2KiB", 2048),
    ],
)
def test_sizes(value: str, n: int) -> None:
    assert AssemblerSettings.from_options({"max-txn-bytes": value}).max_txn_bytes == n


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"encoding": "xml"}, "encoding"),
        ({"encoding": "confluent"}, "registry-url"),
        ({"max-txn-rows": "many"}, "max-txn-rows"),
        ({"max-txn-rows": "0"}, "max-txn-rows"),
        ({"max-txn-rows": "3000000000"}, "max-txn-rows"),
        ({"max-txn-bytes": "lots"}, "max-txn-bytes"),
        ({"txn-timeout": "soon"}, "txn-timeout"),
        ({"txn-timeout": "0s"}, "txn-timeout"),
        ({"on-error.default": "ignore"}, "on-error.default"),
        ({"on-error.undecodable": "drop"}, "on-error.undecodable"),
        ({"on-error.typo": "fail"}, "on-error.typo"),
        ({"max-txn-row": "5"}, "max-txn-row"),
    ],
)
def test_errors_name_the_key(options: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        AssemblerSettings.from_options(options)


def test_constructor_validates_limits() -> None:
    with pytest.raises(ConfigError, match="max_txn_rows"):
        AssemblerSettings(max_txn_rows=0)


@pytest.mark.parametrize("encoding", ["json", "avro", "confluent"])
@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (None, "cannot read schema file"),
        ("{not json", "invalid Avro schema"),
        ('{"type": "record", "name": "X", "fields": []}', "not an event record"),
    ],
)
def test_a_wrong_schema_path_fails_before_spark_starts(
    tmp_path: Path, encoding: str, schema: str | None, reason: str
) -> None:
    """Executors read schema-path at their first micro-batch; --check-config reads it first."""
    path = tmp_path / "events.avsc"
    if schema is not None:
        path.write_text(schema)
    options = {"encoding": encoding, "schema-path": str(path)}
    if encoding == "confluent":
        options["registry-url"] = "http://registry.invalid:8081"  # never asked here
    with pytest.raises(ConfigError, match=reason) as info:
        AssemblerSettings.from_options(options)
    assert str(info.value).startswith("assembler.schema-path: ")
    assert str(path) in str(info.value)
