package io.txncdc.peer;

import com.starrocks.connector.flink.table.data.DefaultStarRocksRowData;
import com.starrocks.connector.flink.table.sink.SinkFunctionFactory;
import com.starrocks.connector.flink.table.sink.StarRocksSinkOptions;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.utils.ParameterTool;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * The released connector (1.2.10, the newest on Maven Central) writing several tables from one
 * stream (V2, at-least-once): each row names its table and each table is loaded on its own, so
 * a flush can make part of a source transaction visible. It has no multi-table transaction mode
 * (that arrives in 1.2.15); this is the peer a clean checkout can build.
 */
final class PeerSink {
    private PeerSink() {}

    static void attach(DataStream<AssembledRow> rows, ParameterTool p) {
        StarRocksSinkOptions options = PeerOptions.common(p).build();
        rows.keyBy(r -> r.sourcePartition, Types.INT)
                .map(PeerSink::toConnectorRow, TypeInformation.of(DefaultStarRocksRowData.class))
                .name("to-connector-rows")
                .addSink(SinkFunctionFactory.createSinkFunction(options))
                .name("starrocks-per-table-sink");
    }

    private static DefaultStarRocksRowData toConnectorRow(AssembledRow row) {
        return new DefaultStarRocksRowData(null, row.database, row.table, row.json);
    }
}
