"""Fixtures shared by every tier; each lives in its own module under tests/fixtures/."""

import os

from hypothesis import HealthCheck, settings

# CI runs property tests after Spark and Kafka have loaded the 2-core machine: wall-clock
# limits there say nothing about the code (the sink's classify test failed `too_slow`).
settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# tests/real needs Docker and runs only through `make test-real` (which sets this).
collect_ignore = [] if os.environ.get("CDC_REAL_STACK") == "1" else ["real"]

pytest_plugins = [
    "tests.fixtures.spark",
    "tests.fixtures.kafka",
    "tests.fixtures.starrocks",
    "tests.fixtures.postgres",
]
