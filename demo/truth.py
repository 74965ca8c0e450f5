"""The ground-truth file: the final state a correct sink ends in, plus what was generated.

Format (JSON, one object)::

    {"format": "txn-cdc-demo-truth/1", "database": "demo", "topic": "...", "partitions": 4,
     "seed": 7, "encoding": "json",
     "counts": {"transactions": ..., "events": ..., "txns_by_kind": {...},
                "data_events": {"orders": {"UPSERT": n, "DELETE": m}, ...},
                "rows": {"orders": n, "order_items": m}},
     "tables": {"orders": [row, ...], "order_items": [row, ...]},
     "dead_letters": {"expected": {"<kind>": {"transactions": n, "records": m}, ...},
                      "max_txn_rows": null,
                      "transactions": [{"kind", "txn_id", "topic", "partition",
                                        "first_offset", "records", "sent_records"}, ...]}}

``dead_letters`` (absent in files of older generators) describes the bad source transactions
injected with ``--bad-input``: the pipeline must dead-letter exactly these, each as a group of
``records`` rows with the same ``(topic, partition, first_offset)``, with a reason naming the
kind. An empty list means that nothing of this run may be dead-lettered.

Decimals are written as strings (exact, and readable by any JSON tool); readers convert them
with :func:`demo.model.to_decimal`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from demo.errors import TruthFileError
from demo.model import TABLES, Row

FORMAT: Final = "txn-cdc-demo-truth/1"


@dataclass(frozen=True)
class GroundTruth:
    """Final rows per table, the generation counts and the expected dead letters."""

    database: str
    tables: Mapping[str, list[Row]]
    counts: Mapping[str, Any]
    meta: Mapping[str, Any]
    dead_letters: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (decimals as strings)."""
        extra = {} if self.dead_letters is None else {"dead_letters": self.dead_letters}
        return {
            "format": FORMAT,
            "database": self.database,
            **self.meta,
            "counts": self.counts,
            "tables": {
                t: [{k: _plain(v) for k, v in row.items()} for row in rows]
                for t, rows in self.tables.items()
            },
            **extra,
        }

    def write(self, path: Path) -> None:
        """Write atomically (temp file + rename): a reader never sees half a file."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n")
        os.replace(tmp, path)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroundTruth:
        """Parse the JSON form; raise :class:`TruthFileError` on an unknown format."""
        if data.get("format") != FORMAT:
            msg = f"not a ground-truth file of format {FORMAT!r}: format={data.get('format')!r}"
            raise TruthFileError(msg)
        tables = data.get("tables")
        if not isinstance(tables, dict) or set(tables) != set(TABLES):
            msg = f"ground truth must list the tables {list(TABLES)}"
            raise TruthFileError(msg)
        meta = {
            k: v
            for k, v in data.items()
            if k not in {"format", "database", "counts", "tables", "dead_letters"}
        }
        dead_letters = data.get("dead_letters")
        if dead_letters is not None and not isinstance(dead_letters, dict):
            msg = "ground truth: dead_letters must be an object"
            raise TruthFileError(msg)
        return cls(
            database=str(data.get("database", "demo")),
            tables={t: list(rows) for t, rows in tables.items()},
            counts=dict(data.get("counts", {})),
            meta=meta,
            dead_letters=dead_letters,
        )

    @classmethod
    def read(cls, path: Path) -> GroundTruth:
        """Read a ground-truth file written by the generator."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            msg = f"cannot read ground truth {path}: {e}"
            raise TruthFileError(msg) from e
        if not isinstance(data, dict):
            msg = f"ground truth {path} is not a JSON object"
            raise TruthFileError(msg)
        return cls.from_dict(data)


def _plain(value: object) -> object:
    return str(value) if isinstance(value, Decimal) else value
