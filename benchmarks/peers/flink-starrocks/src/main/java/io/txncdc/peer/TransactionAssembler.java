package io.txncdc.peer;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * The seed's TransactionAssembler, unchanged in behaviour: keyed by source partition, buffers
 * DATA events, and on TXN_END emits the transaction's rows in one processElement() call, every
 * row with sourcePartition and the last one with transactionEnd=true. TXN_BEGIN clears.
 * (It emits AssembledRow, so that one assembler serves both connector releases.)
 */
public class TransactionAssembler
        extends KeyedProcessFunction<Integer, TxnEvent, AssembledRow> {
    private static final long serialVersionUID = 1L;
    private transient ListState<TxnEvent> pendingRows;

    @Override
    public void open(Configuration parameters) {
        pendingRows = getRuntimeContext().getListState(
                new ListStateDescriptor<>("pending-txn-rows", Types.POJO(TxnEvent.class)));
    }

    @Override
    public void processElement(TxnEvent event, Context ctx, Collector<AssembledRow> out)
            throws Exception {
        switch (event.type) {
            case "TXN_BEGIN":
                pendingRows.clear();
                break;
            case "DATA":
                pendingRows.add(event);
                break;
            case "TXN_END":
                List<TxnEvent> rows = new ArrayList<>();
                for (TxnEvent row : pendingRows.get()) {
                    rows.add(row);
                }
                int partition = ctx.getCurrentKey();
                for (int i = 0; i < rows.size(); i++) {
                    TxnEvent row = rows.get(i);
                    AssembledRow data = new AssembledRow();
                    data.database = row.database;
                    data.table = row.table;
                    data.json = row.json;
                    data.sourcePartition = partition;
                    data.transactionEnd = i == rows.size() - 1;
                    out.collect(data);
                }
                pendingRows.clear();
                break;
            default:
                break; // the seed ignores what it does not know
        }
    }
}
