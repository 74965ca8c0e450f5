"""The driver's librdkafka clients get librdkafka settings made from the Java consumer's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from app.config import load_config
from app.kafka_driver import driver_kafka
from app.preflight import PreflightError, _admin, check_kafka
from tests.unit.app.test_config import BASE

pytestmark = pytest.mark.unit

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture
def conf_file(tmp_path: Path) -> Path:
    path = tmp_path / "conf.yaml"
    # A port nothing listens on: the driver's checks fail to connect.
    path.write_text(BASE.replace("127.0.0.1:9092", "127.0.0.1:1"))
    return path


def translate(**java: str) -> tuple[dict[str, str], dict[str, str]]:
    """(librdkafka settings, not carried) for Java settings given without ``kafka.``."""
    names = {k.replace("__", "."): v for k, v in java.items()}
    made = driver_kafka("b:9092", {f"kafka.{k}": v for k, v in names.items()}, {})
    return made.settings, made.not_carried


def accepted(settings: dict[str, str]) -> None:
    """librdkafka checks every property (and with TLS loads the files) when a client is made."""
    AdminClient({**settings, "log_level": 0})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("kafka.sasl.jaas.config", f'{PLAIN} required username="u" password="p";'),
        ("kafka.ssl.truststore.location", "/etc/kafka/truststore.jks"),
        ("kafka.ssl.truststore.password", "changeit"),
        ("kafka.ssl.keystore.location", "/etc/kafka/keystore.jks"),
        ("kafka.ssl.keystore.password", "changeit"),
        ("kafka.ssl.key.password", "changeit"),
        ("kafka.fetch.max.wait.ms", "200"),
        ("kafka.default.api.timeout.ms", "60000"),
        ("kafka.max.poll.records", "700"),
        ("kafka.isolation.level", "read_committed"),
        ("kafka.ssl.enabled.protocols", "TLSv1.2"),
        ("kafka.sasl.login.callback.handler.class", "a.B"),
    ],
)
def test_a_valid_java_consumer_setting_does_not_stop_the_start(
    conf_file: Path, key: str, value: str
) -> None:
    config = load_config(conf_file, [f"source.options.{key}={value}"])
    _admin(config.source)  # what check_kafka and describe_topics build first


def test_settings_both_clients_read_alike_are_carried() -> None:
    settings, not_carried = translate(
        security__protocol="SASL_SSL",
        sasl__mechanism="SCRAM-SHA-512",
        client__id="cdc",
        client__dns__lookup="resolve_canonical_bootstrap_servers_only",
        sasl__kerberos__service__name="kafka",
        sasl__jaas__config=f'{SCRAM} required username="u" password="p";',
    )
    assert settings == {
        "security.protocol": "sasl_ssl",  # Java takes any case, librdkafka lower case
        "sasl.mechanism": "SCRAM-SHA-512",
        "client.id": "cdc",
        "client.dns.lookup": "resolve_canonical_bootstrap_servers_only",
        "sasl.kerberos.service.name": "kafka",
        "sasl.username": "u",
        "sasl.password": "p",
        "bootstrap.servers": "b:9092",
    }
    assert not_carried == {}
    accepted(settings)


@pytest.mark.parametrize(("java", "librdkafka"), [("", "none"), ("https", "https")])
def test_host_name_checking_is_switched_off_as_librdkafka_spells_it(
    java: str, librdkafka: str
) -> None:
    settings, _ = translate(ssl__endpoint__identification__algorithm=java)
    assert settings["ssl.endpoint.identification.algorithm"] == librdkafka
    accepted(settings)


def test_consumer_tuning_is_left_out_without_a_word() -> None:
    settings, not_carried = translate(
        fetch__max__wait__ms="0",
        max__poll__records="700",
        default__api__timeout__ms="60000",
        request__timeout__ms="30000",
        isolation__level="read_committed",
        max__partition__fetch__bytes="262144",
    )
    assert (settings, not_carried) == ({"bootstrap.servers": "b:9092"}, {})


@pytest.mark.parametrize(
    ("jaas", "username", "password"),
    [
        (f'{PLAIN} required username="alice" password="alice-pw";', "alice", "alice-pw"),
        (f'{SCRAM} required username="bob" password="bob-pw";', "bob", "bob-pw"),
        # Java's tokenizer: either quote, escapes, ; and = inside quotes, any spacing.
        (f"{PLAIN}  Required\n  username='a b'\n  password='p;w=x';", "a b", "p;w=x"),
        (f'{PLAIN} required username="q\\"uote" password="back\\\\slash\\n";', 'q"uote',
         "back\\slash\n"),
        (f'{PLAIN} required username="oct\\101" password="\\q";', "octA", "q"),
        (f"{PLAIN} required password=plain_word username=user.name-1 ;", "user.name-1",
         "plain_word"),
        (f'{SCRAM} required username="u" password="p" tokenauth="false";', "u", "p"),
    ],
)  # fmt: skip
def test_plain_and_scram_logins_become_librdkafka_credentials(
    jaas: str, username: str, password: str
) -> None:
    settings, not_carried = translate(sasl__jaas__config=jaas)
    assert (settings["sasl.username"], settings["sasl.password"]) == (username, password)
    assert not_carried == {}


@pytest.mark.parametrize(
    ("jaas", "why"),
    [
        (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            'keyTab="/etc/k.keytab" principal="cdc@EXAMPLE.COM";',
            "a login with Krb5LoginModule",
        ),
        (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'clientId="cdc" clientSecret="s3cr3t";',
            "a login with OAuthBearerLoginModule",
        ),
        (f'{SCRAM} required username="u" password="s3cr3t" tokenauth="true";', "delegation"),
        (f'{PLAIN} required username="u";', "without username and password"),
        (f'{PLAIN} required username="u" password="s3cr3t"', "not read"),  # no ;
        (f'{PLAIN} username="u" password="s3cr3t";', "not read"),  # no control flag
        (f'{PLAIN} required username="u" password="s3cr3t"; {PLAIN} required;', "not read"),
        (f'{PLAIN} required username="u" password="s3cr3t;', "not read"),  # open quote
        (f'{PLAIN} required /* a comment */ username="u" password="s3cr3t";', "not read"),
    ],
)
def test_other_logins_are_named_not_carried_and_their_secrets_never(jaas: str, why: str) -> None:
    settings, not_carried = translate(sasl__jaas__config=jaas)
    assert "sasl.username" not in settings
    assert why in not_carried["sasl.jaas.config"]
    assert "s3cr3t" not in str(not_carried)
    accepted(settings)


def test_a_pem_trust_store_becomes_librdkafkas_ca_certificates() -> None:
    settings, not_carried = translate(
        ssl__truststore__type="PEM", ssl__truststore__location="/etc/kafka/ca.pem"
    )
    assert (settings["ssl.ca.location"], not_carried) == ("/etc/kafka/ca.pem", {})
    settings, not_carried = translate(
        ssl__truststore__type="pem", ssl__truststore__certificates="-----BEGIN CERTIFICATE..."
    )
    assert (settings["ssl.ca.pem"], not_carried) == ("-----BEGIN CERTIFICATE...", {})


@pytest.mark.parametrize("kind", [None, "JKS", "PKCS12"])
def test_a_jks_or_pkcs12_trust_store_is_named_not_carried(kind: str | None) -> None:
    java = {"ssl__truststore__location": "/etc/kafka/t.jks", "ssl__truststore__password": "tpw"}
    if kind:
        java["ssl__truststore__type"] = kind
    settings, not_carried = translate(**java)
    assert settings == {"bootstrap.servers": "b:9092"}
    assert set(not_carried) == {"ssl.truststore.location", "ssl.truststore.password"}
    assert f"a {kind or 'JKS'} trust store" in not_carried["ssl.truststore.location"]
    assert "tpw" not in str(not_carried)


def test_a_pkcs12_key_store_and_pem_key_text_are_carried() -> None:
    settings, not_carried = translate(
        ssl__keystore__type="PKCS12",
        ssl__keystore__location="/etc/kafka/client.p12",
        ssl__keystore__password="spw",
        ssl__key__password="spw",
    )
    assert settings["ssl.keystore.location"] == "/etc/kafka/client.p12"
    assert (settings["ssl.keystore.password"], not_carried) == ("spw", {})
    # librdkafka opens the whole file with one password.
    _, not_carried = translate(
        ssl__keystore__type="PKCS12",
        ssl__keystore__location="/etc/kafka/client.p12",
        ssl__keystore__password="spw",
        ssl__key__password="other",
    )
    assert set(not_carried) == {"ssl.key.password"}
    settings, not_carried = translate(
        ssl__keystore__type="PEM",
        ssl__keystore__key="KEY",
        ssl__keystore__certificate__chain="CHAIN",
        ssl__key__password="kpw",
    )
    assert (settings["ssl.key.pem"], settings["ssl.certificate.pem"]) == ("KEY", "CHAIN")
    assert (settings["ssl.key.password"], not_carried) == ("kpw", {})


def test_a_jks_key_store_is_named_not_carried() -> None:
    settings, not_carried = translate(
        ssl__keystore__location="/etc/kafka/k.jks",
        ssl__keystore__password="spw",
        ssl__key__password="kpw",
    )
    assert settings == {"bootstrap.servers": "b:9092"}
    assert set(not_carried) == {
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
    }
    assert "a JKS key store" in not_carried["ssl.keystore.location"]


def test_driver_options_are_passed_verbatim_over_the_translation() -> None:
    made = driver_kafka(
        "b:9092",
        {
            "kafka.sasl.jaas.config": f'{PLAIN} required username="java" password="p";',
            "kafka.ssl.truststore.location": "/t.jks",
        },
        {"sasl.username": "driver", "ssl.ca.location": "/ca.pem"},
    )
    assert made.settings["sasl.username"] == "driver"
    assert made.settings["sasl.password"] == "p"
    assert made.settings["ssl.ca.location"] == "/ca.pem"
    assert made.origins["ssl.ca.location"] == "source.driver-options.ssl.ca.location"
    assert made.origins["sasl.password"] == "source.options.kafka.sasl.jaas.config"


def test_the_credentials_never_show_in_repr() -> None:
    made = driver_kafka(
        "b:9092", {"kafka.sasl.jaas.config": f'{PLAIN} required username="u" password="s3";'}, {}
    )
    assert '"s3"' not in repr(made)
    assert "'s3'" not in repr(made)


@pytest.fixture(scope="module")
def pem_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, and a client key (encrypted, passphrase kpw) and certificate it signed."""
    openssl = shutil.which("openssl")
    # Part of the machine's base (Debian's openssl): a test that cannot run must fail.
    assert openssl is not None, "this test makes its PEM and PKCS12 files with openssl"
    d = tmp_path_factory.mktemp("pem")
    for args in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
         "ca.pem", "-days", "2", "-subj", "/CN=ca"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out", "client.csr",
         "-subj", "/CN=client"],
        ["x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "client.pem", "-days", "2"],
        ["pkcs8", "-topk8", "-in", "client.key", "-out", "client.enc.key", "-passout",
         "pass:kpw", "-v2", "aes-256-cbc"],
        ["pkcs12", "-export", "-in", "client.pem", "-inkey", "client.key", "-out",
         "client.p12", "-passout", "pass:spw"],
    ):  # fmt: skip
        subprocess.run([openssl, *args], cwd=d, check=True, capture_output=True)
    return d


def test_librdkafka_loads_the_translated_pem_and_pkcs12_files(pem_files: Path) -> None:
    tls = {"security__protocol": "SSL", "ssl__truststore__type": "PEM"}
    settings, _ = translate(
        **tls,
        ssl__truststore__location=str(pem_files / "ca.pem"),
        ssl__keystore__type="PKCS12",
        ssl__keystore__location=str(pem_files / "client.p12"),
        ssl__keystore__password="spw",
    )
    accepted(settings)
    settings, _ = translate(
        **tls,
        ssl__truststore__certificates=(pem_files / "ca.pem").read_text(),
        ssl__keystore__type="PEM",
        ssl__keystore__key=(pem_files / "client.enc.key").read_text(),
        ssl__keystore__certificate__chain=(pem_files / "client.pem").read_text(),
        ssl__key__password="kpw",
    )
    accepted(settings)


def test_a_connection_failure_names_what_the_driver_could_not_take(conf_file: Path) -> None:
    config = load_config(
        conf_file,
        [
            "source.options.kafka.ssl.truststore.location=/etc/kafka/t.jks",
            "source.options.kafka.ssl.truststore.password=t-s3cr3t",
        ],
    )
    with pytest.raises(PreflightError) as failed:
        check_kafka(config.source, timeout_s=0.5)
    text = str(failed.value)
    assert "did not answer" in text
    assert "source.options.kafka.ssl.truststore.location (a JKS trust store" in text
    assert "source.driver-options.*" in text
    assert "t-s3cr3t" not in text


def test_a_setting_librdkafka_refuses_is_named_by_its_option(conf_file: Path) -> None:
    # A Java name given to the driver's client: named where it was set, not a silent timeout.
    config = load_config(conf_file, ["source.driver-options.fetch.max.wait.ms=0"])
    with pytest.raises(PreflightError, match=r"from source\.driver-options\.fetch\.max\.wait\.ms"):
        check_kafka(config.source, timeout_s=0.5)
    # SASL without credentials librdkafka can use: the login it could not take is named.
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="cdc" clientSecret="s3cr3t";'
    )
    config = load_config(
        conf_file,
        [
            "source.options.kafka.security.protocol=SASL_PLAINTEXT",
            "source.options.kafka.sasl.mechanism=PLAIN",
            f"source.options.kafka.sasl.jaas.config={jaas}",
        ],
    )
    with pytest.raises(PreflightError) as failed:
        check_kafka(config.source, timeout_s=0.5)
    text = str(failed.value)
    assert "sasl.username and sasl.password must be set" in text
    assert "source.options.kafka.sasl.jaas.config (a login with OAuthBearerLoginModule" in text
    assert "source.driver-options.*" in text
    assert "s3cr3t" not in text
