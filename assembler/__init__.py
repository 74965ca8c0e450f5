"""Pure-Python core: CDC event codecs and the per-partition transaction assembler.

No Spark import anywhere in this package (DESIGN.md §4): ``app/`` adapts it to
``applyInPandasWithState``.
"""

from assembler.codecs import CodecSettings, DecodeError, Decoder, encode_event, make_decoder
from assembler.events import EVENT_SCHEMA_PATH, Event, EventType, Op, event_field_names
from assembler.exceptions import AssemblerError
from assembler.machine import AssemblyFailed, Step, TransactionAssembler
from assembler.output import KIND_REJECT, KIND_ROW, OUTPUT_FIELDS, OutputRow
from assembler.records import SourceRecord
from assembler.settings import AssemblerSettings, Policy, Violation
from assembler.state import STATE_FIELDS, PartitionState

__all__ = [
    "EVENT_SCHEMA_PATH",
    "KIND_REJECT",
    "KIND_ROW",
    "OUTPUT_FIELDS",
    "STATE_FIELDS",
    "AssemblerError",
    "AssemblerSettings",
    "AssemblyFailed",
    "CodecSettings",
    "DecodeError",
    "Decoder",
    "Event",
    "EventType",
    "Op",
    "OutputRow",
    "PartitionState",
    "Policy",
    "SourceRecord",
    "Step",
    "TransactionAssembler",
    "Violation",
    "encode_event",
    "event_field_names",
    "make_decoder",
]
