"""Fixtures shared by every tier; each lives in its own module under tests/fixtures/."""

pytest_plugins = [
    "tests.fixtures.spark",
    "tests.fixtures.kafka",
    "tests.fixtures.starrocks",
]
