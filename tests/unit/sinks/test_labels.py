import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sinks.starrocks.errors import LabelError
from sinks.starrocks.labels import MAX_LABEL_LENGTH, make_label

pytestmark = pytest.mark.unit

QID = "0c8f6d1e-3b5a-4f57-9a43-2c1d7e9b6a10"


def test_multi_table_label_format():
    assert make_label("cdc", QID, 7, 0) == f"cdc-{QID}-7-0"


def test_per_table_label_appends_table():
    assert make_label("cdc", QID, 7, 2, "order_items") == f"cdc-{QID}-7-2-order_items"


def test_attempts_and_batches_give_distinct_labels():
    labels = {make_label("cdc", QID, b, a) for b in range(20) for a in range(5)}
    assert len(labels) == 100


def test_fresh_query_id_never_collides_with_old_labels():
    assert make_label("cdc", QID, 0, 0) != make_label("cdc", QID.replace("0", "1"), 0, 0)


@pytest.mark.parametrize(
    ("prefix", "qid", "table"),
    [("cdc!", QID, None), ("cdc", "q id", None), ("cdc", QID, "t.x"), ("", QID, None)],
)
def test_characters_outside_label_rule_are_rejected(prefix, qid, table):
    with pytest.raises(LabelError, match=r"A-Za-z0-9_-"):
        make_label(prefix, qid, 1, 0, table)


def test_too_long_label_is_rejected_with_advice():
    with pytest.raises(LabelError, match=r"shorten sink\.label-prefix"):
        make_label("p" * 32, QID, 10**12, 999, "t" * 64)


def test_negative_numbers_are_rejected():
    with pytest.raises(LabelError):
        make_label("cdc", QID, -1, 0)
    with pytest.raises(LabelError):
        make_label("cdc", QID, 0, -1)


@given(
    prefix=st.from_regex(r"[A-Za-z0-9_]{1,32}", fullmatch=True),
    batch_id=st.integers(min_value=0, max_value=10**15),
    attempt=st.integers(min_value=0, max_value=10**4),
    table=st.one_of(st.none(), st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True)),
)
def test_every_produced_label_satisfies_the_starrocks_rule(prefix, batch_id, attempt, table):
    label = make_label(prefix, QID, batch_id, attempt, table)
    assert len(label) <= MAX_LABEL_LENGTH
    assert re.fullmatch(r"[A-Za-z0-9_-]+", label)
    assert label.startswith(f"{prefix}-{QID}-{batch_id}-{attempt}")


@pytest.mark.parametrize("table", [None, "orders", "_cdc_progress", "t2"])
@pytest.mark.parametrize("prefix", ["cdc", "my-pipe"])
def test_parse_label_inverts_make_label_including_per_table_labels(prefix, table):
    from sinks.starrocks.labels import LabelParts, make_label, parse_label

    qid = "cccccccc-0000-0000-0000-000000000000"
    label = make_label(prefix, qid, 12, 3, table)
    assert parse_label(label, prefix) == LabelParts(prefix, qid, 12, 3, table)


def test_parse_label_refuses_foreign_labels():
    from sinks.starrocks.labels import parse_label

    assert parse_label("other-q-1-0", "cdc") is None
    assert parse_label("cdc-q-x-0", "cdc") is None
    assert parse_label("cdc-1-0", "cdc") is None
