"""Where the query starts reading, checked against what StarRocks and Kafka say (driver, start).

Spark's checkpoint owns the Kafka offsets (STYLE.md §13). Two ways it can silently disagree with
the truth, both found in review:

* **The checkpoint is lost or moved** while StarRocks holds this pipeline's progress rows.
  ``starting-offsets: latest`` would skip everything since the last commit, ``earliest`` would
  re-apply the retained log and move rows back to old versions while it catches up. So a query
  without checkpointed offsets resumes from ``last_offset + 1`` of every partition the progress
  table knows (``source.on-lost-checkpoint: resume``), or refuses to start (``fail``), or uses
  ``starting-offsets`` as configured (``ignore``).
* **A topic is deleted and re-created**: once the new topic grows past the checkpoint's
  offsets, Spark reads on from them with no warning. Each topic's Kafka topic id is kept next to
  the checkpoint (``cdc-topic-ids.json``); a different id stops the pipeline before Spark reads.
  It is in each progress row too (``topic_id``), so that a resume without the checkpoint does
  not take a re-created topic's offsets from the old one's rows.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from app.checkpoint_files import CheckpointFiles
from app.config import AppConfig
from common.errors import CdcError, Terminal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

TOPIC_IDS_FILE = "cdc-topic-ids.json"


class StartRefusedError(CdcError, Terminal):
    """Starting would skip or rewind data; the message says what to do."""


def plan_start(
    spark: SparkSession,
    config: AppConfig,
    progress: Mapping[tuple[str, int], int],
    topic_ids: Mapping[str, str],
    partitions: Mapping[str, list[int]],
    progress_ids: Mapping[tuple[str, int], str] | None = None,
) -> str | None:
    """The ``startingOffsets`` the query must use instead of the configured one, or ``None``.

    Args:
        spark: the session (its Hadoop file system reads and writes the checkpoint).
        config: the pipeline's settings.
        progress: this pipeline's progress rows: ``(topic, partition) -> last_offset``.
        topic_ids: each subscribed topic's Kafka topic id, now.
        partitions: each subscribed topic's partitions, now.
        progress_ids: the topic id each progress row was written under, where it has one.

    Raises:
        StartRefusedError: a topic was re-created, or the checkpoint is gone and the policy or the
            envelope does not allow resuming from the progress table.
    """
    location = config.pipeline.checkpoint_location
    fs = CheckpointFiles(spark, location)
    stored = fs.read_json(TOPIC_IDS_FILE)
    merged = merge_topic_ids(stored if isinstance(stored, dict) else None, topic_ids, location)
    if merged != stored:
        fs.write_json(TOPIC_IDS_FILE, merged)
    if fs.has_offsets():
        return None
    return resume_offsets(config, progress, partitions, topic_ids, progress_ids or {})


def resume_offsets(
    config: AppConfig,
    progress: Mapping[tuple[str, int], int],
    partitions: Mapping[str, list[int]],
    topic_ids: Mapping[str, str] | None = None,
    progress_ids: Mapping[tuple[str, int], str] | None = None,
) -> str | None:
    """The ``startingOffsets`` for a checkpoint without offsets, or ``None`` to keep the configured.

    Args:
        config: the pipeline's settings.
        progress: this pipeline's progress rows: ``(topic, partition) -> last_offset``.
        partitions: each subscribed topic's partitions, now.
        topic_ids: each subscribed topic's Kafka topic id, now.
        progress_ids: the topic id each progress row was written under, where it has one.

    Raises:
        StartRefusedError: the policy (``fail``) or the envelope (Debezium) does not allow
            resuming, or a progress row belongs to a topic since deleted and re-created.
    """
    location = config.pipeline.checkpoint_location
    ours = {k: v for k, v in progress.items() if k[0] in partitions}
    policy = config.source.on_lost_checkpoint
    if not ours or policy == "ignore":
        if ours:
            log.warning(
                "checkpoint has no offsets but StarRocks holds progress of this pipeline; "
                "source.on-lost-checkpoint=ignore: starting from starting-offsets=%s",
                config.source.starting_offsets,
            )
        return None
    where = ", ".join(f"{t}-{p}@{o}" for (t, p), o in sorted(ours.items()))
    now = topic_ids or {}
    stale = sorted(
        f"{t}-{p} (topic id {i}, {now[t]} now)"
        for (t, p), i in (progress_ids or {}).items()
        if (t, p) in ours and t in now and i != now[t]
    )
    if stale:
        msg = (
            f"checkpoint {location} has no offsets, and StarRocks' progress rows of pipeline "
            f"{config.pipeline.name!r} were written for a topic since deleted and re-created: "
            f"{', '.join(stale)}. Their offsets are the old topic's, and resuming from them "
            "would skip the new one's first records. Set source.on-lost-checkpoint=ignore and "
            "source.starting-offsets=earliest to read the new topic whole"
        )
        raise StartRefusedError(msg)
    if policy == "fail" or config.source.debezium is not None:
        why = (
            "the Debezium envelope also needs the transaction topic's offsets, which the "
            "progress table does not hold"
            if config.source.debezium is not None
            else "source.on-lost-checkpoint=fail"
        )
        msg = (
            f"checkpoint {location} has no offsets, but StarRocks holds progress of pipeline "
            f"{config.pipeline.name!r} (last committed {where}); {why}. Restore the checkpoint, "
            "or set source.on-lost-checkpoint=ignore with the starting-offsets you want (JSON "
            "per partition; last_offset + 1 resumes exactly after the last commit)"
        )
        raise StartRefusedError(msg)
    default = {"earliest": -2, "latest": -1}.get(config.source.starting_offsets)
    if default is None:
        log.warning(
            "checkpoint has no offsets; source.starting-offsets is explicit JSON, so it is "
            "used as given (progress in StarRocks: %s)",
            where,
        )
        return None
    offsets = {
        topic: {str(p): ours.get((topic, p), default - 1) + 1 for p in parts}
        for topic, parts in partitions.items()
    }
    unknown = [
        f"{t}-{p}" for t, parts in sorted(partitions.items()) for p in parts if (t, p) not in ours
    ]
    log.warning(
        "checkpoint %s has no offsets: resuming from StarRocks' progress table (last "
        "committed %s), not from starting-offsets=%s%s",
        location,
        where,
        config.source.starting_offsets,
        # Nothing was committed from these: they start where starting-offsets says, and with
        # latest what reached them while the checkpoint was gone is not read.
        f"; partitions without progress start at {config.source.starting_offsets}: "
        f"{', '.join(unknown)}"
        if unknown
        else "",
    )
    return json.dumps(offsets, sort_keys=True)


def merge_topic_ids(
    stored: Mapping[str, str] | None, now: Mapping[str, str], location: str
) -> dict[str, str]:
    """The topic ids to keep with the checkpoint: the stored ones plus any new topic's.

    Args:
        stored: the ids kept with the checkpoint, ``None`` when there are none yet.
        now: each subscribed topic's Kafka topic id, now.
        location: the checkpoint location, for the message.

    Raises:
        StartRefusedError: a topic's id changed (it was deleted and re-created).
    """
    for topic, old in sorted((stored or {}).items()):
        new = now.get(topic)
        if new is not None and old != new:
            msg = (
                f"topic {topic} was deleted and re-created (Kafka topic id {old} in "
                f"checkpoint {location}, {new} now): its offsets in the checkpoint belong "
                "to the old topic, and reading on would skip the new one's records. Start "
                "with a new pipeline.checkpoint-location and source.on-lost-checkpoint=ignore "
                "(StarRocks' progress rows hold the old topic's offsets too), and source."
                "starting-offsets=earliest to read the new topic whole"
            )
            raise StartRefusedError(msg)
    return {**(stored or {}), **now}
