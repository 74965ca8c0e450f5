package io.txncdc.peer;

import com.starrocks.connector.flink.table.sink.StarRocksSinkOptions;
import org.apache.flink.api.java.utils.ParameterTool;

/** The sink options both flavours share, as the seed recommends them. */
final class PeerOptions {
    private PeerOptions() {}

    static StarRocksSinkOptions.Builder common(ParameterTool p) {
        return StarRocksSinkOptions.builder()
                .withProperty("jdbc-url", p.getRequired("jdbc-url"))
                .withProperty("load-url", p.getRequired("load-url"))
                .withProperty("database-name", "*")
                .withProperty("table-name", "*")
                .withProperty("username", p.get("user", "root"))
                .withProperty("password", p.get("password", ""))
                .withProperty("sink.label-prefix", p.get("label-prefix", "peer"))
                .withProperty("sink.version", "V2")
                .withProperty("sink.semantic", "at-least-once")
                .withProperty("sink.buffer-flush.interval-ms", p.get("flush-interval-ms", "1000"))
                .withProperty("sink.properties.format", "json")
                .withProperty("sink.properties.strip_outer_array", "true");
    }
}
