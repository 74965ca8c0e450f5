"""The source's options, parsed once into a frozen object (names follow Spark's connector).

Called on the driver when the reader is created (so a bad option fails before any batch runs);
the parsed object travels to executors inside the pickled reader.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.sources.offsets import PartitionOffsets, from_json_dict
from common.errors import ConfigError

# Client settings the source owns; letting a user set them would break "Spark's checkpoint is
# the only owner of offsets" (the official connector rejects the same ones).
_FORBIDDEN_CLIENT_KEYS = frozenset(
    {
        "enable.auto.commit",
        "auto.offset.reset",
        "enable.auto.offset.store",
        "key.deserializer",
        "value.deserializer",
    }
)


@dataclass(frozen=True)
class Starting:
    """Where a new query starts: ``earliest``, ``latest`` or explicit per-partition offsets."""

    kind: str  # "earliest" | "latest" | "offsets"
    offsets: PartitionOffsets = field(default_factory=dict)


@dataclass(frozen=True)
class KafkaSourceOptions:
    """Validated options; see docs/kafka-source.md for each one's meaning."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    starting: Starting
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    # Bounded wait for a planned range to arrive, without progress (Spark's option name).
    poll_timeout_ms: int
    fetch_offset_num_retries: int
    fetch_offset_retry_interval_ms: int
    group_id_prefix: str
    row_format: str  # "arrow" | "tuples": how read() hands rows to Spark
    # Everything after "kafka." except bootstrap.servers, passed to librdkafka unchanged.
    client_conf: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Client settings may hold sasl.password / ssl key passwords: never print their values.
        return (
            f"KafkaSourceOptions(bootstrap_servers={self.bootstrap_servers!r}, "
            f"topics={self.topics!r}, starting={self.starting.kind!r}, "
            f"max_offsets_per_trigger={self.max_offsets_per_trigger!r}, "
            f"fail_on_data_loss={self.fail_on_data_loss!r}, "
            f"client_conf_keys={sorted(self.client_conf)!r})"
        )


def parse_options(raw: Mapping[str, str]) -> KafkaSourceOptions:
    """Validate the ``readStream.option(...)`` map (keys case-insensitive).

    Raises:
        ConfigError: a required option is missing or a value is invalid; names the option.
    """
    opts = {k.lower(): str(v) for k, v in raw.items()}
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        msg = "option kafka.bootstrap.servers is required (comma list of host:port)"
        raise ConfigError(msg)
    if "assign" in opts or "subscribepattern" in opts:
        msg = "options assign and subscribePattern are not supported by cdc-kafka: use subscribe"
        raise ConfigError(msg)
    topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
    if not topics:
        msg = "option subscribe is required (comma list of topic names)"
        raise ConfigError(msg)
    if len(set(topics)) != len(topics):
        msg = f"option subscribe lists a topic twice: {','.join(topics)}"
        raise ConfigError(msg)

    client_conf: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key[len("kafka.") :]
        if name in _FORBIDDEN_CLIENT_KEYS:
            msg = (
                f"option {key} is not allowed: Spark's checkpoint owns the offsets "
                "(use startingOffsets / failOnDataLoss instead)"
            )
            raise ConfigError(msg)
        client_conf[name] = value

    return KafkaSourceOptions(
        bootstrap_servers=bootstrap,
        topics=topics,
        starting=_parse_starting(opts.get("startingoffsets", "latest"), topics),
        max_offsets_per_trigger=_positive_int(
            opts, "maxoffsetspertrigger", None, "maxOffsetsPerTrigger"
        ),
        fail_on_data_loss=_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        poll_timeout_ms=_int_option(
            opts, "kafkaconsumer.polltimeoutms", 120_000, "kafkaConsumer.pollTimeoutMs"
        ),
        fetch_offset_num_retries=_int_option(
            opts, "fetchoffset.numretries", 3, "fetchOffset.numRetries"
        ),
        fetch_offset_retry_interval_ms=_int_option(
            opts, "fetchoffset.retryintervalms", 1000, "fetchOffset.retryIntervalMs"
        ),
        group_id_prefix=opts.get("groupidprefix", "cdc-kafka-source"),
        row_format=_choice(opts.get("rowformat", "arrow"), "rowFormat", ("arrow", "tuples")),
        client_conf=client_conf,
    )


def _int_option(opts: Mapping[str, str], key: str, default: int, name: str) -> int:
    value = _positive_int(opts, key, default, name)
    return default if value is None else value


def _parse_starting(value: str, topics: tuple[str, ...]) -> Starting:
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return Starting(kind=text.lower())
    try:
        offsets = from_json_dict(json.loads(text))
    except (ValueError, TypeError, AttributeError) as e:
        msg = (
            "option startingOffsets must be earliest, latest or JSON like "
            f'{{"topic":{{"0":23,"1":-2}}}} (-2 earliest, -1 latest); got {value!r}: {e}'
        )
        raise ConfigError(msg) from e
    unknown = sorted({t for t, _ in offsets} - set(topics))
    if unknown:
        msg = f"option startingOffsets names topics not in subscribe: {', '.join(unknown)}"
        raise ConfigError(msg)
    bad = sorted(f"{t}/{p}={o}" for (t, p), o in offsets.items() if o < -2)
    if bad:
        msg = (
            f"option startingOffsets has invalid offsets (use >= 0, -1 latest, -2 earliest): {bad}"
        )
        raise ConfigError(msg)
    return Starting(kind="offsets", offsets=offsets)


def _positive_int(opts: Mapping[str, str], key: str, default: int | None, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError as e:
        msg = f"option {name} must be a positive integer, got {raw!r}"
        raise ConfigError(msg) from e
    if value <= 0:
        msg = f"option {name} must be a positive integer, got {raw!r}"
        raise ConfigError(msg)
    return value


def _bool(raw: str, name: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    msg = f"option {name} must be true or false, got {raw!r}"
    raise ConfigError(msg)


def _choice(raw: str, name: str, allowed: tuple[str, ...]) -> str:
    lowered = raw.strip().lower()
    if lowered not in allowed:
        msg = f"option {name} must be one of {', '.join(allowed)}, got {raw!r}"
        raise ConfigError(msg)
    return lowered
