package io.txncdc.peer;

import com.starrocks.connector.flink.table.data.DefaultStarRocksRowData;
import com.starrocks.connector.flink.table.sink.SinkFunctionFactory;
import com.starrocks.connector.flink.table.sink.StarRocksSinkOptions;
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
 * sink (V2, multi-table transaction mode, at-least-once). Options are the seed's.
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
        conf.setString("execution.checkpointing.dir",
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

        DataStream<DefaultStarRocksRowData> rows = events
                .keyBy(e -> e.partition, Types.INT)
                .process(new TransactionAssembler())
                .name("transaction-assembler");

        StarRocksSinkOptions options = StarRocksSinkOptions.builder()
                .withProperty("jdbc-url", p.getRequired("jdbc-url"))
                .withProperty("load-url", p.getRequired("load-url"))
                .withProperty("database-name", "*")
                .withProperty("table-name", "*")
                .withProperty("username", p.get("user", "root"))
                .withProperty("password", p.get("password", ""))
                .withProperty("sink.label-prefix", p.get("label-prefix", "peer"))
                .withProperty("sink.version", "V2")
                .withProperty("sink.semantic", "at-least-once")
                .withProperty("sink.transaction.multi-table.enabled", "true")
                .withProperty("sink.buffer-flush.interval-ms", p.get("flush-interval-ms", "1000"))
                .withProperty("sink.properties.format", "json")
                .withProperty("sink.properties.strip_outer_array", "true")
                .build();

        rows.keyBy(r -> r.getSourcePartition(), Types.INT)
                .addSink(SinkFunctionFactory.createSinkFunction(options))
                .name("starrocks-multi-table-sink");

        env.execute("flink-starrocks-peer");
    }
}
