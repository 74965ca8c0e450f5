"""The project's root exception and the transient/terminal mixins.

"May I retry?" is separated from "what failed?" (as dlt does): a concrete error subclasses
:class:`CdcError` (or a role's own subclass of it) for *what*, and mixes in
:class:`Transient` or :class:`Terminal` for *may I retry*. Callers that decide about retries
check ``isinstance(e, Transient)`` and nothing else.

Exceptions cross process boundaries (Spark executors to driver, pickled), so every subclass
must be reconstructible from ``self.args``: keep ``__init__(self, message: str)`` or define
``__reduce__``.
"""

from __future__ import annotations


class CdcError(Exception):
    """Root of every error this project raises on purpose."""


class Transient:
    """Mixin: the same operation may succeed if retried (after a backoff)."""


class Terminal:
    """Mixin: retrying cannot help; the message says what a person must do."""


class ConfigError(CdcError, Terminal):
    """A setting is missing or invalid; the message names the key."""
