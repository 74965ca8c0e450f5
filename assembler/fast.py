"""The state machine's native fast path (``txncdc_native.JsonTxnScanner``), where it applies.

The scanner takes the well-formed transactions of a JSON partition that the machine would
emit (or hold open) unchanged, without a Python object per record: whole ones, one still open
at the end of a call's records, and one the state holds open from an earlier call. The
machine handles everything else, from the first transaction the scanner leaves to it
(``common/native.py``). ``tests/unit/assembler/test_fast_path.py`` checks that both give the
same results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from assembler.codecs import Decoder, JsonDecoder, event_schema_plan
from assembler.output import OutputRow
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings
from common.native import native_module

#: A transaction held open, as the scanner takes and returns it: ``(txn_id, first_offset,
#: begin_ts_ms, last_ts_ms, rows, bytes, buffer)``, the state's fields of that name with the
#: whole buffer (``assembler.buffer``) and nothing pending outside it.
Held = tuple[str, int, int | None, int | None, int, int, bytes]


class Scan(Protocol):
    """``JsonTxnScanner.scan``: the transactions of ``records[start:]`` it can take.

    ``held``: the transaction the state holds open, which the records continue; ``None``
    when the partition is idle. Returns ``(next, last_offset, txn_seq, held)``: the rows of
    the transactions taken are appended to ``out``, and ``held`` is the one left open at the
    end of the records (``None``: idle). When ``next`` is ``start`` nothing was taken and the
    state stands as it was.
    """

    def __call__(
        self,
        records: list[SourceRecord],
        start: int,
        last_offset: int,
        txn_seq: int,
        topic: str,
        partition: int,
        out: list[OutputRow],
        held: Held | None = None,
    ) -> tuple[int, int, int, Held | None]:
        """Scan from ``records[start]``; see the class docstring."""
        ...


def native_scan(settings: AssemblerSettings, decoder: Decoder) -> Scan | None:
    """The native scanner for ``decoder``, or ``None`` where only the machine applies.

    It applies to the JSON codec with the event schema (``conf/events.avsc``) outside the
    Maxwell envelope.
    """
    if not isinstance(decoder, JsonDecoder) or settings.codec.encoding != "json":
        return None
    if decoder.plan != event_schema_plan():
        return None
    native = native_module()
    if native is None:
        return None
    targets = settings.targets
    problem: Callable[[str, str], str | None] | None = (
        targets.problem if targets is not None else None
    )
    scanner = native.JsonTxnScanner(
        settings.max_txn_rows, settings.max_txn_bytes, problem, OutputRow
    )
    scan: Scan = scanner.scan
    return scan
