"""One options layer: typed getters with the same spelling rules for every setting.

Every section of the configuration (``pipeline``, ``source``, ``assembler``, ``starrocks``)
reads its strings through :class:`Options`, so ``on`` means true everywhere, ``10m`` is a
duration everywhere, ``64MiB`` a size everywhere, and every error names the full key and the
accepted spellings:

* bool: ``true``/``false``, ``yes``/``no``, ``on``/``off``, ``1``/``0`` (any case);
* int: digits, ``_`` as a thousands separator;
* duration: ``500ms``, ``30s``, ``10m`` (or ``10min``), ``1h``, ``2d``; a bare number is in
  the unit the key names (``...-ms`` keys: milliseconds, ``...-s`` keys: seconds);
* size: ``64k``/``64KB`` (decimal), ``64KiB`` (binary), ``M``/``G`` likewise, or bytes;
* secret: a :class:`Secret`, never printed (and ``--get`` refuses it, see
  :func:`is_secret_key`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NoReturn

from common.errors import ConfigError

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_SIZE_FACTOR = {"k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2, "gi": 1024**3}
# Last key parts that hold credentials (``starrocks.password``,
# ``source.options.kafka.sasl.jaas.config``): never printed, never logged.
_SECRET_PARTS = ("password", "secret", "jaas", "token", "credential")
# Private keys given as text (Kafka's ``ssl.keystore.key``, librdkafka's ``ssl.key.pem``).
_SECRET_ENDINGS = ("keystore.key", "key.pem")


class Secret:
    """A string that never shows itself in ``repr``/``str``/logs; call :meth:`reveal`."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """Return the secret (only to build an ``Authorization`` header or connect)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('******')"

    def __str__(self) -> str:
        return "******"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> tuple[Any, ...]:
        # Executors need the password to talk to StarRocks; pickling keeps it (never printed).
        return (Secret, (self._value,))


def is_secret_key(dotted: str) -> bool:
    """Whether a setting holds a credential (``--get`` refuses those)."""
    lowered = dotted.lower()
    last = lowered.rsplit(".", 1)[-1]
    return (
        any(part in last for part in _SECRET_PARTS)
        or "jaas" in lowered
        or lowered.endswith(_SECRET_ENDINGS)
    )


def _text(raw: Any) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return "" if raw is None else str(raw).strip()


class Options:
    """Typed reads of one section's ``key -> value`` mapping.

    Args:
        values: The section (YAML values, ``--set`` and environment overrides as strings).
        section: Its name, prefixed to keys in messages (``pipeline``...); may be empty.
        what: How messages call a key (``setting``, ``StarRocks sink option``...).
    """

    def __init__(self, values: Mapping[str, Any], section: str = "", what: str = "setting") -> None:
        self._values = values
        self._section = section
        self._what = what

    def name(self, key: str) -> str:
        """The full key as the user writes it."""
        return f"{self._section}.{key}" if self._section else key

    def fail(self, key: str, problem: str) -> NoReturn:
        """Raise a :class:`ConfigError` naming the key."""
        msg = f"{self._what} {self.name(key)!r}: {problem}"
        raise ConfigError(msg)

    def raw(self, key: str) -> str | None:
        """The value as text, or None when absent or blank."""
        text = _text(self._values.get(key))
        return text or None

    def text(self, key: str, default: str = "") -> str:
        """A string (surrounding blanks removed)."""
        value = self.raw(key)
        return default if value is None else value

    def required(self, key: str) -> str:
        """A non-blank string."""
        value = self.raw(key)
        if value is None:
            self.fail(key, "is required")
        return value

    def integer(
        self, key: str, default: int, *, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        """A whole number within bounds."""
        text = self.raw(key)
        if text is None:
            return default
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            self.fail(key, f"{text!r} is not a whole number")
        self._bounds(key, value, minimum, maximum)
        return value

    def boolean(self, key: str, default: bool) -> bool:
        """true/false, yes/no, on/off, 1/0."""
        text = self.raw(key)
        if text is None:
            return default
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        self.fail(key, f"{text!r} is not a boolean (true/false, yes/no, on/off, 1/0)")

    def duration_s(
        self, key: str, default: float, *, unit: str, minimum: float | None = None
    ) -> float:
        """Seconds from ``500ms``/``30s``/``10m``/``1h``/``2d``; a bare number is in ``unit``."""
        text = self.raw(key)
        if text is None:
            return default
        m = _DURATION.match(text)
        if not m:
            self.fail(key, f"{text!r} is not a duration (e.g. 500ms, 30s, 10m, 1h)")
        seconds = float(m.group(1)) * _DURATION_S[(m.group(2) or unit).lower()]
        if minimum is not None and seconds < minimum:
            self.fail(key, f"must be at least {minimum:g}s, got {text!r}")
        return seconds

    def size(self, key: str, default: int, *, minimum: int | None = None) -> int:
        """Bytes from ``64k``, ``64KB`` (decimal), ``64KiB`` (binary), ``M``/``G`` or digits."""
        text = self.raw(key)
        if text is None:
            return default
        m = _SIZE.match(text.replace("_", ""))
        if not m:
            self.fail(key, f"{text!r} is not a size (e.g. 268435456, 256MiB, 100MB)")
        unit = (m.group(2) or "").lower().rstrip("b")
        value = int(m.group(1)) * _SIZE_FACTOR.get(unit, 1)
        self._bounds(key, value, minimum, None)
        return value

    def secret(self, key: str) -> Secret:
        """A credential (empty when absent)."""
        return Secret(_text(self._values.get(key)))

    def _bounds(self, key: str, value: int, minimum: int | None, maximum: int | None) -> None:
        if minimum is not None and value < minimum:
            self.fail(key, f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            self.fail(key, f"must be <= {maximum}, got {value}")
