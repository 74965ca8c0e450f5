"""Settings at the edge: YAML file, ``--set`` flags and ``CDC_*`` environment variables.

They are read once at start into frozen typed objects and validated before Spark starts.

Precedence, lowest first: built-in defaults, the YAML file, environment variables, ``--set``.

Keys are dotted paths ``section.key``; each takes one value, except the comma lists
(:data:`COMMA_LISTS`), which take a YAML list too. Six sections are free-form maps whose keys
are passed on verbatim to the component that owns them (so their names can follow that
component's conventions, e.g. the StarRocks Flink connector's ``sink.label-prefix``):
``assembler.*``, ``starrocks.*``, ``source.options.*`` (Spark's Java Kafka consumer),
``source.driver-options.*`` (the driver's librdkafka clients), ``source.debezium.*`` and
``spark.conf.*``.

An environment variable overrides a key that exists in the defaults or the file: its name is
``CDC_`` plus the dotted key upper-cased with every other character turned into ``_``
(``starrocks.password`` -> ``CDC_STARROCKS_PASSWORD``). Secrets belong there, not in files.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from app.kafka_client_configs import CONSUMER_CONFIGS, KAFKA_CLIENTS_VERSION
from app.kafka_driver import DRIVER_OPTIONS, DriverKafka, driver_kafka
from app.source import CONSUMER_DEFAULTS, KAFKA_POLL_RECORDS, POLL_RECORDS_KEY
from assembler.codecs import CodecSettings
from assembler.debezium import DebeziumSettings
from assembler.settings import AssemblerSettings, Targets
from common.errors import ConfigError
from common.options import Options, is_secret_key
from sinks.starrocks.config import StarRocksSinkConfig

MAP_SECTIONS = (
    "assembler",
    "starrocks",
    "source.options",
    DRIVER_OPTIONS,
    "source.debezium",
    "spark.conf",
)

# Keys whose value is a comma-separated list: a YAML list of plain values is joined into one.
COMMA_LISTS = frozenset(
    {
        "source.topics",
        "source.bootstrap-servers",
        "starrocks.load-url",
        "starrocks.table-name",
        "starrocks.sink.redirect.allowed-hosts",
    }
)

DEFAULTS: dict[str, Any] = {
    "pipeline": {
        "name": "cdc",
        "checkpoint-location": "var/checkpoints/cdc",
        # Number of state-store partitions; frozen into the checkpoint at the first run.
        "state-partitions": 2,
        "progress": "line",
        # Prometheus metrics on the driver (docs/metrics.md); 0 = off.
        "metrics-port": 0,
        "metrics-host": "127.0.0.1",
        # Micro-batches without new data, so a txn-timeout fires while the stream is idle
        # (README, "Run it against your cluster"); off, an idle pipeline runs no Spark job at all.
        "idle-batches": False,
    },
    "source": {
        "format": "kafka",
        "bootstrap-servers": "127.0.0.1:9092",
        "topics": "",
        "starting-offsets": "earliest",
        # No offsets in the checkpoint but progress rows in StarRocks (app/resume.py):
        # resume after the last commit | fail | ignore (use starting-offsets).
        "on-lost-checkpoint": "resume",
        "max-offsets-per-trigger": 200000,
        # Tasks that read a micro-batch, at most (0: one per core; app/source.py).
        "max-read-tasks": 0,
        "fail-on-data-loss": True,
        "options": {},
        # librdkafka settings for the driver's own Kafka calls, over those made from
        # options.kafka.* (app/kafka_driver.py): e.g. a JKS trust store's CA as ssl.ca.location.
        "driver-options": {},
        # txn: the project's TXN_BEGIN/DATA/TXN_END envelope, assembled per partition.
        # debezium: Debezium data topics + <prefix>.transaction, assembled per source
        # (docs/debezium.md); its options live in source.debezium.*.
        # maxwell: Maxwell's JSON rows (xid, commit flag), per partition (docs/maxwell.md).
        "envelope": "txn",
        "debezium": {},
    },
    "assembler": {},
    "dead-letter": {
        "destination": "table",
        "path": "var/dead-letter",
    },
    "starrocks": {
        "password": "",
        "sink.buffer-flush.interval-ms": 1000,
    },
    "spark": {
        "master": "",
        "app-name": "",
        "conf": {},
    },
}

_ENV_PREFIX = "CDC_"
# A URL's user-info (scheme://user:password@host) is a credential, whatever the key's name.
_URL_USER_INFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]*@")


@dataclass(frozen=True)
class PipelineSettings:
    """What the streaming query is: its name, checkpoint, trigger."""

    name: str
    checkpoint_location: str
    trigger_interval_ms: int
    state_partitions: int
    progress: Literal["line", "quiet"]
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    idle_batches: bool = False


@dataclass(frozen=True)
class SourceSettings:
    """Where events come from: the Kafka topics and how to read them."""

    format: Literal["kafka"]
    bootstrap_servers: str
    topics: tuple[str, ...]
    starting_offsets: str
    max_offsets_per_trigger: int
    fail_on_data_loss: bool
    max_read_tasks: int = 0
    # Both may hold credentials (a JAAS config, sasl.password): kept out of repr.
    extra_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: ``source.driver-options``: librdkafka settings for the driver's own calls.
    driver_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: ``max.poll.records`` unless ``extra_options`` names it; sized at start (app/main.py).
    poll_records: int = KAFKA_POLL_RECORDS
    envelope: Literal["txn", "debezium", "maxwell"] = "txn"
    debezium: DebeziumSettings | None = None
    on_lost_checkpoint: Literal["resume", "fail", "ignore"] = "resume"

    def subscribed_topics(self) -> tuple[str, ...]:
        """The topics read: ``topics``, plus Debezium's transaction topic when it is used."""
        if self.debezium is not None and self.debezium.transaction_topic not in self.topics:
            return (*self.topics, self.debezium.transaction_topic)
        return self.topics

    def driver_kafka(self) -> DriverKafka:
        """The driver's librdkafka settings, where each came from, and what they lack."""
        return driver_kafka(self.bootstrap_servers, self.extra_options, self.driver_options)

    def client_settings(self) -> dict[str, str]:
        """Librdkafka settings for the driver's own short calls to the same brokers."""
        return self.driver_kafka().settings

    def reader_options(self) -> dict[str, str]:
        """Options for ``spark.readStream``, named as Spark's Kafka connector names them."""
        options = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "subscribe": ",".join(self.subscribed_topics()),
            "startingOffsets": self.starting_offsets,
            "maxOffsetsPerTrigger": str(self.max_offsets_per_trigger),
            "failOnDataLoss": str(self.fail_on_data_loss).lower(),
            **CONSUMER_DEFAULTS,
            POLL_RECORDS_KEY: str(self.poll_records),
        }
        options.update(self.extra_options)
        return options


@dataclass(frozen=True)
class DeadLetterSettings:
    """Where rejected source transactions go.

    ``table``: the sink's dead-letter table, in the same sink transaction as the batch
    (exactly once, atomic with the good rows). ``file``: JSON lines under ``path``, one file
    per batch, rewritten whole when Spark replays the batch.
    """

    destination: Literal["table", "file"]
    path: str


@dataclass(frozen=True)
class SparkSettings:
    """Spark session settings; ``master`` empty means spark-submit decides."""

    master: str
    app_name: str
    conf: Mapping[str, str]


@dataclass(frozen=True)
class AppConfig:
    """Everything the application needs, validated."""

    pipeline: PipelineSettings
    source: SourceSettings
    assembler: AssemblerSettings
    dead_letter: DeadLetterSettings
    starrocks: StarRocksSinkConfig
    spark: SparkSettings
    raw: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)


def load_config(
    path: str | Path | None,
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> AppConfig:
    """Read, merge and validate the configuration.

    Raises:
        ConfigError: naming the key (or file) that is wrong and what is expected.
    """
    tree = _deep_copy(DEFAULTS)
    if path is not None:
        _merge(tree, _read_yaml(Path(path)), prefix="")
    if environ is not None:
        _apply_environment(tree, environ)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            msg = f"--set {item!r}: expected key=value, e.g. --set starrocks.load-url=fe:8030"
            raise ConfigError(msg)
        _set_path(tree, key.strip(), value)
    return build_config(tree)


def get_setting(tree: Mapping[str, Any], key: str) -> str:
    """One setting of a merged tree as text (``--get``); a key resolves as ``--set`` sets it.

    Raises:
        ConfigError: ``key`` names no setting, names a section (one value is printed, and a
            section's values may hold credentials), or holds a credential.
    """
    if is_secret_key(key):
        # Scripts call --get; a credential must not end up in their output or logs.
        msg = f"{key} holds a secret and is never printed"
        raise ConfigError(msg)
    section = _map_section_of(key)
    if section is None:
        value: Any = tree
        parent = ""
        for part in key.split("."):
            if not isinstance(value, Mapping):
                msg = f"{key}: unknown key ({parent} is a single value)"
                raise ConfigError(msg)
            if part not in value:
                where = f"keys of {parent}" if parent else "sections"
                msg = f"{key}: unknown key ({where}: {', '.join(sorted(value))})"
                raise ConfigError(msg)
            value = value[part]
            parent = f"{parent}.{part}" if parent else part
    else:
        node: Any = tree
        for part in section.split("."):
            node = node.get(part, {})
        rest = key[len(section) + 1 :]
        if rest not in node:
            group = sorted(f"{section}.{k}" for k in node if k.startswith(rest + "."))
            if group:
                msg = f"{key} names several keys; --get prints one: {', '.join(group)}"
            else:
                # A free-form section has no defaults here: its component's own apply.
                msg = (
                    f"{key}: not set in the file, the environment or --set (if it is a "
                    "valid key, its built-in default applies)"
                )
            raise ConfigError(msg)
        value = node[rest]
    if isinstance(value, Mapping):
        msg = f"{key} is a section; --get prints one value: ask for one of its keys ({key}.KEY)"
        raise ConfigError(msg)
    text = _scalar_text(value, key)
    if _URL_USER_INFO.search(text):
        msg = f"{key} holds credentials (a URL's user:password@) and is never printed"
        raise ConfigError(msg)
    return text


def build_config(tree: Mapping[str, Any]) -> AppConfig:
    """Validate a merged configuration tree into typed settings."""
    unknown = set(tree) - set(DEFAULTS)
    if unknown:
        msg = f"unknown section(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}"
        raise ConfigError(msg)
    starrocks_options = _string_map(tree["starrocks"], "starrocks")
    # Progress rows name the pipeline: one name for the query and the sink.
    starrocks_options.setdefault("sink.pipeline-name", _str(tree["pipeline"], "pipeline", "name"))
    sink = StarRocksSinkConfig.from_options(starrocks_options)
    assembler = AssemblerSettings.from_options(_string_map(tree["assembler"], "assembler"))
    # Rows for a table the sink may not write are dead-lettered by the assembler (a policy),
    # not left to fail the sink on every replay of their batch.
    targets = Targets(
        database=sink.database,
        tables=None if sink.tables is None else frozenset(sink.tables),
        reserved=frozenset(sink.system_tables()),
    )
    assembler = replace(assembler, targets=targets)
    pipeline = _pipeline(tree["pipeline"], starrocks_options)
    source = _source(tree["source"], assembler, sink.database)
    if source.envelope == "maxwell":
        # Maxwell's JSON rows go through the same state machine (assembler/maxwell.py).
        if assembler.codec.encoding != "json":
            msg = (
                f"assembler.encoding={assembler.codec.encoding}: source.envelope=maxwell reads "
                "Maxwell's JSON; leave assembler.encoding at json"
            )
            raise ConfigError(msg)
        assembler = replace(assembler, codec=CodecSettings(encoding="maxwell"))
    dead_letter = _dead_letter(tree["dead-letter"])
    if sink.filtered_rows == "dead-letter" and dead_letter.destination != "table":
        msg = (
            "starrocks.sink.filtered-rows=dead-letter writes the sink's dead-letter table, in "
            "the batch's transaction: set dead-letter.destination=table, or "
            "sink.filtered-rows=fail"
        )
        raise ConfigError(msg)
    return AppConfig(
        pipeline=pipeline,
        source=source,
        assembler=assembler,
        dead_letter=dead_letter,
        starrocks=sink,
        spark=_spark(tree["spark"], pipeline.name),
        raw=tree,
    )


def _pipeline(section: Mapping[str, Any], starrocks: Mapping[str, str]) -> PipelineSettings:
    _check_keys(section, DEFAULTS["pipeline"], "pipeline")
    name = _str(section, "pipeline", "name")
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        msg = (
            f"pipeline.name={name!r}: use 1-64 characters from [A-Za-z0-9_-] (it goes into labels)"
        )
        raise ConfigError(msg)
    progress = _str(section, "pipeline", "progress")
    if progress not in ("line", "quiet"):
        msg = f"pipeline.progress={progress!r}: expected line or quiet"
        raise ConfigError(msg)
    checkpoint = _str(section, "pipeline", "checkpoint-location")
    if not checkpoint.strip():
        # Offsets, state and the pipeline's own files live there: refused before Spark starts.
        msg = (
            "pipeline.checkpoint-location is empty: give the query's checkpoint folder "
            "(a path, or a URI such as hdfs://nn/cdc/ckpt)"
        )
        raise ConfigError(msg)
    return PipelineSettings(
        name=name,
        checkpoint_location=checkpoint,
        # The trigger interval is the commit interval: one sink transaction per micro-batch.
        trigger_interval_ms=_duration_ms(starrocks, "starrocks", "sink.buffer-flush.interval-ms"),
        state_partitions=_int(section, "pipeline", "state-partitions", minimum=1),
        progress="line" if progress == "line" else "quiet",
        metrics_port=_int(section, "pipeline", "metrics-port", minimum=0, maximum=65535),
        metrics_host=_str(section, "pipeline", "metrics-host"),
        idle_batches=_bool(section, "pipeline", "idle-batches"),
    )


_ENVELOPES: dict[str, Literal["txn", "debezium", "maxwell"]] = {
    "txn": "txn",
    "debezium": "debezium",
    "maxwell": "maxwell",
}
_ON_LOST_CHECKPOINT: dict[str, Literal["resume", "fail", "ignore"]] = {
    "resume": "resume",
    "fail": "fail",
    "ignore": "ignore",
}


def _source(
    section: Mapping[str, Any], assembler: AssemblerSettings, database: str
) -> SourceSettings:
    _check_keys(section, DEFAULTS["source"], "source")
    fmt = _str(section, "source", "format")
    if fmt != "kafka":
        msg = (
            f"source.format={fmt!r}: expected kafka (Spark's Kafka connector; the bundled "
            "Python source cdc-kafka was removed, see docs/kafka-source.md)"
        )
        raise ConfigError(msg)
    starting = _str(section, "source", "starting-offsets")
    if starting not in ("earliest", "latest") and not _is_json_object(starting):
        msg = (
            f"source.starting-offsets={starting!r}: expected earliest, latest or the "
            'connector\'s JSON, e.g. {"cdc.orders":{"0":42,"1":-2}}'
        )
        raise ConfigError(msg)
    lost = _str(section, "source", "on-lost-checkpoint")
    if lost not in _ON_LOST_CHECKPOINT:
        msg = f"source.on-lost-checkpoint={lost!r}: expected resume, fail or ignore"
        raise ConfigError(msg)
    topics = tuple(t.strip() for t in _str(section, "source", "topics").split(",") if t.strip())
    if not topics:
        msg = "source.topics is empty: name the CDC topic(s), comma-separated"
        raise ConfigError(msg)
    bootstrap = _str(section, "source", "bootstrap-servers")
    if not bootstrap:
        msg = "source.bootstrap-servers is empty: give host:port[,host:port]"
        raise ConfigError(msg)
    extra = _string_map(section["options"], "source.options")
    for key in extra:
        _check_kafka_option(key)
    driver = _string_map(section["driver-options"], DRIVER_OPTIONS)
    for key in driver:
        if key in ("bootstrap.servers", "metadata.broker.list"):
            # Its checks must ask the cluster Spark reads.
            msg = f"{DRIVER_OPTIONS}.{key}: the driver's calls use source.bootstrap-servers"
            raise ConfigError(msg)
    envelope = _str(section, "source", "envelope")
    if envelope not in _ENVELOPES:
        msg = f"source.envelope={envelope!r}: expected txn, debezium or maxwell"
        raise ConfigError(msg)
    debezium_options = _string_map(section["debezium"], "source.debezium")
    debezium = None
    if envelope == "debezium":
        debezium_options.setdefault("database", database)
        try:
            debezium = DebeziumSettings.from_options(debezium_options, assembler)
        except ConfigError as e:
            msg = f"source.debezium: {e}"
            raise ConfigError(msg) from e
    elif debezium_options:
        msg = "source.debezium.* is set but source.envelope is not debezium"
        raise ConfigError(msg)
    return SourceSettings(
        envelope=_ENVELOPES[envelope],
        debezium=debezium,
        format="kafka",
        bootstrap_servers=bootstrap,
        topics=topics,
        starting_offsets=starting,
        max_offsets_per_trigger=_int(section, "source", "max-offsets-per-trigger", minimum=1),
        fail_on_data_loss=_bool(section, "source", "fail-on-data-loss"),
        max_read_tasks=_int(section, "source", "max-read-tasks", minimum=0),
        extra_options=extra,
        driver_options=driver,
        on_lost_checkpoint=_ON_LOST_CHECKPOINT[lost],
    )


# Consumer settings Spark's Kafka source refuses or owns (KafkaSourceProvider), with the option
# that does the job instead.
_SPARK_OWNED = {
    # The driver's own calls (topic ids, partitions, resume offsets) go there too: a second
    # address here would have Spark read one cluster and the checks ask another.
    "bootstrap.servers": "source.bootstrap-servers",
    "auto.offset.reset": "source.starting-offsets",
    "enable.auto.commit": "nothing: Spark's checkpoint owns the offsets",
    "key.deserializer": "nothing: keys are read as bytes",
    "value.deserializer": "nothing: values are read as bytes and decoded by the assembler",
    "interceptor.classes": "nothing: Spark does not support consumer interceptors",
}


def _check_kafka_option(key: str) -> None:
    """A typo in ``source.options.kafka.*`` is an error, not a setting Kafka ignores."""
    if not key.startswith("kafka."):
        msg = f"source.options.{key}: only kafka.* client settings are passed through"
        raise ConfigError(msg)
    name = key.removeprefix("kafka.")
    if name in _SPARK_OWNED:
        msg = (
            f"source.options.{key}: Spark's Kafka source sets this itself; use {_SPARK_OWNED[name]}"
        )
        raise ConfigError(msg)
    if name not in CONSUMER_CONFIGS:
        close = difflib.get_close_matches(name, sorted(CONSUMER_CONFIGS), n=1)
        hint = f" (did you mean kafka.{close[0]}?)" if close else ""
        msg = (
            f"source.options.{key}: {name!r} is not a Kafka consumer setting of kafka-clients "
            f"{KAFKA_CLIENTS_VERSION}{hint}"
        )
        raise ConfigError(msg)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _dead_letter(section: Mapping[str, Any]) -> DeadLetterSettings:
    _check_keys(section, DEFAULTS["dead-letter"], "dead-letter")
    destination = _str(section, "dead-letter", "destination")
    if destination not in ("table", "file"):
        msg = f"dead-letter.destination={destination!r}: expected table or file"
        raise ConfigError(msg)
    path = _str(section, "dead-letter", "path")
    if destination == "file" and not path.strip():
        msg = (
            "dead-letter.path is empty: dead-letter.destination=file writes its files under "
            "it; give a folder"
        )
        raise ConfigError(msg)
    return DeadLetterSettings(
        destination="table" if destination == "table" else "file",
        path=path,
    )


def _spark(section: Mapping[str, Any], pipeline_name: str) -> SparkSettings:
    # Spark's own properties are free-form, but only under spark.conf: a key beside it is a typo.
    _check_keys(
        section,
        DEFAULTS["spark"],
        "spark",
        hint="; Spark properties go under spark.conf (e.g. spark.conf.spark.driver.memory)",
    )
    return SparkSettings(
        master=_str(section, "spark", "master"),
        app_name=_str(section, "spark", "app-name") or f"cdc-{pipeline_name}",
        conf=_string_map(section["conf"], "spark.conf"),
    )


# --- merging ---------------------------------------------------------------------------


def _read_yaml(path: Path) -> Mapping[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        msg = f"cannot read config file {path}: {e.strerror}"
        raise ConfigError(msg) from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        msg = f"config file {path} is not valid YAML: {e}"
        raise ConfigError(msg) from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        msg = f"config file {path}: the top level must be a mapping of sections"
        raise ConfigError(msg)
    return data


def _merge(tree: dict[str, Any], data: Mapping[str, Any], prefix: str) -> None:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and not _is_map_section(dotted):
            child = tree.setdefault(key, {})
            if not isinstance(child, dict):
                msg = f"{dotted}: expected a single value, got a mapping"
                raise ConfigError(msg)
            _merge(child, value, prefix=f"{dotted}.")
        elif isinstance(value, Mapping):
            target = tree.setdefault(key, {})
            target.update(_flatten(value))
        elif isinstance(tree.get(key), dict):
            if value is not None:  # None: a section whose keys are all commented out
                msg = f"{dotted}: expected a section (a mapping of key: value), got a single value"
                raise ConfigError(msg)
        else:
            tree[key] = value


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested YAML inside a map section becomes dotted keys (``sink: {label-prefix: x}``)."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, Mapping):
            flat.update(_flatten(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat


def _is_map_section(dotted: str) -> bool:
    return dotted in MAP_SECTIONS


def _map_section_of(key: str) -> str | None:
    """The free-form section ``key`` is a key of: its rest is one key, dots and all."""
    for section in sorted(MAP_SECTIONS, key=len, reverse=True):
        if key.startswith(section + "."):
            return section
    return None


def _node(tree: dict[str, Any], section: str) -> dict[str, Any]:
    node = tree
    for part in section.split("."):
        node = node.setdefault(part, {})
    return node


def _set_path(tree: dict[str, Any], key: str, value: Any) -> None:
    section = _map_section_of(key)
    if section is not None:
        _node(tree, section)[key[len(section) + 1 :]] = value
        return
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            msg = f"--set {key}: unknown key (sections: {sorted(DEFAULTS)})"
            raise ConfigError(msg)
        node = child
    if isinstance(node.get(parts[-1]), dict):
        msg = f"--set {key}: {key} is a section; set one of its keys ({key}.<key>=value)"
        raise ConfigError(msg)
    node[parts[-1]] = value


def _env_name(dotted: str) -> str:
    return _ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", dotted).upper()


def _apply_environment(tree: dict[str, Any], environ: Mapping[str, str]) -> None:
    for dotted, _value in list(_leaves(tree, "")):
        name = _env_name(dotted)
        if name in environ:
            _set_path(tree, dotted, environ[name])


def _leaves(node: Mapping[str, Any], prefix: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.extend(_leaves(value, f"{dotted}."))
        else:
            out.append((dotted, value))
    return out


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    return value


# --- typed accessors -------------------------------------------------------------------


def _check_keys(
    section: Mapping[str, Any], known: Mapping[str, Any], name: str, hint: str = ""
) -> None:
    unknown = set(section) - set(known)
    if unknown:
        key = sorted(unknown)[0]
        msg = f"{name}.{key}: unknown key; known keys: {', '.join(sorted(known))}{hint}"
        raise ConfigError(msg)


def _string_map(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        msg = f"{name}: expected a mapping of key: value"
        raise ConfigError(msg)
    return {str(k): _scalar_text(v, f"{name}.{k}") for k, v in _flatten(value).items()}


def _scalar_text(value: Any, key: str) -> str:
    """A YAML value as the text a setting holds; ``key`` names it in errors."""
    if isinstance(value, list | tuple) and key in COMMA_LISTS:
        if not all(isinstance(item, str | int | float) for item in value):
            msg = f"{key}: expected a list of plain values (or one comma-separated string)"
            raise ConfigError(msg)
        return ",".join(_scalar_text(item, key) for item in value)
    if isinstance(value, Mapping | list | tuple):
        # str() would make "['a', 'b']" a value; the key takes one value, so refuse it.
        kind = "mapping" if isinstance(value, Mapping) else "list"
        msg = f"{key}: expected a single value, got a {kind}"
        raise ConfigError(msg)
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def _str(section: Mapping[str, Any], name: str, key: str) -> str:
    return _scalar_text(section.get(key, ""), f"{name}.{key}")


def _int(
    section: Mapping[str, Any], name: str, key: str, *, minimum: int, maximum: int | None = None
) -> int:
    opt = Options(section, name)
    if opt.raw(key) is None:
        opt.fail(key, f"is required (a whole number >= {minimum})")
    return opt.integer(key, 0, minimum=minimum, maximum=maximum)


def _duration_ms(section: Mapping[str, Any], name: str, key: str) -> int:
    """Milliseconds; ``2s``/``500ms``/``1m`` or a bare number of milliseconds."""
    return round(Options(section, name).duration_s(key, 0.0, unit="ms", minimum=0) * 1000)


def _bool(section: Mapping[str, Any], name: str, key: str) -> bool:
    opt = Options(section, name)
    if opt.raw(key) is None:
        opt.fail(key, "is required (true or false)")
    return opt.boolean(key, False)
