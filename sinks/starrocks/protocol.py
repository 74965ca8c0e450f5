"""Names and value types of the Stream Load transaction protocol (reference spec §2-§4)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class TxnOp(enum.StrEnum):
    """Operations of ``/api/transaction/{op}`` plus the label-state query."""

    BEGIN = "begin"
    LOAD = "load"
    PREPARE = "prepare"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    GET_LOAD_STATE = "get_load_state"


class LoadState(enum.StrEnum):
    """FE transaction status of a label (``GET /api/{db}/get_load_state``, spec §2.5/§4.1)."""

    UNKNOWN = "UNKNOWN"
    PREPARE = "PREPARE"
    PREPARED = "PREPARED"
    COMMITTED = "COMMITTED"
    VISIBLE = "VISIBLE"
    ABORTED = "ABORTED"

    @property
    def is_committed(self) -> bool:
        """COMMITTED or VISIBLE: the data is (or will become, after publish) visible."""
        return self in (LoadState.COMMITTED, LoadState.VISIBLE)

    @classmethod
    def parse(cls, text: str) -> LoadState:
        """Map the server's ``state`` string; anything unrecognised is UNKNOWN."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class TxnResponse:
    """A successful response: status and message plus the raw JSON fields."""

    op: TxnOp
    status: str
    message: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        """Field by name, case-insensitively (FE, BE and RestBaseResult differ in case)."""
        if key in self.fields:
            return self.fields[key]
        lowered = key.lower()
        for name, value in self.fields.items():
            if name.lower() == lowered:
                return value
        return None

    @property
    def state(self) -> LoadState:
        """``state`` of a get_load_state answer (UNKNOWN if absent)."""
        value = self.get("state")
        return LoadState.parse(str(value)) if value is not None else LoadState.UNKNOWN
