"""Errors raised by the assembler core (``assembler/``).

Every error here must survive pickling (Spark ships executor exceptions to the driver), so each
class is reconstructible from ``self.args`` or defines ``__reduce__``.
"""

from __future__ import annotations

from common.errors import CdcError


class AssemblerError(CdcError):
    """Root of the errors of the assembler role."""
