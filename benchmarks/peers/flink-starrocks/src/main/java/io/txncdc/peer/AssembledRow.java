package io.txncdc.peer;

/**
 * One row of an assembled transaction, as the seed's assembler hands it to the sink: the
 * target table, the row as Stream Load JSON, the source partition, and whether it is the
 * transaction's last row. Each flavour's PeerSink turns it into the connector's row type.
 */
public class AssembledRow {
    public String database;
    public String table;
    public String json;
    public int sourcePartition;
    public boolean transactionEnd;

    public AssembledRow() {}
}
