"""Settings for the driver's own Kafka clients (librdkafka), made from Spark's Java ones.

``source.options.kafka.*`` configure the connector's Java consumer. The driver asks the same
brokers a few short questions itself (reachable? topic ids and partitions, a partition's
earliest offset) through confluent-kafka, and librdkafka refuses Java-only properties
(``sasl.jaas.config``, trust stores) and unknown ones (``fetch.max.wait.ms``). So the driver
takes only what librdkafka reads the same way, translates the usual security settings where
librdkafka has a faithful equivalent (its CONFIGURATION.md), leaves consumer tuning out, and
names the security settings it could not carry over; ``source.driver-options.*`` (librdkafka
names, passed verbatim, winning over the translation) supply those instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

#: The free-form section whose keys go to the driver's librdkafka clients as they are.
DRIVER_OPTIONS = "source.driver-options"

#: Java names librdkafka takes with the same meaning and the same values.
_SAME = ("client.id", "client.dns.lookup", "sasl.mechanism", "sasl.kerberos.service.name")

_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_CONTROL_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_UNREAD = "not read as one JAAS login module entry"

# Java reads sasl.jaas.config with a StreamTokenizer: quoted strings ("..." or '...', with
# backslash escapes), words, = and ;. Comments are not read here: such a config is reported
# as not carried over rather than guessed at.
_JAAS_TOKEN = re.compile(
    r"""\s*(?:(?P<q>["'])(?P<quoted>(?:\\[^\n\r]|(?!(?P=q))[^\\\n\r])*)(?P=q)"""
    r"""|(?P<word>[\w.$-]+)|(?P<punct>[=;]))"""
)
_ESCAPE = re.compile(r"\\([0-3][0-7]{2}|[0-7]{1,2}|.)")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@dataclass(frozen=True)
class DriverKafka:
    """librdkafka settings for the driver's clients, and what they could not take."""

    settings: dict[str, str] = field(repr=False)  # credentials among them
    #: librdkafka key -> the option(s) it came from, to name them when librdkafka refuses it.
    origins: dict[str, str] = field(default_factory=dict)
    #: Java security settings left out -> why (never their values).
    not_carried: dict[str, str] = field(default_factory=dict)

    def hint(self) -> str:
        """What a connection failure adds: the settings left out, and where to give them."""
        if not self.not_carried:
            return ""
        left = "; ".join(f"source.options.kafka.{k} ({why})" for k, why in self.not_carried.items())
        return (
            f". The driver's own Kafka client (librdkafka) could not take {left}: give it "
            f"librdkafka settings under {DRIVER_OPTIONS}.* (e.g. ssl.ca.location, "
            "sasl.username, sasl.password)"
        )


@dataclass
class _Builder:
    java: Mapping[str, str]
    settings: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    not_carried: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)

    def carry(self, key: str, value: str, source: str) -> None:
        self.settings[key] = value
        self.origins[key] = f"source.options.kafka.{source}"
        self.used.add(source)

    def leave(self, keys: set[str], why: str) -> None:
        for key in keys:
            self.not_carried[key] = why
        self.used |= keys


def driver_kafka(
    bootstrap_servers: str, java: Mapping[str, str], driver_options: Mapping[str, str]
) -> DriverKafka:
    """The driver's librdkafka settings.

    Args:
        bootstrap_servers: ``source.bootstrap-servers``: the cluster Spark reads.
        java: ``source.options`` (``kafka.``-prefixed Java consumer settings).
        driver_options: ``source.driver-options``: librdkafka settings, applied last.
    """
    b = _Builder({k.removeprefix("kafka."): v for k, v in java.items() if k.startswith("kafka.")})
    # A store's type says how to read its location: carried or named with it, not alone.
    b.used |= {"ssl.truststore.type", "ssl.keystore.type"}
    for key in _SAME:
        if key in b.java:
            b.carry(key, b.java[key], key)
    if "security.protocol" in b.java:
        # Java takes any case (SecurityProtocol.forName); librdkafka's enum is lower case.
        b.carry(
            "security.protocol", b.java["security.protocol"].strip().lower(), "security.protocol"
        )
    name = "ssl.endpoint.identification.algorithm"
    if name in b.java:
        # Java turns host name checking off with an empty value, librdkafka with "none".
        b.carry(name, b.java[name].strip().lower() or "none", name)
    _login(b)
    _trust_store(b)
    _key_store(b)
    for key in sorted(set(b.java) - b.used):
        # Tuning (fetch sizes, timeouts...) is the long-lived Java consumer's; a setting that
        # decides whether a connection succeeds is named when the driver cannot connect.
        if key.startswith(("sasl.", "ssl.")) or key == "security.providers":
            b.not_carried[key] = "no librdkafka equivalent"
    for key, value in driver_options.items():
        b.settings[key] = value
        b.origins[key] = f"{DRIVER_OPTIONS}.{key}"
    b.settings["bootstrap.servers"] = bootstrap_servers
    b.origins["bootstrap.servers"] = "source.bootstrap-servers"
    return DriverKafka(b.settings, b.origins, dict(sorted(b.not_carried.items())))


def _login(b: _Builder) -> None:
    """A PLAIN or SCRAM ``sasl.jaas.config`` -> librdkafka's ``sasl.username``/``password``."""
    if "sasl.jaas.config" not in b.java:
        return
    login = _jaas_login(b.java["sasl.jaas.config"])
    if isinstance(login, str):
        b.leave({"sasl.jaas.config"}, login)
        return
    b.carry("sasl.username", login[0], "sasl.jaas.config")
    b.carry("sasl.password", login[1], "sasl.jaas.config")


def _trust_store(b: _Builder) -> None:
    """A PEM trust store -> librdkafka's CA certificates (PEM is all librdkafka reads)."""
    keys = {"ssl.truststore.location", "ssl.truststore.certificates"} & set(b.java)
    if not keys:
        return
    kind = b.java.get("ssl.truststore.type", "JKS").strip().upper()  # Java's default: JKS
    if kind != "PEM":
        why = f"a {kind} trust store; librdkafka reads PEM CA certificates"
        b.leave(keys | ({"ssl.truststore.password"} & set(b.java)), why)
        return
    if "ssl.truststore.location" in b.java:
        # ssl.ca.location: "File or directory path to CA certificate(s)".
        b.carry("ssl.ca.location", b.java["ssl.truststore.location"], "ssl.truststore.location")
    if "ssl.truststore.certificates" in b.java:
        # ssl.ca.pem: "CA certificate string (PEM format)"; every one of them since 2.0.
        cas = b.java["ssl.truststore.certificates"]
        b.carry("ssl.ca.pem", cas, "ssl.truststore.certificates")


def _key_store(b: _Builder) -> None:
    """The client certificate: a PKCS12 file, or PEM key and chain text, as librdkafka's."""
    keys = {
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.key.password",
    } & set(b.java)
    if not keys:
        return
    kind = b.java.get("ssl.keystore.type", "JKS").strip().upper()  # Java's default: JKS
    location = b.java.get("ssl.keystore.location")
    password = b.java.get("ssl.keystore.password")
    key_password = b.java.get("ssl.key.password")
    pem_text = {"ssl.keystore.key", "ssl.keystore.certificate.chain"}
    if kind == "PKCS12" and location is not None and password is not None:
        # librdkafka's ssl.keystore.location is a PKCS#12 file, opened with its password.
        b.carry("ssl.keystore.location", location, "ssl.keystore.location")
        b.carry("ssl.keystore.password", password, "ssl.keystore.password")
        if key_password is not None and key_password != password:
            b.leave(
                {"ssl.key.password"}, "librdkafka opens the whole PKCS12 file with one password"
            )
        b.used.add("ssl.key.password")
    elif kind == "PEM" and location is None and pem_text <= keys:
        b.carry("ssl.key.pem", b.java["ssl.keystore.key"], "ssl.keystore.key")
        chain = b.java["ssl.keystore.certificate.chain"]
        b.carry("ssl.certificate.pem", chain, "ssl.keystore.certificate.chain")
        if key_password is not None:
            # An encrypted PEM key's passphrase, in Java and in librdkafka alike.
            b.carry("ssl.key.password", key_password, "ssl.key.password")
    elif kind == "PEM" and location is not None:
        why = "a PEM key store file; librdkafka takes ssl.key.location and ssl.certificate.location"
        b.leave(keys, why)
    else:
        why = f"a {kind} key store; librdkafka reads a PKCS12 file with its password, or PEM text"
        b.leave(keys, why)


def _jaas_login(text: str) -> tuple[str, str] | str:
    """(username, password) of a PLAIN or SCRAM login, or why it cannot be carried over."""
    tokens = _jaas_tokens(text)
    if tokens is None or len(tokens) < 3 or tokens[-1][0] != ";":
        return _UNREAD
    (module_kind, module), (flag_kind, flag), *pairs = tokens[:-1]
    if module_kind != "word" or flag_kind != "word" or flag.lower() not in _CONTROL_FLAGS:
        return _UNREAD
    if len(pairs) % 3:
        return _UNREAD
    options: dict[str, str] = {}
    for (key_kind, key), (equals, _), (value_kind, value) in zip(
        pairs[::3], pairs[1::3], pairs[2::3], strict=True
    ):
        if key_kind != "word" or equals != "=" or value_kind not in ("word", "quoted"):
            return _UNREAD
        options[key] = value
    if module not in (_PLAIN, _SCRAM):
        # GSSAPI (Kerberos), OAUTHBEARER...: librdkafka logs in with settings of its own.
        name = module.rsplit(".", 1)[-1]
        return f"a login with {name}; librdkafka has its own settings for that mechanism"
    if options.get("tokenauth", "false").lower() == "true":
        return "a SCRAM delegation token login, which librdkafka does not do"
    if "username" not in options or "password" not in options:
        return "a login without username and password"
    return options["username"], options["password"]


def _jaas_tokens(text: str) -> list[tuple[str, str]] | None:
    """``(kind, text)``: ``word`` and ``quoted`` with their text, ``=`` and ``;`` with ""."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while text[pos:].strip():
        m = _JAAS_TOKEN.match(text, pos)
        if m is None:
            return None
        if m.group("punct"):
            tokens.append((m.group("punct"), ""))
        elif m.group("word") is not None:
            tokens.append(("word", m.group("word")))
        else:
            tokens.append(("quoted", _ESCAPE.sub(_unescape, m.group("quoted"))))
        pos = m.end()
    return tokens


def _unescape(m: re.Match[str]) -> str:
    """StreamTokenizer's escapes: octal, the C letters, and any other character as itself."""
    code = m.group(1)
    if code[0] in "01234567":
        return chr(int(code, 8))
    return _ESCAPES.get(code, code)
