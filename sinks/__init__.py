"""Sinks: where complete source transactions are written, one sink transaction per micro-batch.

This package knows sinks, not Kafka: rows arrive with plain ``topic``/``partition`` columns.
Only :mod:`app` imports ``pyspark`` at module level; sinks import it inside functions.
"""
