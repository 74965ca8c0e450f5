"""Which source transactions hold rows StarRocks filters (``sink.filtered-rows: dead-letter``).

With ``strict_mode`` a row StarRocks cannot load (NULL into NOT NULL, a value that does not
convert, an overflow) fails the whole batch's commit, and a replay fails the same way: one bad
row would stop the pipeline for good. Under the dead-letter policy the sink instead bisects the
batch's source transactions in *probe* transactions and commits the batch again with the
transactions found as dead letters, under the batch's own labels as always, so exactly-once
holds whatever the probes did.

A probe is a set of single-table labels (StarRocks checks filtered rows at ``prepare``, and a
multi-table transaction only at ``commit``): begin, load the subset's rows, prepare, and roll
back in every case. A probe is never committed. Probe labels are numbered per batch, so a run
after a crash meets the labels of its crashed probes at ``begin`` and rolls them back (a
prepared one would otherwise hold its transaction until the server's prepared timeout). No
Spark and no HTTP here: the caller gives the load as a function.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from sinks.exceptions import SinkTerminalError
from sinks.starrocks.batch import load_error
from sinks.starrocks.errors import FilteredRowsError, LabelAlreadyExistsError
from sinks.starrocks.retry import RetryPolicy
from sinks.starrocks.steps import Steps
from sinks.starrocks.txnapi import LoadReport, TxnApi

logger = logging.getLogger(__name__)

U = TypeVar("U")

#: ``probe(units)``: the filtered-rows failure of loading just ``units``, or None if they load.
Probe = Callable[[Sequence[U]], "str | None"]


class TooManyFilteredError(SinkTerminalError):
    """More source transactions of one batch have filtered rows than the policy isolates."""


class FailureNotReproducedError(SinkTerminalError):
    """A batch's filtered rows are in none of its source transactions, as far as probes see."""


class ProbeLabelUsedError(Exception):
    """A probe label was begun before, by a run that crashed; it is rolled back now."""


def find_filtered(
    units: Sequence[U], failure: str, probe: Probe[U], max_bad: int
) -> tuple[list[tuple[U, str]], int]:
    """Bisect ``units`` (which failed together with ``failure``) down to the failing ones.

    Rows are filtered one by one (strict mode), so when a failing range's left half loads,
    its right half fails without a probe. ``k`` bad units among ``n`` cost at most about
    ``k * (log2(n) + 1)`` probes. That inference is only as good as the failure's
    reproducing in probes (a row outside ``units``, such as a dead letter's, or a failure
    that came and went, does not): so a unit is named only once a probe saw it fail, alone
    or as the left half it was. One that loads alone is not bad, whatever was inferred.

    Returns:
        The failing units with the failure that names them, in ``units`` order, and the
        number of probes run.

    Raises:
        TooManyFilteredError: More than ``max_bad`` units fail (a schema mismatch rather
            than a few bad rows: the batch fails as it did without the policy).
        FailureNotReproducedError: No unit fails in a probe (the batch then fails as it did).
    """
    bad: list[tuple[U, str]] = []
    probes = 0
    # Ranges seen (True) or inferred (False) to fail, with their failure; popped left first.
    # The batch's failure is inferred for ``units``: the batch had rows besides theirs.
    todo: list[tuple[Sequence[U], str, bool]] = [(units, failure, False)]
    while todo:
        part, why, seen = todo.pop()
        if len(part) == 1:
            if not seen:
                checked = probe(part)
                probes += 1
                if checked is None:
                    continue
                why = checked
            bad.append((part[0], why))
            if len(bad) > max_bad:
                msg = (
                    f"more than {max_bad} source transactions of the batch have rows StarRocks "
                    f"filters (last: {why}); that looks like a schema mismatch, not a few bad "
                    "rows: fix the table or the data, or raise "
                    "sink.filtered-rows.max-transactions"
                )
                raise TooManyFilteredError(msg)
            continue
        mid = len(part) // 2
        left, right = part[:mid], part[mid:]
        left_why = probe(left)
        probes += 1
        if left_why is None:
            todo.append((right, why, False))
            continue
        right_why = probe(right)
        probes += 1
        if right_why is not None:
            todo.append((right, right_why, True))
        todo.append((left, left_why, True))
    if not bad:
        msg = (
            f"the batch failed with rows StarRocks filters ({failure}), but none of its "
            f"{len(units)} source transactions fails in a probe: the filtered rows are not a "
            "source transaction's (a dead letter's own row, say) or the failure did not happen "
            "again. Nothing was committed; see the rejected rows StarRocks names, fix the "
            "table or the data, and start again (the batch is replayed)"
        )
        raise FailureNotReproducedError(msg)
    return bad, probes


def probe_load(
    api: TxnApi,
    policy: RetryPolicy,
    labels: Mapping[str, str],
    load: Callable[[Mapping[str, str]], Sequence[LoadReport]],
) -> str | None:
    """Load into fresh single-table ``labels`` (table -> label), prepare, always roll back.

    Returns:
        The filtered-rows failure (message and error URL), or None when every table prepared.

    Raises:
        ProbeLabelUsedError: A label was used by a crashed run (now rolled back): probe again
            under the next number.
        StarRocksError: Any other failure (the batch then fails as it would have).
    """
    steps = Steps(api, lambda _labels, _multi: (), policy)
    begun: list[tuple[str, str]] = []
    try:
        for table, label in sorted(labels.items()):
            try:
                api.begin(label, table)
            except LabelAlreadyExistsError as e:
                # Only this batch's probes use these labels, and none is ever committed: roll
                # back every label of the crashed probe not begun here (those are, below).
                for other_table, other in sorted(labels.items()):
                    if (other_table, other) not in begun:
                        steps.rollback(other, other_table)
                raise ProbeLabelUsedError(label) from e
            begun.append((table, label))
        for report in load(labels):
            if report.failure is None:
                continue
            error = load_error(report.failure, labels.get(report.table, "?"), report.table)
            if isinstance(error, FilteredRowsError):
                return why_filtered(error)
            raise error
        for table, label in begun:
            try:
                api.prepare(label, table)
            except FilteredRowsError as e:
                return why_filtered(e)
        return None
    finally:
        for table, label in begun:
            try:
                steps.rollback(label, table)
            except Exception as e:
                logger.warning("starrocks probe rollback failed label=%s error=%s", label, e)


def why_filtered(error: FilteredRowsError) -> str:
    """The failure's message with the URL of the rows StarRocks rejected, if it gave one."""
    url = error.context.get("error_url")
    if not url or url in error.message:
        return error.message
    return f"{error.message} (rejected rows: {url})"
