"""The project's native module (``native/``, Rust: ``txncdc_native``), where it is installed.

It holds fast paths only: the assembler's scanner of well-formed JSON transactions, whole or
held open across calls (``assembler/fast.py``), the loader's row splice
(``sinks/starrocks/loader.py``) and the batch counter's count of ROW rows
(``app/batch_count.py``). Each stops where the Python code must decide, so results are the
same without it, only slower.
``make setup`` installs it (``pip install ./native``); ``CDC_ASSEMBLER_NATIVE=off`` in the
executors' environment leaves it out (A/B measurements, a suspected bug).
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

logger = logging.getLogger(__name__)

#: Set to ``off`` to run the Python code alone.
NATIVE_ENV = "CDC_ASSEMBLER_NATIVE"

_missing_logged = False


def native_module() -> ModuleType | None:
    """``txncdc_native``, or ``None`` when it is switched off or not installed (logged once)."""
    global _missing_logged  # one log line per process
    if os.environ.get(NATIVE_ENV, "").lower() in ("off", "0", "false"):
        return None
    try:
        import txncdc_native
    except ImportError:
        if not _missing_logged:
            _missing_logged = True
            logger.warning(
                "the native fast paths (txncdc_native) are not installed in this Python: the "
                "Python code does all the work, with the same results, slower; install them "
                "with `pip install ./native` (make setup does)"
            )
        return None
    return txncdc_native
