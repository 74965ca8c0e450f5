from decimal import Decimal

import orjson
import pytest

from common.exact_json import decimal_json, exact_loads, exact_text, has_float

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "text",
    [
        '{"a":12345678901234567.123456789}',
        '{"a":123456789012345678901234567890}',
        '{"a":[1,{"b":-0.000000000000000000001}]}',
        '{"a":1E+400}',
        '{"a":0.1,"b":"ü","c":null,"d":true}',
    ],
)
def test_numbers_keep_their_value(text: str) -> None:
    parsed = orjson.loads(text) if "E+400" not in text else exact_loads(text)
    out = exact_text(parsed, lambda: exact_loads(text))
    assert exact_loads(out) == exact_loads(text)
    assert "e+" not in out  # never a double's digits


def test_the_digits_are_those_written() -> None:
    text = '{"a":12345678901234567.123456789,"b":123456789012345678901234567890}'
    assert exact_text(orjson.loads(text), lambda: exact_loads(text)) == text


def test_without_floats_orjson_writes_and_nothing_is_read_again() -> None:
    def never() -> object:
        raise AssertionError("read again")

    assert exact_text({"a": 1, "b": ["x", None]}, never) == '{"a":1,"b":["x",null]}'
    assert exact_text({"a": 2**70}, never) == '{"a":1180591620717411303424}'


def test_has_float_and_decimal_json() -> None:
    assert has_float({"a": [1, {"b": 1.5}]})
    assert not has_float({"a": [1, {"b": "1.5"}]})
    assert decimal_json({"a": Decimal("1.10"), "b": [Decimal("NaN")]}) == '{"a":1.10,"b":[NaN]}'
