package io.txncdc.peer;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.utils.ParameterTool;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;

/**
 * The seed's WriteMultipleTablesWithTransaction on our topic, as a local mini-cluster:
 * Kafka -> keyBy(partition) -> TransactionAssembler -> keyBy(sourcePartition) -> the StarRocks
 * sink of the flavour built (PeerSink: multi-table transaction mode with connector 1.2.15, or
 * per-table loads with the released 1.2.10). Options are the seed's.
 *
 * Arguments (--name value): bootstrap, topic, group, load-url, jdbc-url, user, password,
 * parallelism (2), checkpoint-dir, checkpoint-interval-ms (10000), restore (a chk-N dir),
 * flush-interval-ms (1000), label-prefix (peer).
 */
public final class PeerJob {
    private PeerJob() {}

    public static void main(String[] args) throws Exception {
        ParameterTool p = ParameterTool.fromArgs(args);
        int parallelism = p.getInt("parallelism", 2);

        Configuration conf = new Configuration();
        conf.setString("state.backend.type", "hashmap");
        // The key Flink 1.19 knows (1.20 reads it too, as execution.checkpointing.dir).
        conf.setString("state.checkpoints.dir",
                new java.io.File(p.getRequired("checkpoint-dir")).toURI().toString());
        conf.setString("execution.checkpointing.externalized-checkpoint-retention",
                "RETAIN_ON_CANCELLATION");
        conf.setString("restart-strategy.type", "none");
        if (p.has("restore")) {
            conf.setString("execution.savepoint.path", p.get("restore"));
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);
        // As the seed: checkpoints are for recovery only; commits follow the flush interval.
        env.enableCheckpointing(p.getLong("checkpoint-interval-ms", 10_000));

        KafkaSource<TxnEvent> source = KafkaSource.<TxnEvent>builder()
                .setBootstrapServers(p.getRequired("bootstrap"))
                .setTopics(p.getRequired("topic"))
                .setGroupId(p.get("group", "flink-starrocks-peer"))
                .setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
                .setDeserializer(new EventDeserializer())
                .build();
        DataStream<TxnEvent> events =
                env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-cdc");

        DataStream<AssembledRow> rows = events
                .keyBy(e -> e.partition, Types.INT)
                .process(new TransactionAssembler())
                .name("transaction-assembler");

        PeerSink.attach(rows, p);

        env.execute("flink-starrocks-peer");
    }
}
