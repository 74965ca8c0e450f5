"""Assembler settings: violation policies and transaction limits.

Built once at the edge (:meth:`AssemblerSettings.from_options`), validated before Spark starts,
frozen and picklable so the same object reaches every executor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from assembler.codecs import ENCODINGS, CodecSettings, make_decoder
from common.errors import ConfigError
from common.options import Options


class Violation(str, Enum):  # noqa: UP042 -- the fixed API says (str, Enum)
    """Every way input can break the event contract; each has its own policy.

    The values are the option-key suffixes (``on-error.<value>``) and prefix every reject
    reason, so a dead-letter reader can group rejects by violation.
    """

    UNDECODABLE = "undecodable"
    UNKNOWN_TYPE = "unknown-type"
    NO_BEGIN = "no-begin"
    TXN_ID_MISMATCH = "txn-id-mismatch"
    BEGIN_WHILE_OPEN = "begin-while-open"
    EVENT_COUNT_MISMATCH = "event-count-mismatch"
    TXN_TOO_LARGE = "txn-too-large"
    TXN_TIMEOUT = "txn-timeout"
    UNKNOWN_TABLE = "unknown-table"


class Policy(str, Enum):  # noqa: UP042 -- the fixed API says (str, Enum)
    """What to do on a violation."""

    REJECT = "reject"
    """Send the whole source transaction to the reject output with a reason; go on."""
    FAIL = "fail"
    """Stop the query with an error naming topic, partition, offset and transaction."""


def _default_policies() -> dict[Violation, Policy]:
    return dict.fromkeys(Violation, Policy.REJECT)


_MAX_TXN_ROWS = 2**31 - 2

OPTION_KEYS: tuple[str, ...] = (
    "encoding",
    "schema-path",
    "registry-url",
    "registry-timeout",
    "max-txn-rows",
    "max-txn-bytes",
    "txn-timeout",
    "on-error.default",
    *(f"on-error.{v.value}" for v in Violation),
)
"""Every key :meth:`AssemblerSettings.from_options` accepts."""


@dataclass(frozen=True)
class Targets:
    """The tables DATA events may write: the sink's database and ``table-name``.

    A row for anything else would fail the sink terminally on every replay of its batch, so it
    is an ``unknown-table`` violation instead (its transaction is dead-lettered or the query
    fails, by policy). The sink's own tables (progress, dead letters) are never targets: only
    the pipeline writes them.
    """

    database: str
    tables: frozenset[str] | None  # None: any table of the database (table-name: *)
    reserved: frozenset[str] = frozenset()

    def problem(self, database: str, table: str) -> str | None:
        """Why ``database.table`` may not be written, or ``None`` when it may."""
        if table in self.reserved:
            return f"table {table!r} is the sink's own; only the pipeline writes it"
        if database != self.database:
            return f"database {database!r} is not the sink's database-name {self.database!r}"
        if self.tables is not None and table not in self.tables:
            return (
                f"table {table!r} is not in table-name ({', '.join(sorted(self.tables))}); "
                "add it there (and create it) to load it"
            )
        return None


@dataclass(frozen=True)
class AssemblerSettings:
    """Policies and limits of the transaction assembler.

    Attributes:
        codec: how record values are decoded.
        policies: violation -> policy; violations left out default to REJECT.
        max_txn_rows: a transaction with more DATA events is a ``txn-too-large`` violation.
        max_txn_bytes: bound on the buffered size of one transaction (``assembler.buffer``
            encoding: 17 bytes + database + table + row per DATA event).
        txn_timeout_ms: a transaction open longer than this (processing time since its BEGIN
            was applied) is a ``txn-timeout`` violation.
        targets: the tables DATA events may write (``None``: not checked here); set by the
            app from the sink's settings.
    """

    codec: CodecSettings = field(default_factory=CodecSettings)
    policies: Mapping[Violation, Policy] = field(default_factory=_default_policies)
    max_txn_rows: int = 1_000_000
    max_txn_bytes: int = 256 * 1024 * 1024
    txn_timeout_ms: int = 600_000
    targets: Targets | None = None

    def __post_init__(self) -> None:
        # A plain dict (not MappingProxyType) so the settings stay picklable.
        merged = _default_policies()
        merged.update({Violation(k): Policy(v) for k, v in self.policies.items()})
        object.__setattr__(self, "policies", merged)
        for name in ("max_txn_rows", "max_txn_bytes", "txn_timeout_ms"):
            if getattr(self, name) <= 0:
                msg = f"{name} must be positive, got {getattr(self, name)}"
                raise ConfigError(msg)
        if self.max_txn_rows > _MAX_TXN_ROWS:
            # txn_rows is an INT state field and row_seq an INT output column.
            msg = f"max_txn_rows must be at most {_MAX_TXN_ROWS}, got {self.max_txn_rows}"
            raise ConfigError(msg)

    def policy(self, v: Violation) -> Policy:
        """The policy for violation ``v``."""
        return self.policies.get(v, Policy.REJECT)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> AssemblerSettings:
        """Build settings from string options (config file, ``--set``), validating each.

        Keys (all optional): ``encoding`` (json|avro|confluent), ``schema-path``,
        ``registry-url``, ``registry-timeout`` (duration), ``max-txn-rows`` (int),
        ``max-txn-bytes`` (int or with a unit: ``64MiB``, ``1GB``), ``txn-timeout``
        (``10m``, ``30s``, ``500ms``, ``1h`` or integer milliseconds), ``on-error.default``
        and ``on-error.<violation>`` (``reject``|``fail``), violation names as in
        :class:`Violation` (e.g. ``on-error.txn-id-mismatch``).

        The schema (``schema-path``, or the packaged one) is read and checked as the executors'
        decoders will read it.

        Raises:
            ConfigError: an unknown key or an invalid value; the message names the key.
        """
        unknown = sorted(set(options) - set(OPTION_KEYS))
        if unknown:
            msg = (
                f"unknown assembler option(s) {', '.join(unknown)}; "
                f"accepted: {', '.join(OPTION_KEYS)}"
            )
            raise ConfigError(msg)

        encoding = options.get("encoding", "json").strip().lower()
        if encoding not in ENCODINGS:
            msg = f"encoding: {encoding!r} is not one of {', '.join(ENCODINGS)}"
            raise ConfigError(msg)
        codec_kwargs: dict[str, object] = {}
        if "registry-timeout" in options:
            codec_kwargs["registry_timeout_s"] = (
                parse_duration_ms("registry-timeout", options["registry-timeout"]) / 1000
            )
        codec = CodecSettings(
            encoding=encoding,
            schema_path=options.get("schema-path") or None,
            registry_url=options.get("registry-url") or None,
            **codec_kwargs,  # type: ignore[arg-type]  # only registry_timeout_s: float
        )
        if codec.encoding == "confluent" and not codec.registry_url:
            msg = "registry-url: required when encoding is confluent"
            raise ConfigError(msg)
        try:
            # Executors build the decoder at their first micro-batch: a missing or wrong schema
            # fails here instead, before Spark starts. No registry request (confluent).
            make_decoder(codec)
        except ConfigError as e:
            msg = f"assembler.schema-path: {str(e).removeprefix('codec: ')}"
            raise ConfigError(msg) from e

        default = _parse_policy("on-error.default", options.get("on-error.default", "reject"))
        policies = {
            v: _parse_policy(f"on-error.{v.value}", options[f"on-error.{v.value}"])
            if f"on-error.{v.value}" in options
            else default
            for v in Violation
        }
        kwargs: dict[str, Any] = {}
        if "max-txn-rows" in options:
            kwargs["max_txn_rows"] = _parse_positive_int(
                "max-txn-rows", options["max-txn-rows"], maximum=_MAX_TXN_ROWS
            )
        if "max-txn-bytes" in options:
            kwargs["max_txn_bytes"] = parse_size("max-txn-bytes", options["max-txn-bytes"])
        if "txn-timeout" in options:
            kwargs["txn_timeout_ms"] = parse_duration_ms("txn-timeout", options["txn-timeout"])
        return cls(codec=codec, policies=policies, **kwargs)


def _parse_policy(key: str, value: str) -> Policy:
    try:
        return Policy(value.strip().lower())
    except ValueError:
        msg = f"{key}: {value!r} is not a policy (expected reject or fail)"
        raise ConfigError(msg) from None


def _parse_positive_int(key: str, value: str, maximum: int | None = None) -> int:
    opt = Options({key: value}, what="assembler option")
    return opt.integer(key, 0, minimum=1, maximum=maximum)


def parse_duration_ms(key: str, value: str) -> int:
    """``"10m"``, ``"30s"``, ``"500ms"``, ``"1h"``, ``"2d"`` or integer milliseconds.

    The spelling rules are the project's one options layer (:mod:`common.options`).
    """
    opt = Options({key: value}, what="assembler option")
    ms = round(opt.duration_s(key, 0, unit="ms") * 1000)
    if ms <= 0:
        opt.fail(key, f"must be positive, got {value!r}")
    return ms


def parse_size(key: str, value: str) -> int:
    """Bytes: ``"268435456"``, ``"256MiB"`` (binary), ``"256MB"`` (decimal), ``"64k"``."""
    return Options({key: value}, what="assembler option").size(key, 0, minimum=1)
