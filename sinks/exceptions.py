"""Errors raised by sinks.

Every sink error is a :class:`SinkError` (itself a :class:`common.errors.CdcError`) and mixes
in exactly one of :class:`common.errors.Transient` ("retrying may help") or
:class:`common.errors.Terminal` ("a person must act"). Callers decide about retries with
``isinstance(e, Transient)`` only.

Exceptions cross process boundaries (raised on Spark executors, pickled to the driver), so
each class is reconstructible: extra attributes travel through ``__reduce__``.
"""

from __future__ import annotations

from typing import Any

from common.errors import CdcError, Terminal, Transient


class SinkError(CdcError):
    """Root of every sink error; the message names label, table and what to do.

    Args:
        message: Human-readable text; must never contain a password or credentials.
        **context: Machine-readable fields (label, table, op, status ...), kept as
            attributes and preserved across pickling.
    """

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, Any] = dict(context)

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle as cls(*args) by default, which would drop ``context``.
        return (_rebuild, (type(self), self.message, self.context))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[SinkError], message: str, context: dict[str, Any]) -> SinkError:
    """Recreate a pickled :class:`SinkError` without calling a subclass ``__init__``."""
    err = cls.__new__(cls)
    SinkError.__init__(err, message, **context)
    return err


class SinkTransientError(SinkError, Transient):
    """The operation (or the whole batch under a new attempt) may succeed if retried."""


class SinkTerminalError(SinkError, Terminal):
    """Retrying cannot help: configuration, data or permissions must change first."""


class TransactionStateError(SinkTerminalError):
    """A sink transaction method was called in a state that does not allow it (a bug)."""


class SinkStoppedError(SinkTerminalError):
    """The query is stopping and interrupted the batch: rolled back, not retried here.

    Terminal for the committer only (a retry would race the stop); the next start replays
    the batch from the checkpoint as after any stop.
    """
