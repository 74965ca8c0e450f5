"""JSON text of a parsed object with every number exactly as the source wrote it.

orjson reads a number with a fraction or an exponent as a double, and an integer beyond 64
bits as a double too (silently, orjson 3.x). Written back, such a value loses digits: a
``DECIMAL(38,18)`` or a ``LARGEINT`` would arrive changed. Integers and strings survive a
parse exactly, so an object without floats is written by orjson; one with any float is read
again with the stdlib, numbers as ``Decimal`` and integers unbounded, and written from that.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson


def has_float(value: Any) -> bool:
    """Whether ``value`` (parsed JSON) holds a float anywhere."""
    kind = type(value)
    if kind is float:
        return True
    if kind is not dict and kind is not list:
        return False
    items = value.values() if kind is dict else value
    # The types of a row's values are collected in C; only nested ones are walked.
    kinds = set(map(type, items))
    if float in kinds:
        return True
    if dict in kinds or list in kinds:
        return any(has_float(v) for v in items if type(v) is dict or type(v) is list)
    return False


def refuse_constant(name: str) -> Any:
    """``parse_constant`` of ``json.loads``: NaN, Infinity and -Infinity are not JSON.

    The stdlib accepts them; StarRocks' strict parser (simdjson) refuses them, and one such
    row would fail its batch on every replay.
    """
    msg = f"{name} is not a JSON number (StarRocks refuses NaN and Infinity)"
    raise ValueError(msg)


def exact_loads(data: bytes | str) -> Any:
    """Parse ``data`` with numbers as written: ``Decimal`` for fractions, unbounded ints."""
    return json.loads(data, parse_float=Decimal)


def decimal_json(value: Any) -> str:
    """Compact JSON in which ``Decimal`` numbers keep their exact digits."""
    if type(value) is Decimal:
        return str(value) if value.is_finite() else json.dumps(float(value))
    if type(value) is dict:
        items = ",".join(
            f"{json.dumps(k, ensure_ascii=False)}:{decimal_json(v)}" for k, v in value.items()
        )
        return "{" + items + "}"
    if type(value) is list:
        return "[" + ",".join(decimal_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def exact_text(value: Any, exact: Callable[[], Any]) -> str:
    """``value`` (parsed by orjson) as compact JSON text with its numbers as written.

    Args:
        value: The parsed object.
        exact: The same object read again by :func:`exact_loads`; called only when ``value``
            holds a float, which may have lost digits.
    """
    if not has_float(value):
        try:
            return orjson.dumps(value).decode()
        except TypeError:  # an integer beyond 64 bits, read by the stdlib
            return decimal_json(value)
    return decimal_json(exact())
