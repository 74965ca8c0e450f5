"""The checked-in list of Kafka consumer settings is the connector's kafka-clients' own."""

from __future__ import annotations

import pytest

from devstack.kafka.client_configs import MODULE, client_version, consumer_config_names, render

pytestmark = pytest.mark.integration


def test_the_list_matches_consumer_config_of_the_resolved_jar() -> None:
    # Fails after a connector upgrade until `python -m devstack.kafka.client_configs` is run.
    names = consumer_config_names()
    assert "security.protocol" in names
    assert "bootstrap.servers" in names
    assert MODULE.read_text() == render(names, client_version())
