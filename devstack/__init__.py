"""Local stand-ins and launchers (Kafka, StarRocks emulator, PostgreSQL, Debezium).

Product code never imports this, and the wheel does not ship it (nor ``demo/``): both run from
a checkout. The processes they start (the emulator, the pipeline, Spark's Python workers with
crash points) import ``devstack``/``demo`` too, from whatever working directory they get, so the
checkout is put on ``PYTHONPATH`` once here and every child inherits it.
"""

import os
from pathlib import Path

_CHECKOUT = str(Path(__file__).resolve().parent.parent)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if _CHECKOUT not in _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([_CHECKOUT, *_paths])
