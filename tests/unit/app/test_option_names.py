"""Every setting a message of the product (app, assembler, common, sinks) names is one the
config accepts: advice must never send a user to a key that ``--check-config`` then refuses."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import DEFAULTS
from assembler.settings import OPTION_KEYS
from sinks.starrocks import config as sink_config

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SETTING = re.compile(
    r"(?<![\w.-])((?:pipeline|source|assembler|dead-letter|starrocks|sink)\.[a-z][a-z0-9.-]*[a-z0-9])"
)
# Dotted names in messages that are not settings.
NOT_SETTINGS = {
    "assembler.schema": "the package holding events.avsc",
    "source.schema": "a Debezium event's field",
    "source.table": "a Debezium event's field",
}


def strings(path: Path) -> Iterator[str]:
    """String constants of a module, docstrings excluded (they name modules and fields)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.value


def named_settings(*folders: str) -> dict[str, str]:
    """Setting-like names in the string constants under ``folders`` -> the file naming them."""
    found: dict[str, str] = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for text in strings(path):
                for name in SETTING.findall(text):
                    found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def sink_accepts(key: str) -> bool:
    return key in sink_config._KNOWN or key.split(".")[:2] == ["sink", "properties"]


def app_accepts(name: str) -> bool:
    """Whether ``name`` is a key of the app config (a map section takes any key under it)."""
    section, _, rest = name.partition(".")
    if section == "sink":
        return sink_accepts(name)
    if section == "starrocks":
        return rest in DEFAULTS["starrocks"] or sink_accepts(rest)
    if section == "assembler":
        return rest in OPTION_KEYS
    node = DEFAULTS[section]
    for part in rest.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
        if isinstance(node, dict) and not node:
            return True  # a map passed through (source.options, source.debezium, spark.conf)
    return True


def test_the_extraction_finds_names() -> None:
    found = named_settings("app")
    assert "source.on-lost-checkpoint" in found, sorted(found)


def test_every_setting_a_message_names_is_accepted() -> None:
    found = named_settings("app", "assembler", "common", "sinks")
    wrong = {
        name: where
        for name, where in found.items()
        if name not in NOT_SETTINGS and not app_accepts(name)
    }
    assert not wrong, wrong


def test_the_checker_refuses_what_the_config_refuses() -> None:
    assert not app_accepts("source.starting-offset")
    assert not app_accepts("starrocks.sink.filtered-row")
    assert not app_accepts("assembler.max-txn-byte")
    assert not app_accepts("sink.allow-filtered")
    assert app_accepts("source.options.kafka.security.protocol")
