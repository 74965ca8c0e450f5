"""Fixtures shared by every tier; each lives in its own module under tests/fixtures/."""

import os

# tests/real needs Docker and runs only through `make test-real` (which sets this).
collect_ignore = [] if os.environ.get("CDC_REAL_STACK") == "1" else ["real"]

pytest_plugins = [
    "tests.fixtures.spark",
    "tests.fixtures.kafka",
    "tests.fixtures.starrocks",
    "tests.fixtures.postgres",
]
