"""With a real password: auth survives the FE->BE 307, and the password is never logged."""

import base64
import logging

import pytest

from devstack.starrocks.launcher import start_emulator
from sinks.starrocks.errors import AuthError

from .conftest import batch, create_schema, make_sink, order_txn, table_rows

pytestmark = pytest.mark.integration

PASSWORD = "pw-Secret-42"


@pytest.fixture
def sr_with_password(tmp_path):
    proc = start_emulator(tmp_path / "sr", password=PASSWORD, stderr_path=tmp_path / "sr.log")
    try:
        create_schema(proc.handle)
        yield proc.handle
    finally:
        proc.stop()


def test_password_protected_server_and_no_secret_in_logs(sr_with_password, spark, caplog):
    caplog.set_level(logging.DEBUG)
    sr = sr_with_password
    for multi in ("true", "false"):
        sink = make_sink(sr, **{"sink.transaction.multi-table.enabled": multi})
        sink.open()
        result = sink.write_batch(batch(spark, order_txn(1)), 0)
        assert result.outcome == "committed"
        assert "pw-Secret" not in repr(sink.config)
    assert table_rows(sr, "orders") == [(1, 2, 32, 1)]
    token = base64.b64encode(f"{sr.user}:{PASSWORD}".encode()).decode()
    assert PASSWORD not in caplog.text
    assert token not in caplog.text


def test_wrong_password_fails_open_without_leaking_it(sr_with_password):
    with pytest.raises(AuthError) as info:
        make_sink(sr_with_password, password="guess-123").open()
    assert "guess-123" not in str(info.value)
    assert PASSWORD not in str(info.value)
