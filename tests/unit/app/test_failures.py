# ruff: noqa: E501 -- Spark's error texts are quoted as Spark prints them
from __future__ import annotations

import pytest

from app.failures import explain_query_failure, kafka_earliest

pytestmark = pytest.mark.unit

EXECUTOR_TEXT = """[STREAM_FAILED] Query [id = 1] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR]
py4j.protocol.Py4JJavaError: An error occurred while calling o380.collectToPython.
: org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because they are not available in Kafka any more;
either the data was aged out by Kafka or the topic may have been deleted before all the data in the
topic was processed.
If you don't want your streaming query to fail on such cases, set the source option failOnDataLoss to false.
Reason: Could not read records in offset [120, 129) for topic partition cdc.orders-3
with consumer group spark-kafka-source-f7cd-executor.
\tat org.apache.spark.sql.kafka010.KafkaExceptions$.couldNotReadOffsetRange(KafkaExceptions.scala:94)
"""

DRIVER_TEXT = """[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may have been lost because they are not
available in Kafka any more; either ...
Reason: Partition cdc.orders-0's offset was changed from 15 to 6. SQLSTATE: 22000
\tat org.apache.spark.sql.kafka010.KafkaExceptions$.partitionOffsetChanged
"""


def test_executor_data_loss_names_partition_offsets_and_what_to_do() -> None:
    asked: list[tuple[str, int]] = []

    def earliest(topic: str, partition: int) -> int:
        asked.append((topic, partition))
        return 123

    line = explain_query_failure(EXECUTOR_TEXT, earliest)
    assert asked == [("cdc.orders", 3)]
    assert line.startswith("Kafka data loss: Could not read records in offset [120, 129) ")
    assert (
        "for topic partition cdc.orders-3 (the earliest offset Kafka still has there is 123)"
        in line
    )
    assert "source.fail-on-data-loss=false" in line
    assert "\n" not in line
    assert "consumer group" not in line


def test_driver_data_loss_tag() -> None:
    line = explain_query_failure(DRIVER_TEXT)
    assert "Partition cdc.orders-0's offset was changed from 15 to 6" in line
    assert "SQLSTATE" not in line


def test_other_errors_keep_their_first_line() -> None:
    assert explain_query_failure("boom\n\tat x.y") == "boom"
    assert explain_query_failure("") == "unknown error"


WRAPPED_TEXT = """Exception thrown in awaitResult:
=== Streaming Query ===
Identifier: chaos [id = 1, runId = 2]
\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:70)
Caused by: org.apache.spark.SparkException: wrapped once
\tat org.apache.spark.rpc.RpcTimeout.awaitResult(RpcTimeout.scala:75)
Caused by: org.apache.spark.sql.execution.streaming.state.StateStoreCommitValidationFailed: [STATE_STORE_COMMIT_VALIDATION_FAILED] State store commit validation failed for batch 1.
Expected 2 commits but got 0.
\tat org.apache.spark.sql.execution.streaming.state.BatchCommitTracker.validateAllCommitted(StateStoreCoordinator.scala:596)
"""


def test_a_wrapped_error_names_its_root_cause() -> None:
    line = explain_query_failure(WRAPPED_TEXT)
    assert line == (
        "Exception thrown in awaitResult: (caused by org.apache.spark.sql.execution.streaming."
        "state.StateStoreCommitValidationFailed: [STATE_STORE_COMMIT_VALIDATION_FAILED] State "
        "store commit validation failed for batch 1.)"
    )


DELETED_TEXT = """[KAFKA_DATA_LOSS.PARTITIONS_DELETED] Some data may have been lost because they are not
available in Kafka any more; either ...
Reason: Partitions Set(cdc.old-0, cdc.old-1) have been deleted. SQLSTATE: 22000
\tat org.apache.spark.sql.kafka010.KafkaExceptions$.partitionsDeleted
"""


def test_partitions_gone_from_the_subscription_are_not_blamed_on_retention() -> None:
    """A topic removed from source.topics: Spark calls its partitions deleted (review, 12-07)."""
    line = explain_query_failure(DELETED_TEXT)
    assert "Partitions Set(cdc.old-0, cdc.old-1) have been deleted" in line
    assert "removed from source.topics" in line
    assert "source.fail-on-data-loss=false" in line
    assert "retention" not in line


def test_a_setting_librdkafka_refuses_costs_the_earliest_offset_not_the_message() -> None:
    # The failure is explained anyway; only "the earliest offset Kafka still has" is missing.
    earliest = kafka_earliest({"bootstrap.servers": "127.0.0.1:1", "fetch.max.wait.ms": "0"})
    assert earliest("t", 0) is None
