from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import load_config
from app.main import size_polls
from app.source import poll_records
from common.errors import ConfigError

pytestmark = pytest.mark.unit

BASE = """
pipeline:
  name: demo
  checkpoint-location: /tmp/ck
source:
  bootstrap-servers: 127.0.0.1:9092
  topics: cdc.orders
starrocks:
  load-url: 127.0.0.1:8030
  jdbc-url: jdbc:mysql://127.0.0.1:9030
  database-name: demo
  table-name: orders,order_items
  username: root
  password: secret-pw
  sink:
    label-prefix: demo
    buffer-flush.interval-ms: 500
assembler:
  txn-timeout: 30s
"""


@pytest.fixture
def conf_file(tmp_path: Path) -> Path:
    path = tmp_path / "conf.yaml"
    path.write_text(BASE)
    return path


def test_file_is_read_into_typed_settings(conf_file: Path) -> None:
    config = load_config(conf_file)
    assert config.pipeline.name == "demo"
    assert config.pipeline.trigger_interval_ms == 500
    assert config.source.topics == ("cdc.orders",)
    assert config.source.reader_options()["subscribe"] == "cdc.orders"
    assert config.starrocks.database == "demo"
    assert config.assembler.txn_timeout_ms == 30_000


def test_set_overrides_environment_which_overrides_file(conf_file: Path) -> None:
    env = {"CDC_PIPELINE_NAME": "from-env", "CDC_STARROCKS_PASSWORD": "env-pw"}
    config = load_config(conf_file, ["pipeline.name=from-set"], env)
    assert config.pipeline.name == "from-set"
    assert "env-pw" not in repr(config.starrocks)
    config = load_config(conf_file, [], env)
    assert config.pipeline.name == "from-env"


def test_map_sections_take_verbatim_keys(conf_file: Path) -> None:
    config = load_config(
        conf_file,
        ["starrocks.sink.label-prefix=other", "spark.conf.spark.sql.ansi.enabled=false"],
    )
    assert config.spark.conf["spark.sql.ansi.enabled"] == "false"


def test_secrets_never_appear_in_repr(conf_file: Path) -> None:
    config = load_config(
        conf_file,
        [
            'source.options.kafka.sasl.jaas.config=x required password="jaas-pw";',
            "source.driver-options.sasl.password=driver-pw",
        ],
    )
    for secret in ("secret-pw", "jaas-pw", "driver-pw"):
        assert secret not in repr(config)
    assert "secret-pw" not in str(config.starrocks)


def test_driver_options_reach_the_drivers_kafka_clients_as_they_are(conf_file: Path) -> None:
    conf_file.write_text(
        BASE.replace(
            "  topics: cdc.orders\n",
            "  topics: cdc.orders\n  driver-options:\n    ssl:\n      ca.location: /etc/ca.pem\n"
            "    sasl.password: ''\n",
        )
    )
    config = load_config(
        conf_file,
        ["source.driver-options.sasl.username=cdc"],
        {"CDC_SOURCE_DRIVER_OPTIONS_SASL_PASSWORD": "env-pw"},
    )
    settings = config.source.client_settings()
    assert settings["ssl.ca.location"] == "/etc/ca.pem"  # nested YAML, flattened
    assert (settings["sasl.username"], settings["sasl.password"]) == ("cdc", "env-pw")
    # Spark's consumer takes only its own settings.
    assert not any("ca.location" in k for k in config.source.reader_options())


@pytest.mark.parametrize("key", ["bootstrap.servers", "metadata.broker.list"])
def test_driver_options_ask_the_cluster_spark_reads(conf_file: Path, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"source\.driver-options\.{re.escape(key)}: .*"
                       r"source\.bootstrap-servers"):  # fmt: skip
        load_config(conf_file, [f"source.driver-options.{key}=elsewhere:9092"])


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("pipeline.name=has space", "pipeline.name"),
        ("pipeline.state-partitions=zero", "pipeline.state-partitions"),
        ("source.format=jdbc", "source.format"),
        ("source.format=cdc-kafka", "source.format"),
        ("source.starting-offsets=latst", "source.starting-offsets"),
        ("source.starting-offsets=[1]", "source.starting-offsets"),
        ("source.topics=", "source.topics"),
        ("source.fail-on-data-loss=maybe", "source.fail-on-data-loss"),
        ("dead-letter.destination=printer", "dead-letter.destination"),
        ("starrocks.sink.filtered-rows=sometimes", "sink.filtered-rows"),
        ("starrocks.sink.filtered-rows.max-transactions=0", "sink.filtered-rows.max-transactions"),
        ("pipeline.nme=x", "pipeline.nme"),
        ("source.options.group.id=x", "source.options.group.id"),
        ("novalue", "key=value"),
    ],
)
def test_bad_settings_name_the_key(conf_file: Path, override: str, names: str) -> None:
    with pytest.raises(ConfigError, match=names.replace(".", r"\.")):
        load_config(conf_file, [override])


def test_filtered_rows_dead_letters_need_the_dead_letter_table(conf_file: Path) -> None:
    sets = ["starrocks.sink.filtered-rows=dead-letter", "dead-letter.destination=file"]
    with pytest.raises(ConfigError, match=r"filtered-rows=dead-letter.*destination=table"):
        load_config(conf_file, sets)
    config = load_config(conf_file, sets[:1])
    assert (config.starrocks.filtered_rows, config.starrocks.filtered_rows_max_txns) == (
        "dead-letter",
        10,
    )


@pytest.mark.parametrize("value", ["earliest", "latest", '{"cdc.orders":{"0":5,"1":-2}}'])
def test_starting_offsets_take_the_connector_values(conf_file: Path, value: str) -> None:
    config = load_config(conf_file, [f"source.starting-offsets={value}"])
    assert config.source.reader_options()["startingOffsets"] == value


def test_consumers_do_not_wait_out_the_brokers_long_poll(conf_file: Path) -> None:
    # A task reading to the log end otherwise waits fetch.max.wait.ms (500 ms) for nothing.
    assert load_config(conf_file).source.reader_options()["kafka.fetch.max.wait.ms"] == "0"
    mine = load_config(conf_file, ["source.options.kafka.fetch.max.wait.ms=200"])
    assert mine.source.reader_options()["kafka.fetch.max.wait.ms"] == "200"
    # The driver's librdkafka calls take no Java consumer default.
    assert "fetch.max.wait.ms" not in load_config(conf_file).source.client_settings()


@pytest.mark.parametrize(
    ("max_offsets", "partitions", "expected"),
    [
        (200_000, 4, 50_000),  # the batch's share of each partition: one poll a batch
        (200_001, 4, 50_001),  # rounded up, never a second poll for the last records
        (3_000, 64, 500),  # small shares keep Kafka's default
        (200_000, 0, 500),  # partitions not counted (before start)
    ],
)
def test_polls_are_the_batchs_share_of_a_partition_at_least_kafkas_default(
    max_offsets: int, partitions: int, expected: int
) -> None:
    assert poll_records(max_offsets, partitions) == expected


def test_reader_polls_follow_the_partitions_counted_at_start(conf_file: Path) -> None:
    config = load_config(conf_file, ["source.max-offsets-per-trigger=200000"])
    assert config.source.reader_options()["kafka.max.poll.records"] == "500"
    sized = size_polls(config, 8, 2**30, 1, "spark.driver.memory")
    assert sized.source.reader_options()["kafka.max.poll.records"] == "25000"
    # A user's value wins, whatever the partitions.
    mine = load_config(
        conf_file,
        ["source.max-offsets-per-trigger=200000", "source.options.kafka.max.poll.records=700"],
    )
    sized_mine = size_polls(mine, 8, 2**30, 1, "spark.driver.memory")
    assert sized_mine.source.reader_options()["kafka.max.poll.records"] == "700"
    # The driver's librdkafka calls take no Java consumer default.
    assert "max.poll.records" not in sized.source.client_settings()


def test_polls_keep_kafkas_default_where_the_heap_cannot_hold_a_fetch_per_partition(
    conf_file: Path,
) -> None:
    # 64 partitions each holding a 1 MiB fetch (x3 as objects) pass a tenth of 1 GiB.
    config = load_config(conf_file, ["source.max-offsets-per-trigger=200000"])
    assert size_polls(config, 64, 2**30, 1, "h").source.poll_records == 500
    # Spread over 2 executors, or with 4 GiB, or with smaller fetches, they fit.
    assert size_polls(config, 64, 2**30, 2, "h").source.poll_records == 3125
    assert size_polls(config, 64, 2**32, 1, "h").source.poll_records == 3125
    small = load_config(
        conf_file,
        [
            "source.max-offsets-per-trigger=200000",
            "source.options.kafka.max.partition.fetch.bytes=262144",
        ],
    )
    assert size_polls(small, 64, 2**30, 1, "h").source.poll_records == 3125


def test_missing_file_and_bad_yaml_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("pipeline: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_no_crash_settings_in_the_product(conf_file: Path) -> None:
    """Crash points are injected from outside (devstack/starrocks/crashpoints.py)."""
    with pytest.raises(ConfigError, match="testing"):
        load_config(conf_file, ["testing.crash-at=after_commit@3"])


def test_get_refuses_secrets(conf_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.main import main

    rc = main(["--config", str(conf_file), "--set", "starrocks.password=hunter2",
               "--get", "starrocks.password"])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 2
    assert "hunter2" not in out.out + out.err
    assert main(["--config", str(conf_file), "--get", "starrocks.username"]) == 0


@pytest.mark.parametrize(
    "key", ["starrocks", "source", "source.options", "source.driver-options", "spark.conf"]
)
def test_get_refuses_a_section_its_values_may_be_secrets(
    conf_file: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    from app.main import main

    jaas = (
        '  options:\n    kafka.sasl.jaas.config: x password="kafka-secret";\n'
        "  driver-options:\n    sasl.password: kafka-secret\n"
    )
    conf_file.write_text(BASE.replace("  topics: cdc.orders\n", f"  topics: cdc.orders\n{jaas}"))
    assert main(["--config", str(conf_file), "--get", key]) == 2
    out = capsys.readouterr()
    assert (out.out, "kafka-secret" in out.err, "secret-pw" in out.err) == ("", False, False)
    assert f"{key} is a section" in out.err


@pytest.mark.parametrize(
    "url", ["http://u:s3cr3t-pw@reg:8081", "https://s3cr3t-pw@reg", "http://u:s3cr3t-pw@[::1]/x"]
)
def test_get_refuses_a_url_with_credentials(
    conf_file: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    from app.main import main

    args = ["--config", str(conf_file), "--set", "assembler.encoding=confluent"]
    assert main([*args, "--set", f"assembler.registry-url={url}",
                 "--get", "assembler.registry-url"]) == 2  # fmt: skip
    out = capsys.readouterr()
    assert "s3cr3t-pw" not in out.out + out.err
    assert "assembler.registry-url holds credentials" in out.err
    plain = "http://reg:8081/a@b"  # an @ in the path is no user-info
    assert main([*args, "--set", f"assembler.registry-url={plain}",
                 "--get", "assembler.registry-url"]) == 0  # fmt: skip
    assert capsys.readouterr().out == f"{plain}\n"


@pytest.mark.parametrize(
    ("sets", "key", "value"),
    [
        ([], "starrocks.sink.label-prefix", "demo"),  # nested YAML in a free-form section
        (["starrocks.sink.max-retries=7"], "starrocks.sink.max-retries", "7"),
        (["source.options.kafka.client.id=me"], "source.options.kafka.client.id", "me"),
        (
            ["source.driver-options.ssl.ca.location=/c"],
            "source.driver-options.ssl.ca.location",
            "/c",
        ),
        (["spark.conf.spark.ui.port=4041"], "spark.conf.spark.ui.port", "4041"),
        ([], "pipeline.idle-batches", "false"),
    ],
)
def test_get_resolves_a_key_as_set_sets_it(
    conf_file: Path, capsys: pytest.CaptureFixture[str], sets: list[str], key: str, value: str
) -> None:
    from app.main import main

    args = [arg for item in sets for arg in ("--set", item)]
    assert main(["--config", str(conf_file), *args, "--get", key]) == 0
    assert capsys.readouterr().out == f"{value}\n"


def test_get_prints_a_yaml_list_as_the_comma_list_it_is(
    conf_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.main import main

    conf_file.write_text(BASE.replace("topics: cdc.orders", "topics: [cdc.orders, cdc.items]"))
    assert main(["--config", str(conf_file), "--get", "source.topics"]) == 0
    assert capsys.readouterr().out == "cdc.orders,cdc.items\n"


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("pipeline.nme", "unknown key (keys of pipeline: checkpoint-location,"),
        ("nosuch", "unknown key (sections: assembler,"),
        ("pipeline.name.x", "unknown key (pipeline.name is a single value)"),
        ("starrocks.sink.max-retries", "not set in the file, the environment or --set"),
        ("starrocks.sink", "names several keys; --get prints one: starrocks.sink.buffer-flush"),
    ],
)
def test_get_of_a_key_that_is_not_one_setting_exits_2(
    conf_file: Path, capsys: pytest.CaptureFixture[str], key: str, message: str
) -> None:
    from app.main import main

    assert main(["--config", str(conf_file), "--get", key]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert f"config error: {key}" in out.err
    assert message in out.err


@pytest.mark.parametrize(
    ("flag", "env", "names"),
    [
        (["--log-level", "verbose"], {}, "--log-level='verbose'"),
        ([], {"CDC_LOG_LEVEL": "loud"}, "CDC_LOG_LEVEL='loud'"),
        (["--log-level", "warn1ng"], {"CDC_LOG_LEVEL": "debug"}, "--log-level='warn1ng'"),
    ],
)
def test_a_bad_log_level_is_a_config_error_naming_where_it_came_from(
    conf_file: Path, flag: list[str], env: dict[str, str], names: str
) -> None:
    # logging's ValueError was a traceback, even for --check-config (spark-submit.sh's check).
    # A process of its own: under pytest the root logger has handlers, so logging never checks.
    environ = {k: v for k, v in os.environ.items() if k != "CDC_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "app/main.py", "--config", str(conf_file), *flag, "--check-config"],
        cwd=Path(__file__).resolve().parents[3],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    levels = "DEBUG, INFO, WARNING, ERROR, CRITICAL"
    assert done.stderr == f"config error: {names}: expected one of {levels}\n"


def test_log_levels_are_read_in_any_case_flag_first() -> None:
    from app.main import log_level

    assert log_level(None, {}) == "INFO"
    assert log_level(None, {"CDC_LOG_LEVEL": "debug"}) == "DEBUG"
    assert log_level("Warning", {"CDC_LOG_LEVEL": "nonsense"}) == "WARNING"


@pytest.mark.parametrize(
    ("location", "fs_api"),
    [("/var/cdc/ckpt", True), ("file:///var/cdc/ckpt", True), ("hdfs://nn/cdc/ckpt", False)],
)
def test_local_checkpoints_skip_hadoops_forking_renames(
    conf_file: Path, location: str, fs_api: bool
) -> None:
    from app.session import session_conf

    key = "spark.sql.streaming.checkpointFileManagerClass"
    config = load_config(conf_file, [f"pipeline.checkpoint-location={location}"])
    assert (key in session_conf(config)) is fs_api
    assert session_conf(config)["spark.sql.shuffle.partitions"] == "2"
    mine = load_config(
        conf_file, [f"pipeline.checkpoint-location={location}", f"spark.conf.{key}=my.Manager"]
    )
    assert session_conf(mine)[key] == "my.Manager"


@pytest.mark.parametrize(
    ("master", "gateway", "chosen"),
    [
        ("local[2]", None, True),
        ("local-cluster[2,1,1024]", None, True),
        ("local", None, True),
        ("spark://m:7077", None, False),
        ("", None, False),  # spark-submit decides the master: spark-submit.sh chooses
        ("local[2]", "40123", False),  # under spark-submit the JVM's environment is set
    ],
)
def test_local_workers_use_the_projects_python_daemon(
    conf_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    master: str,
    gateway: str | None,
    chosen: bool,
) -> None:
    from app.session import session_conf

    if gateway is None:
        monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    else:
        monkeypatch.setenv("PYSPARK_GATEWAY_PORT", gateway)
    key = "spark.python.daemon.module"
    conf = session_conf(load_config(conf_file, [f"spark.master={master}"]))
    assert (conf.get(key) == "app.pydaemon") is chosen
    assert chosen or key not in conf
    mine = load_config(conf_file, [f"spark.master={master}", f"spark.conf.{key}=pyspark.daemon"])
    assert session_conf(mine)[key] == "pyspark.daemon"


def test_read_tasks_default_to_twice_the_cores_and_refuse_negatives(conf_file: Path) -> None:
    assert load_config(conf_file).source.max_read_tasks == 0
    assert load_config(conf_file, ["source.max-read-tasks=8"]).source.max_read_tasks == 8
    with pytest.raises(ConfigError, match=r"source\.max-read-tasks"):
        load_config(conf_file, ["source.max-read-tasks=-1"])


def test_trigger_interval_is_a_duration(conf_file: Path) -> None:
    config = load_config(conf_file, ["starrocks.sink.buffer-flush.interval-ms=2s"])
    assert config.pipeline.trigger_interval_ms == 2000


def test_idle_batches_are_off_by_default(conf_file: Path) -> None:
    from app.session import session_conf

    # An idle pipeline must not run a Spark job every trigger (benchmarks.idle: ~44 CPU-s/min).
    conf = session_conf(load_config(conf_file))
    assert conf["spark.sql.streaming.noDataMicroBatches.enabled"] == "false"
    assert load_config(conf_file).pipeline.idle_batches is False
    assert load_config(conf_file, ["pipeline.idle-batches=true"]).pipeline.idle_batches is True
    with pytest.raises(ConfigError, match="idle-batches"):
        load_config(conf_file, ["pipeline.idle-batches=sometimes"])


def test_assembler_learns_the_tables_the_sink_may_write(conf_file: Path) -> None:
    targets = load_config(conf_file).assembler.targets
    assert targets is not None
    assert targets.problem("demo", "orders") is None
    assert targets.problem("demo", "customers") is not None
    assert targets.problem("other", "orders") is not None
    assert targets.problem("demo", "_cdc_dead_letter") is not None
    assert targets.problem("demo", "_cdc_progress") is not None
    anything = load_config(conf_file, ["starrocks.table-name=*"]).assembler.targets
    assert anything is not None
    assert anything.problem("demo", "customers") is None
    assert anything.problem("demo", "_cdc_dead_letter") is not None


def test_on_lost_checkpoint_is_validated(conf_file: Path) -> None:
    assert load_config(conf_file).source.on_lost_checkpoint == "resume"
    config = load_config(conf_file, ["source.on-lost-checkpoint=fail"])
    assert config.source.on_lost_checkpoint == "fail"
    with pytest.raises(ConfigError, match="on-lost-checkpoint"):
        load_config(conf_file, ["source.on-lost-checkpoint=rewind"])


def test_maxwell_envelope_reads_maxwell_json_with_the_same_machine(conf_file: Path) -> None:
    config = load_config(conf_file, ["source.envelope=maxwell"])
    assert config.source.envelope == "maxwell"
    assert config.assembler.codec.encoding == "maxwell"
    assert config.assembler.targets is not None  # the same table checks apply
    with pytest.raises(ConfigError, match="maxwell"):
        load_config(conf_file, ["source.envelope=maxwell", "assembler.encoding=avro"])
    with pytest.raises(ConfigError, match="envelope"):
        load_config(conf_file, ["source.envelope=canal"])


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("kafka.securty.protocol", "did you mean kafka.security.protocol"),
        ("kafka.auto.offset.reset", "use source.starting-offsets"),
        ("kafka.enable.auto.commit", "Spark's checkpoint owns the offsets"),
        ("bootstrap.servers", "only kafka.* client settings"),
        ("kafka.bootstrap.servers", "use source.bootstrap-servers"),
    ],
)
def test_kafka_option_typos_and_spark_owned_keys_are_named(
    conf_file: Path, key: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(conf_file, [f"source.options.{key}=x"])
    ok = load_config(conf_file, ["source.options.kafka.security.protocol=SASL_SSL"])
    assert ok.source.extra_options == {"kafka.security.protocol": "SASL_SSL"}


def test_check_config_exits_2_with_one_line_naming_the_key(
    conf_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.main import main

    code = main(
        ["--config", str(conf_file), "--check-config", "--set", "source.starting-offsets=latst"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert "source.starting-offsets" in err[0]
    code = main(
        ["--config", str(conf_file), "--check-config", "--set", "source.options.kafka.lingr=1"]
    )
    assert code == 2
    assert "source.options.kafka.lingr" in capsys.readouterr().err


def test_python_workers_use_a_unix_domain_socket_unless_the_user_says_otherwise(
    conf_file: Path,
) -> None:
    from app.session import session_conf

    key = "spark.python.unix.domain.socket.enabled"
    assert session_conf(load_config(conf_file, []))[key] == "true"
    mine = load_config(conf_file, [f"spark.conf.{key}=false"])
    assert session_conf(mine)[key] == "false"


def test_kafka_is_read_through_the_v1_source_unless_the_user_says_otherwise(
    conf_file: Path,
) -> None:
    from app.session import KAFKA_PROVIDER, KAFKA_V2_OFF, session_conf

    assert session_conf(load_config(conf_file, []))[KAFKA_V2_OFF] == KAFKA_PROVIDER
    back = load_config(conf_file, [f"spark.conf.{KAFKA_V2_OFF}="])
    assert session_conf(back)[KAFKA_V2_OFF] == ""


def test_driver_jvm_uses_the_parallel_collector_unless_the_user_says_otherwise(
    conf_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app import jvm_archive
    from app.session import session_conf

    # On a local master the driver JVM runs the tasks; the parallel collector cost the
    # pipeline 8-13 % less CPU per record than G1 (docs/benchmarks.md, "Changes that paid").
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setattr(jvm_archive, "archive_option", lambda: "-XX:SharedArchiveFile=/a.jsa")
    key = "spark.driver.extraJavaOptions"
    assert session_conf(load_config(conf_file))[key].split() == ["-Xss8m", "-XX:+UseParallelGC"]
    # A local master this process starts maps `make setup`'s class archive (app/jvm_archive.py).
    local = session_conf(load_config(conf_file, ["spark.master=local[2]"]))[key].split()
    assert local == ["-Xss8m", "-XX:+UseParallelGC", "-XX:SharedArchiveFile=/a.jsa"]
    mine = load_config(
        conf_file, ["spark.master=local[2]", f"spark.conf.{key}=-Xss16m -XX:+UseG1GC"]
    )
    assert session_conf(mine)[key] == "-Xss16m -XX:+UseG1GC"


def test_broadcasts_go_in_small_pieces_unless_the_user_says_otherwise(conf_file: Path) -> None:
    from app.session import BROADCAST_PIECE, session_conf

    assert session_conf(load_config(conf_file, []))[BROADCAST_PIECE] == "256k"
    mine = load_config(conf_file, [f"spark.conf.{BROADCAST_PIECE}=4m"])
    assert session_conf(mine)[BROADCAST_PIECE] == "4m"


@pytest.mark.parametrize(
    ("yaml_value", "key", "expected"),
    [
        ("[cdc.orders, cdc.items]", "topics", ("cdc.orders", "cdc.items")),
        ("[k1:9092, k2:9092]", "bootstrap-servers", "k1:9092,k2:9092"),
    ],
)
def test_a_yaml_list_is_a_comma_list_where_the_key_takes_one(
    conf_file: Path, yaml_value: str, key: str, expected: object
) -> None:
    # str() of the list made "['cdc.orders'" and "'cdc.items']" two topics.
    conf_file.write_text(re.sub(rf"(?m)^  {key}: .*$", f"  {key}: {yaml_value}", BASE))
    source = load_config(conf_file).source
    assert (source.topics if key == "topics" else source.bootstrap_servers) == expected


def test_sink_comma_lists_take_a_yaml_list(conf_file: Path) -> None:
    conf_file.write_text(
        BASE.replace("load-url: 127.0.0.1:8030", "load-url: [fe1:8030, fe2:8030]").replace(
            "table-name: orders,order_items", "table-name: [orders, order_items]"
        )
    )
    sink = load_config(conf_file).starrocks
    assert sink.load_urls == ("http://fe1:8030", "http://fe2:8030")
    assert sink.tables == ("orders", "order_items")


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("  name: demo", "  name: [a, b]", "pipeline.name: expected a single value, got a list"),
        ("topics: cdc.orders", "topics: [[a], b]", "source.topics: expected a list of plain"),
        ("username: root", "username: [root]", "starrocks.username: expected a single value"),
        ("topics: cdc.orders", "topics: {a: 1}", "source.topics: expected a single value"),
        ("pipeline:\n  name: demo", "pipeline: demo\nx:\n  name: demo", "pipeline: expected a"),
    ],
)
def test_lists_and_mappings_where_one_value_goes_are_refused(
    conf_file: Path, old: str, new: str, names: str
) -> None:
    conf_file.write_text(BASE.replace(old, new))
    with pytest.raises(ConfigError, match=re.escape(names)):
        load_config(conf_file)


def test_a_section_with_every_key_commented_out_keeps_its_defaults(conf_file: Path) -> None:
    conf_file.write_text(BASE + "spark:\n  # master: local[2]\n")
    assert load_config(conf_file).spark.master == ""
    with pytest.raises(ConfigError, match=r"spark is a section"):
        load_config(conf_file, ["spark=local[2]"])


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("pipeline.metrics-port=65536", "pipeline.metrics-port"),
        ("pipeline.checkpoint-location=", "pipeline.checkpoint-location"),
        ("pipeline.checkpoint-location= ", "pipeline.checkpoint-location"),
        ("spark.mastr=yarn", "spark.mastr"),
        ("spark.driver-memory=4g", "spark.driver-memory"),
        ("starrocks.load-url=fe1:99999", "load-url"),
        ("starrocks.load-url=fe1:http", "load-url"),
    ],
)
def test_out_of_range_empty_and_unknown_values_name_the_key(
    conf_file: Path, override: str, names: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(names)):
        load_config(conf_file, [override])


def test_metrics_port_takes_a_tcp_port(conf_file: Path) -> None:
    assert load_config(conf_file, ["pipeline.metrics-port=65535"]).pipeline.metrics_port == 65535


def test_spark_properties_go_under_spark_conf(conf_file: Path) -> None:
    conf_file.write_text(BASE + "spark:\n  spark.driver.memory: 4g\n")
    with pytest.raises(ConfigError, match=r"spark\.conf \(e\.g\. spark\.conf\.spark\.driver"):
        load_config(conf_file)
    conf_file.write_text(BASE)
    config = load_config(conf_file, ["spark.app-name=mine", "spark.conf.spark.driver.memory=4g"])
    assert (config.spark.app_name, config.spark.conf["spark.driver.memory"]) == ("mine", "4g")


def test_dead_letter_files_need_a_path(conf_file: Path) -> None:
    with pytest.raises(ConfigError, match=r"dead-letter\.path"):
        load_config(conf_file, ["dead-letter.destination=file", "dead-letter.path="])
    # The table destination does not use it.
    config = load_config(conf_file, ["dead-letter.path="])
    assert config.dead_letter.destination == "table"
