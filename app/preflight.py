"""Checks that run before Spark starts, so a wrong address fails in seconds with one line.

Without them an unreachable broker surfaced minutes later, deep in Spark's log (the Kafka
connector retries metadata for a long time); StarRocks is checked by the sink's own ``open()``,
which ``main`` now also calls before the SparkSession starts.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from app.config import SourceSettings
from common.errors import CdcError, Terminal

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)

# librdkafka names the property it refuses in double quotes ("No such configuration property:
# "x"", "Invalid value ... for configuration property "x"").
_PROPERTY = re.compile(r'property:? "([^"]+)"')


class PreflightError(CdcError, Terminal):
    """A dependency the pipeline needs does not answer, or answers no."""


def check_kafka(source: SourceSettings, timeout_s: float = 15.0) -> None:
    """The brokers answer a metadata request; warn about topics that do not exist yet.

    Raises:
        PreflightError: no answer within ``timeout_s``, naming the setting to fix.
    """
    from confluent_kafka import KafkaException

    admin = _admin(source)
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as e:
        msg = (
            f"Kafka at source.bootstrap-servers={source.bootstrap_servers} did not answer in "
            f"{timeout_s:.0f} s ({_reason(e)}): check the address and port, "
            "and source.options.kafka.* (security protocol, SASL) if the cluster needs them"
            f"{source.driver_kafka().hint()}"
        )
        raise PreflightError(msg) from None
    missing = [t for t in source.topics if t not in metadata.topics]
    for topic in missing:
        log.warning(
            "topic does not exist yet topic=%s bootstrap=%s: the query waits for it",
            topic,
            source.bootstrap_servers,
        )


def describe_topics(
    source: SourceSettings, timeout_s: float = 15.0
) -> tuple[dict[str, str], dict[str, list[int]]]:
    """Each existing subscribed topic's Kafka topic id and partitions (driver, at start)."""
    from confluent_kafka import KafkaException, TopicCollection

    admin = _admin(source)
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    wanted = [t for t in source.subscribed_topics() if t in existing]
    ids: dict[str, str] = {}
    partitions: dict[str, list[int]] = {}
    if not wanted:
        return ids, partitions
    futures = admin.describe_topics(TopicCollection(wanted), request_timeout=timeout_s)
    for topic, future in futures.items():
        try:
            description = future.result()
        except KafkaException as e:
            msg = f"Kafka could not describe topic {topic}: {e}"
            raise PreflightError(msg) from None
        ids[topic] = str(description.topic_id)
        partitions[topic] = sorted(p.id for p in description.partitions)
    return ids, partitions


def _admin(source: SourceSettings) -> AdminClient:
    """The driver's admin client; settings librdkafka refuses fail here, naming their option.

    Raises:
        PreflightError: librdkafka refused a setting (construction checks every property,
            and with TLS loads the certificates and keys).
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    driver = source.driver_kafka()
    settings: dict[str, str | int | float | bool] = dict(driver.settings)
    # librdkafka logs every failed connection attempt: the errors raised here say it instead
    # (source.driver-options.log_level turns its log back on, with debug=...).
    settings.setdefault("log_level", 0)
    try:
        return AdminClient(settings)
    except KafkaException as e:
        reason = _reason(e)
        named = _PROPERTY.search(reason)
        origin = driver.origins.get(named.group(1)) if named else None
        where = f" (from {origin})" if origin else ""
        msg = (
            f"the driver's Kafka client (librdkafka) refuses its settings: {reason}{where}. "
            "It takes source.driver-options.* as they are, and of source.options.kafka.* what "
            f"librdkafka reads the same way{driver.hint()}"
        )
        raise PreflightError(msg) from None


def _reason(e: Exception) -> str:
    error = e.args[0] if e.args else e
    return error.str() if hasattr(error, "str") else str(error)
