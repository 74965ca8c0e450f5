"""Benchmarks: numbers and ratios measured side by side, never a gate (docs/benchmarks.md)."""
