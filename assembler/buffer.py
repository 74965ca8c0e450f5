"""Compact encoding of the buffered DATA events of the open transaction.

The open transaction is the only memory the assembler holds per partition, and it lives in one
BINARY state field (DESIGN.md §7: ARRAY/MAP state fields crash the worker). Each DATA event is
a fixed 17-byte header followed by UTF-8 bytes::

    offset:int64  op:uint8  len(database):uint16  len(table):uint16  len(row):uint32
    database  table  row

Records are appended, so a transaction that spans micro-batches costs one concatenation per
call, never a re-encode of what is already buffered.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from assembler.events import Op

_HEADER = struct.Struct(">qBHHI")
HEADER_SIZE: int = _HEADER.size

OP_CODES: dict[str | None, int] = {None: 0, Op.UPSERT.value: 0, Op.DELETE.value: 1}
"""Op string (``None`` = default UPSERT) to its one-byte code."""
OP_NAMES: tuple[str, str] = (Op.UPSERT.value, Op.DELETE.value)
"""Op code to op string (the default is written out as UPSERT)."""

Buffered = tuple[int, int, str, str, str]
"""One buffered DATA event: (offset, op code, database, table, row)."""


def utf8_len(text: str) -> int:
    """Encoded length of ``text``; ``isascii`` is O(1) in CPython so ASCII costs nothing."""
    return len(text) if text.isascii() else len(text.encode())


def buffered_size(database: str, table: str, row: str) -> int:
    """Bytes one DATA event occupies in the buffer (what ``max-txn-bytes`` counts)."""
    return HEADER_SIZE + utf8_len(database) + utf8_len(table) + utf8_len(row)


def encode(items: Iterable[Buffered]) -> bytes:
    """Encode buffered events; encodings concatenate (appending never re-encodes)."""
    parts: list[bytes] = []
    pack = _HEADER.pack
    for offset, op_code, database, table, row in items:
        db_b = database.encode()
        tb_b = table.encode()
        row_b = row.encode()
        parts.append(pack(offset, op_code, len(db_b), len(tb_b), len(row_b)))
        parts.append(db_b)
        parts.append(tb_b)
        parts.append(row_b)
    return b"".join(parts)


def decode(buf: bytes) -> list[Buffered]:
    """Decode a buffer written by :func:`encode`.

    Raises:
        ValueError: the buffer is corrupt (truncated); callers turn this into a terminal error.
    """
    out: list[Buffered] = []
    pos = 0
    end = len(buf)
    unpack = _HEADER.unpack_from
    view = memoryview(buf)
    try:
        while pos < end:
            offset, op_code, ld, lt, lr = unpack(buf, pos)
            pos += HEADER_SIZE
            database = str(view[pos : pos + ld], "utf-8")
            pos += ld
            table = str(view[pos : pos + lt], "utf-8")
            pos += lt
            if pos + lr > end:
                msg = f"buffer truncated at byte {pos}"
                raise ValueError(msg)
            row = str(view[pos : pos + lr], "utf-8")
            pos += lr
            out.append((offset, op_code, database, table, row))
    except struct.error as e:
        msg = f"buffer truncated at byte {pos}"
        raise ValueError(msg) from e
    return out
