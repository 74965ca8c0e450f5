"""The chaos runner's double-commit check reads labels with the product's rule."""

from types import SimpleNamespace

import pytest

from devstack.chaos import _double_commits
from sinks.starrocks.labels import make_label

pytestmark = pytest.mark.unit

QID = "cccccccc-0000-0000-0000-000000000000"


def stack(labels):
    control = SimpleNamespace(labels=lambda: labels)
    return SimpleNamespace(emulator=SimpleNamespace(control=control))


def test_per_table_double_commit_is_seen():
    labels = {
        make_label("chaos", QID, 4, 0, "orders"): "VISIBLE",
        make_label("chaos", QID, 4, 1, "orders"): "VISIBLE",
        make_label("chaos", QID, 4, 0, "order_items"): "VISIBLE",
    }
    assert _double_commits(stack(labels)) == 1


def test_multi_table_double_commit_is_seen_and_aborted_attempts_are_not():
    labels = {
        make_label("chaos", QID, 4, 0): "ABORTED",
        make_label("chaos", QID, 4, 1): "VISIBLE",
        make_label("chaos", QID, 5, 0): "VISIBLE",
        make_label("chaos", QID, 5, 1): "COMMITTED",
    }
    assert _double_commits(stack(labels)) == 1
