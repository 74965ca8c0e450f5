"""Pieces shared by every role of the project (errors only; nothing with I/O)."""
