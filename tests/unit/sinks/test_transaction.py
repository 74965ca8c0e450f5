import pytest

from sinks.exceptions import TransactionStateError
from sinks.starrocks.transaction import SinkTransaction, TxnStatus

pytestmark = pytest.mark.unit


def test_happy_lifecycle():
    txn = SinkTransaction("l-1")
    txn.mark_open()
    txn.mark_loaded({"orders"})
    txn.mark_committing()
    txn.mark_committed()
    assert txn.status is TxnStatus.COMMITTED
    assert txn.finished
    assert txn.loaded_tables == {"orders"}


def test_commit_before_load_fails_naming_label_and_state():
    txn = SinkTransaction("cdc-q-1-0")
    txn.mark_open()
    with pytest.raises(TransactionStateError, match=r"label=cdc-q-1-0 in state OPEN"):
        txn.mark_committing()


def test_load_before_begin_fails():
    with pytest.raises(TransactionStateError, match="state NEW"):
        SinkTransaction("l").mark_loaded()


def test_committed_transaction_cannot_be_aborted():
    txn = SinkTransaction("l", status=TxnStatus.COMMITTING)
    txn.mark_committed()
    with pytest.raises(TransactionStateError, match="COMMITTED"):
        txn.mark_aborted()


def test_double_begin_fails():
    txn = SinkTransaction("l")
    txn.mark_open()
    with pytest.raises(TransactionStateError):
        txn.mark_open()


def test_per_table_prepare_path_and_abort_from_prepared():
    txn = SinkTransaction("l", table="orders")
    txn.mark_open()
    txn.mark_loaded({"orders"})
    txn.mark_prepared()
    txn.mark_aborted()
    assert txn.status is TxnStatus.ABORTED


def test_state_error_is_terminal_and_names_label():
    from common.errors import Terminal

    txn = SinkTransaction("abc")
    with pytest.raises(TransactionStateError) as info:
        txn.mark_committing()
    assert isinstance(info.value, Terminal)
    assert info.value.context["label"] == "abc"
