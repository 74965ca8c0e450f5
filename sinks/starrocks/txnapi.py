"""The two seams of the committer: the transaction API and the load job.

:class:`TxnApi` is the Stream Load transaction interface as the committer needs it; the
HTTP implementation is :class:`sinks.starrocks.httpapi.HttpTxnApi`, the unit tests use a
fake that keeps a dict of label -> state exactly as StarRocks does. :class:`LoadJob` sends a
batch's rows of every data table into open labels; the Spark adapter runs it on executors.

Every method raises :class:`sinks.starrocks.errors.StarRocksError` subclasses, as mapped by
:func:`sinks.starrocks.errors.classify` (the one place that reads server answers). After a
``Transient`` error the caller may *not* assume that nothing happened on the server.

Fault injection (chaos runs, crash tests) wraps these two objects from outside the product:
see ``devstack/starrocks/crashpoints.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sinks.starrocks.protocol import LoadState


class TxnApi(Protocol):
    """Stream Load transaction calls (driver side). ``table=None`` means multi-table mode."""

    def begin(self, label: str, table: str | None) -> None:
        """Begin ``label`` (multi-table: ``transaction_type: multi``, no table)."""

    def load(self, label: str, table: str, body: bytes, *, multi: bool) -> None:
        """Send one JSON-array body for ``table`` inside ``label``."""

    def prepare(self, label: str, table: str) -> None:
        """Pre-commit a single-table transaction (multi-table mode has no prepare)."""

    def commit(self, label: str, table: str | None) -> None:
        """Commit ``label``; an already committed label answers OK (spec §4.4)."""

    def rollback(self, label: str, table: str | None) -> None:
        """Roll ``label`` back; an already aborted label answers OK."""

    def cancel(self, label: str, table: str) -> None:
        """FE ``_cancel?label=`` for a single-table label whose BE context is gone."""

    def get_load_state(self, label: str) -> LoadState:
        """The FE transaction manager's status of ``label`` (UNKNOWN if not registered)."""


@dataclass(frozen=True)
class LoadFailure:
    """Why a load task stopped: the error class and its context survive the trip to the driver.

    Attributes:
        error_class: Class name of the :class:`StarRocksError` (e.g. ``FilteredRowsError``).
        message: Its message (names label, table, server status and what to do).
        transient: Whether it mixes in ``Transient`` (the batch may be retried).
        error_url: The server's ``ErrorURL`` / ``tracking_url`` for rejected rows, if any.
    """

    error_class: str
    message: str
    transient: bool
    error_url: str = ""


@dataclass(frozen=True)
class LoadReport:
    """What one load task did for one table (the typed commit message of a task)."""

    table: str
    rows: int = 0
    bytes: int = 0
    requests: int = 0
    failure: LoadFailure | None = None


#: ``load_job(labels, multi)``: load every data table's rows of the batch into
#: ``labels[table]`` and report per table. It must not raise for StarRocks or data problems
#: (it reports them); any exception it raises is treated as a failed Spark job (transient).
LoadJob = Callable[[Mapping[str, str], bool], Sequence[LoadReport]]

#: ``instrument(batch_id, api, load_job) -> (api, load_job)``: the entry point's hook to wrap
#: the two seams per batch (fault injection, tracing); the product itself never sets one.
Instrument = Callable[[int, TxnApi, LoadJob], tuple[TxnApi, LoadJob]]
