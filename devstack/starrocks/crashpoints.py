"""Crash points of the StarRocks sink, injected from outside the product.

The sink accepts an ``instrument(batch_id, api, load_job)`` hook (see
:data:`sinks.starrocks.txnapi.Instrument`); this module builds hooks that call
``hook(point)`` at named points of the protocol, so a test (raise a ``BaseException``) or the
chaos runner (kill -9 the driver) can crash there. The product never names a crash point.

Points, by the call they surround:

* ``after_begin``: after a ``begin`` answered OK (per-table: the progress table's, the last);
* ``after_load_job``: after the executors' load job returned;
* ``after_load``: after the progress rows were loaded (the last load before prepare/commit);
* ``after_prepare``: per-table, after the progress table's (last) prepare;
* ``before_commit``: before every ``commit`` call;
* ``after_first_commit``: after the first ``commit`` of the batch answered OK;
* ``after_commit``: after the last ``commit`` answered OK (multi-table: the only one);
* ``during_recovery``: before every ``rollback`` call.

``python`` entry point for the app (``CDC_SINK_INSTRUMENT``): :func:`from_env`, configured by
``CDC_CRASH_AT=POINT[@BATCH]`` and ``CDC_CRASH_MARKER=<file>``.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence

from sinks.starrocks.protocol import LoadState
from sinks.starrocks.txnapi import Instrument, LoadJob, LoadReport, TxnApi

log = logging.getLogger(__name__)

POINTS = (
    "after_begin",
    "after_load_job",
    "after_load",
    "after_prepare",
    "before_commit",
    "after_first_commit",
    "after_commit",
    "during_recovery",
)
CRASH_AT_ENV = "CDC_CRASH_AT"
CRASH_MARKER_ENV = "CDC_CRASH_MARKER"


class PointedApi:
    """A ``TxnApi`` that calls ``hook(point)`` around the calls it wraps."""

    def __init__(self, inner: TxnApi, hook: Callable[[str], None], progress_table: str) -> None:
        self._inner = inner
        self._hook = hook
        self._progress = progress_table
        self._commits = 0

    def begin(self, label: str, table: str | None) -> None:
        """Begin; ``after_begin`` once the multi-table or the last per-table begin is OK."""
        self._inner.begin(label, table)
        if table is None or table == self._progress:
            self._hook("after_begin")

    def load(self, label: str, table: str, body: bytes, *, multi: bool) -> None:
        """Load; ``after_load`` after the progress rows."""
        self._inner.load(label, table, body, multi=multi)
        if table == self._progress:
            self._hook("after_load")

    def prepare(self, label: str, table: str) -> None:
        """Prepare; ``after_prepare`` after the progress table's."""
        self._inner.prepare(label, table)
        if table == self._progress:
            self._hook("after_prepare")

    def commit(self, label: str, table: str | None) -> None:
        """Commit, between ``before_commit`` and ``after_first_commit`` / ``after_commit``."""
        self._hook("before_commit")
        self._inner.commit(label, table)
        self._commits += 1
        if self._commits == 1:
            self._hook("after_first_commit")
        if table is None or table == self._progress:
            self._hook("after_commit")

    def rollback(self, label: str, table: str | None) -> None:
        """Rollback, after ``during_recovery``."""
        self._hook("during_recovery")
        self._inner.rollback(label, table)

    def cancel(self, label: str, table: str) -> None:
        """FE cancel, unchanged."""
        self._inner.cancel(label, table)

    def get_load_state(self, label: str) -> LoadState:
        """Label state, unchanged."""
        return self._inner.get_load_state(label)


def pointed_load_job(job: LoadJob, hook: Callable[[str], None]) -> LoadJob:
    """The load job, then ``after_load_job``."""

    def run(labels: Mapping[str, str], multi: bool) -> Sequence[LoadReport]:
        reports = job(labels, multi)
        hook("after_load_job")
        return reports

    return run


def point_instrument(
    hook: Callable[[int, str], None], progress_table: str = "_cdc_progress"
) -> Instrument:
    """An ``Instrument`` calling ``hook(batch_id, point)`` at every point of :data:`POINTS`."""

    def instrument(batch_id: int, api: TxnApi, job: LoadJob) -> tuple[TxnApi, LoadJob]:
        def at(point: str) -> None:
            hook(batch_id, point)

        return PointedApi(api, at, progress_table), pointed_load_job(job, at)

    return instrument


def kill_driver_at(point: str, from_batch: int, marker: str = "") -> Instrument:
    """Kill -9 the driver (its JVM parent included) at ``point`` of a batch >= ``from_batch``.

    ``marker``: a file that gets "point batch" appended and fsynced before the kill (the
    driver's last log lines can die with the JVM; this record does not).
    """

    def hook(batch_id: int, name: str) -> None:
        if name != point or batch_id < from_batch:
            return
        log.warning("crash point: killing the driver point=%s batch_id=%s", name, batch_id)
        logging.shutdown()
        if marker:
            _append_synced(marker, f"{name} {batch_id}\n")
        # spark-submit's JVM is our parent: take it down too, with no cleanup anywhere.
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(137)

    return point_instrument(hook)


def parse_crash_at(text: str) -> tuple[str, int]:
    """``POINT[@BATCH]`` -> (point, first batch).

    Raises:
        ValueError: unknown point or a non-numeric batch.
    """
    point, _, batch = text.strip().partition("@")
    if point not in POINTS or (batch and not batch.isdigit()):
        msg = f"crash point {text!r}: expected POINT[@BATCH], POINT one of {', '.join(POINTS)}"
        raise ValueError(msg)
    return point, int(batch or 0)


def from_env() -> Instrument:
    """The app's hook factory (``CDC_SINK_INSTRUMENT=devstack.starrocks.crashpoints:from_env``)."""
    point, from_batch = parse_crash_at(os.environ.get(CRASH_AT_ENV, ""))
    return kill_driver_at(point, from_batch, os.environ.get(CRASH_MARKER_ENV, ""))


def _append_synced(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
