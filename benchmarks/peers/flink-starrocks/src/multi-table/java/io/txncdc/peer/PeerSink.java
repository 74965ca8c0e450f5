package io.txncdc.peer;

import com.starrocks.connector.flink.table.data.DefaultStarRocksRowData;
import com.starrocks.connector.flink.table.sink.SinkFunctionFactory;
import com.starrocks.connector.flink.table.sink.StarRocksSinkOptions;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.utils.ParameterTool;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * The seed's sink: connector 1.2.15 in multi-table transaction mode (V2, at-least-once), rows
 * keyed by source partition, each carrying sourcePartition and, on a transaction's last row,
 * transactionEnd, so that a flush commits whole source transactions across tables.
 */
final class PeerSink {
    private PeerSink() {}

    static void attach(DataStream<AssembledRow> rows, ParameterTool p) {
        StarRocksSinkOptions options = PeerOptions.common(p)
                .withProperty("sink.transaction.multi-table.enabled", "true")
                .build();
        rows.map(PeerSink::toConnectorRow, TypeInformation.of(DefaultStarRocksRowData.class))
                .name("to-connector-rows")
                .keyBy(r -> r.getSourcePartition(), Types.INT)
                .addSink(SinkFunctionFactory.createSinkFunction(options))
                .name("starrocks-multi-table-sink");
    }

    private static DefaultStarRocksRowData toConnectorRow(AssembledRow row) {
        DefaultStarRocksRowData data =
                new DefaultStarRocksRowData(null, row.database, row.table, row.json);
        data.setSourcePartition(row.sourcePartition);
        data.setTransactionEnd(row.transactionEnd);
        return data;
    }
}
