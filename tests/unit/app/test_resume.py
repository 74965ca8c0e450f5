"""Start-offset decisions of ``app/resume.py`` (pure parts: no Spark, no Kafka)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from app.config import AppConfig, load_config
from app.resume import StartRefusedError, merge_topic_ids, resume_offsets
from tests.unit.app.test_config import BASE
from tests.unit.app.test_config_debezium import DEBEZIUM

pytestmark = pytest.mark.unit

PARTS = {"cdc.orders": [0, 1, 2]}


def _load(text: str) -> AppConfig:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "conf.yaml")
        path.write_text(text)
        return load_config(path)


def _config(**source: str) -> AppConfig:
    config = _load(BASE)
    return replace(config, source=replace(config.source, **source))  # type: ignore[arg-type]


def test_progress_rows_give_last_offset_plus_one_and_the_rest_starting_offsets() -> None:
    progress = {("cdc.orders", 0): 41, ("cdc.orders", 2): 7, ("other", 0): 99}
    planned = resume_offsets(_config(starting_offsets="latest"), progress, PARTS)
    assert planned is not None
    assert json.loads(planned) == {"cdc.orders": {"0": 42, "1": -1, "2": 8}}
    planned = resume_offsets(_config(starting_offsets="earliest"), progress, PARTS)
    assert planned is not None
    assert json.loads(planned)["cdc.orders"]["1"] == -2


def test_no_progress_of_these_topics_keeps_starting_offsets() -> None:
    assert resume_offsets(_config(), {("other", 0): 5}, PARTS) is None


def test_ignore_and_explicit_json_keep_starting_offsets() -> None:
    progress = {("cdc.orders", 0): 41}
    assert resume_offsets(_config(on_lost_checkpoint="ignore"), progress, PARTS) is None
    explicit = '{"cdc.orders": {"0": 3}}'
    assert resume_offsets(_config(starting_offsets=explicit), progress, PARTS) is None


def test_fail_refuses_naming_the_partition_offset_and_the_way_out() -> None:
    with pytest.raises(StartRefusedError) as refused:
        resume_offsets(_config(on_lost_checkpoint="fail"), {("cdc.orders", 1): 9}, PARTS)
    text = str(refused.value)
    assert "cdc.orders-1@9" in text
    assert "source.on-lost-checkpoint=ignore" in text


def test_debezium_refuses_even_with_resume() -> None:
    config = _load(BASE.replace("  topics: cdc.orders\n", "  topics: cdc.orders\n" + DEBEZIUM))
    assert config.source.debezium is not None
    with pytest.raises(StartRefusedError, match="transaction topic"):
        resume_offsets(config, {("cdc.orders", 0): 1}, PARTS)


def test_topic_id_change_refuses_and_new_topics_are_added() -> None:
    assert merge_topic_ids(None, {"a": "X"}, "/ck") == {"a": "X"}
    assert merge_topic_ids({"a": "X"}, {"a": "X", "b": "Y"}, "/ck") == {"a": "X", "b": "Y"}
    # A topic no longer subscribed keeps its id (it may come back).
    assert merge_topic_ids({"a": "X", "c": "Z"}, {"a": "X"}, "/ck") == {"a": "X", "c": "Z"}
    with pytest.raises(StartRefusedError) as refused:
        merge_topic_ids({"a": "X"}, {"a": "W"}, "/ck")
    text = str(refused.value)
    assert "topic a was deleted and re-created" in text
    assert "topic id X in checkpoint /ck, W now" in text


def test_the_way_out_of_a_re_created_topic_reads_the_new_topic_whole() -> None:
    """The progress rows hold the old topic's offsets: the refusal's advice must not resume
    from them (review, 12-07: it said only a new checkpoint and earliest)."""
    with pytest.raises(StartRefusedError) as refused:
        merge_topic_ids({"cdc.orders": "OLD"}, {"cdc.orders": "NEW"}, "/ck")
    advice = str(refused.value)
    assert "source.on-lost-checkpoint=ignore" in advice
    assert "source.starting-offsets=earliest" in advice
    # As advised: a new checkpoint (no offsets), ignore, earliest.
    config = _config(on_lost_checkpoint="ignore", starting_offsets="earliest")
    old_topic = {("cdc.orders", 0): 500, ("cdc.orders", 1): 480}
    assert resume_offsets(config, old_topic, PARTS) is None  # the configured earliest


def test_the_warning_names_the_partitions_without_progress(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="app.resume"):
        resume_offsets(_config(starting_offsets="latest"), {("cdc.orders", 0): 41}, PARTS)
    assert "partitions without progress start at latest: cdc.orders-1, cdc.orders-2" in caplog.text


def test_progress_rows_of_a_re_created_topic_are_not_resumed_from() -> None:
    """Checkpoint lost and topic re-created: the progress rows' topic id is the old one's, and
    their offsets would skip the new topic's first records (left open on 12-07)."""
    progress = {("cdc.orders", 0): 500, ("cdc.orders", 1): 480}
    now = {"cdc.orders": "NEW"}
    with pytest.raises(StartRefusedError) as refused:
        resume_offsets(_config(), progress, PARTS, now, {("cdc.orders", 0): "OLD"})
    message = str(refused.value)
    assert "cdc.orders-0 (topic id OLD, NEW now)" in message
    assert "source.on-lost-checkpoint=ignore" in message
    assert "source.starting-offsets=earliest" in message
    # Rows of this topic, or written before the column: resumed from as before.
    same = {("cdc.orders", 0): "NEW"}
    assert resume_offsets(_config(), progress, PARTS, now, same) is not None
    assert resume_offsets(_config(), progress, PARTS, now, {}) is not None
    # ignore keeps starting-offsets, as advised.
    ignore = _config(on_lost_checkpoint="ignore")
    assert resume_offsets(ignore, progress, PARTS, now, {("cdc.orders", 0): "OLD"}) is None
