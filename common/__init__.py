"""Pieces shared by every role of the project (errors, options, exact JSON text; no I/O)."""
