"""The real-stack tier (``make test-real``): Apache Kafka and StarRocks 4.x in Docker.

Without a reachable Docker engine the whole run stops with a non-zero exit and says why: it
never passes by skipping.
"""

from __future__ import annotations

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    try:
        import docker

        docker.from_env().ping()  # type: ignore[attr-defined]  # docker is untyped here
    except Exception as e:
        pytest.exit(
            f"make test-real needs a running Docker engine ({type(e).__name__}: {e}). "
            "Nothing was tested.",
            returncode=3,
        )
