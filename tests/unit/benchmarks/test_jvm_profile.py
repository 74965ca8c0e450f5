from __future__ import annotations

import pytest

from benchmarks.jvm_profile import OTHER, area, parse, report, summarize, thread_kind

pytestmark = pytest.mark.unit

# Two samples as `jfr print --events jdk.ExecutionSample` prints them (leaf first).
TEXT = """
jdk.ExecutionSample {
  startTime = 04:40:17.967
  sampledThread = "Executor task launch worker for task 1.0 in stage 3.0" (javaThreadId = 85)
  state = "STATE_RUNNABLE"
  stackTrace = [
    org.apache.kafka.common.record.DefaultRecord.readFrom(ByteBuffer, long) line: 123
    org.apache.spark.sql.kafka010.consumer.KafkaDataConsumer.get(long, long) line: 9
    org.apache.spark.sql.execution.arrow.ArrowWriter.write(InternalRow) line: 2
    org.apache.spark.shuffle.ShuffleWriteProcessor.write(RDD) line: 1
    ...
  ]
}

jdk.ExecutionSample {
  startTime = 04:40:17.976
  sampledThread = "stream execution thread for q [id = 1]" (javaThreadId = 451)
  state = "STATE_RUNNABLE"
  stackTrace = [
    scala.collection.immutable.HashMapBuilder.update(MapNode) line: 2311
    org.apache.spark.sql.catalyst.rules.RuleExecutor.execute(TreeNode) line: 3
  ]
}
"""


def test_samples_are_read_with_their_thread_and_frames_leaf_first() -> None:
    first, second = parse(TEXT.splitlines())
    assert first.thread.startswith("Executor task launch worker for task 1.0")
    assert first.frames[:2] == [
        "org.apache.kafka.common.record.DefaultRecord.readFrom",
        "org.apache.spark.sql.kafka010.consumer.KafkaDataConsumer.get",
    ]
    assert len(first.frames) == 4, "the truncation mark is not a frame"
    assert second.frames[-1] == "org.apache.spark.sql.catalyst.rules.RuleExecutor.execute"


def test_a_sample_counts_under_its_innermost_known_frame() -> None:
    first, second = parse(TEXT.splitlines())
    # Inside the Kafka read that an Arrow writer pulls from: the read's, not the writer's.
    assert area(first.frames).startswith("Kafka reads")
    assert area(second.frames).startswith("analysis, optimization")
    assert area(["java.lang.Object.wait"]) == OTHER


def test_threads_are_grouped_by_role_whatever_their_task() -> None:
    assert thread_kind("Executor task idle worker#85") == "executor tasks"
    assert thread_kind("stream execution thread for q [id = 1]").startswith("driver: stream")
    assert thread_kind("Thread-4") == "driver: py4j calls from Python"
    assert thread_kind("dag-scheduler-event-loop") == "other JVM threads"


def test_the_report_gives_shares_of_the_samples_beside_the_jvms_cpu() -> None:
    lines = report(summarize(parse(TEXT.splitlines())), jvm_us_per_record=40.0, top=1)
    assert lines[0].startswith("2 samples of Java threads")
    assert lines[0].endswith("GC and JIT included): 40.0 µs per record")
    assert "   50.0 %  executor tasks" in lines
    assert "   50.0 %  Kafka reads (Spark's Kafka source, Kafka client)" in lines
    assert lines[-2] == "self:"
