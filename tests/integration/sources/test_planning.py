"""The pure planning rules (no broker, no Spark): offsets JSON, rate limit, data loss, options."""

from __future__ import annotations

import pickle

import pytest

from app.sources import KafkaInputPartition, parse_options
from app.sources.offsets import check_range, from_json_dict, rate_limit, to_json_dict
from common.errors import ConfigError

pytestmark = pytest.mark.integration

BASE = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "a,b"}


def test_offsets_json_round_trip_is_the_connectors_format() -> None:
    offsets = {("a", 1): 5, ("a", 0): 3, ("b", 0): 0}
    as_json = to_json_dict(offsets)
    assert as_json == {"a": {"0": 3, "1": 5}, "b": {"0": 0}}
    assert from_json_dict(as_json) == offsets


def test_rate_limit_is_proportional_like_spark() -> None:
    start = {("a", 0): 0, ("a", 1): 0, ("a", 2): 0}
    latest = {("a", 0): 100, ("a", 1): 50, ("a", 2): 0}
    assert rate_limit(start, latest, 30) == {("a", 0): 20, ("a", 1): 10, ("a", 2): 0}


def test_rate_limit_does_not_starve_small_partitions_and_counts_new_ones_from_zero() -> None:
    start = {("a", 0): 0}
    latest = {("a", 0): 1000, ("a", 1): 1}  # a/1 is a new partition
    capped = rate_limit(start, latest, 10)
    assert capped[("a", 1)] == 1
    assert capped[("a", 0)] == 9


def test_rate_limit_leaves_everything_when_under_the_limit() -> None:
    start = {("a", 0): 5}
    latest = {("a", 0): 8}
    assert rate_limit(start, latest, 100) == latest


@pytest.mark.parametrize(
    ("planned", "log", "expected"),
    [
        ((10, 20), (0, 30), (10, 20, 0)),
        ((10, 20), (15, 30), (15, 20, 5)),
        ((10, 20), (25, 30), (25, 25, 10)),
        ((10, 20), (0, 18), (10, 18, 2)),
    ],
)
def test_check_range_reports_what_is_lost(
    planned: tuple[int, int], log: tuple[int, int], expected: tuple[int, int, int]
) -> None:
    decision = check_range(planned[0], planned[1], log[0], log[1])
    assert (decision.start, decision.end, decision.lost) == expected


def test_input_partition_pickles() -> None:
    part = KafkaInputPartition("a", 2, 10, 20)
    assert pickle.loads(pickle.dumps(part)) == part


def test_options_defaults_and_pass_through() -> None:
    opts = parse_options(
        {
            **BASE,
            "startingOffsets": '{"a":{"0":23,"1":-2}}',
            "maxOffsetsPerTrigger": "100",
            "failOnDataLoss": "false",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.password": "secret",
        }
    )
    assert opts.topics == ("a", "b")
    assert opts.starting.offsets == {("a", 0): 23, ("a", 1): -2}
    assert opts.max_offsets_per_trigger == 100
    assert opts.fail_on_data_loss is False
    assert opts.client_conf == {"security.protocol": "SASL_SSL", "sasl.password": "secret"}
    assert "secret" not in repr(opts)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers is required"),
        ({"subscribe": ""}, "subscribe is required"),
        ({"startingOffsets": "yesterday"}, "startingOffsets must be"),
        ({"startingOffsets": '{"c":{"0":1}}'}, "not in subscribe: c"),
        ({"startingOffsets": '{"a":{"0":-3}}'}, "invalid offsets"),
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be a positive"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
        ({"kafka.enable.auto.commit": "true"}, "checkpoint owns the offsets"),
        ({"kafka.auto.offset.reset": "latest"}, "checkpoint owns the offsets"),
        ({"subscribePattern": "a.*"}, "use subscribe"),
    ],
)
def test_options_errors_name_the_option(extra: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_options({**BASE, **extra})
