"""Types of the native module (src/lib.rs)."""

from collections.abc import Callable
from typing import Any

class JsonTxnScanner:
    def __init__(
        self,
        max_rows: int,
        max_bytes: int,
        targets: Callable[[str, str], str | None] | None,
        output_row: type[tuple[Any, ...]],
    ) -> None: ...
    def scan(
        self,
        records: list[Any],
        start: int,
        last_offset: int,
        txn_seq: int,
        topic: str,
        partition: int,
        out: list[Any],
        held: tuple[str, int, int | None, int | None, int, int, bytes] | None = None,
    ) -> tuple[int, int, int, tuple[str, int, int | None, int | None, int, int, bytes] | None]: ...

def encode_row(op: int, row: str) -> bytes | None: ...
def encode_run(
    rows: list[Any], start: int, size: int, has_parts: bool, max_bytes: int
) -> tuple[int, bytes, int]: ...
