"""Exceptions used inside the emulator.

They never leave the emulator process as Python objects: the HTTP layer turns
:class:`ProtocolError` into the JSON body the real node would send, and the query port turns
:class:`SqlError` into a MySQL error packet.
"""

from __future__ import annotations


class EmulatorError(Exception):
    """Root of the emulator's own errors (bad CLI use, launcher failures)."""


class SqlError(EmulatorError):
    """A statement on the query port failed; ``code`` is the MySQL error number."""

    def __init__(self, message: str, code: int = 1064) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple[type[SqlError], tuple[str, int]]:
        return (type(self), (str(self), self.code))


class LaunchError(EmulatorError):
    """The emulator subprocess did not become ready."""
