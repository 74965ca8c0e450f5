package io.txncdc.peer;

/**
 * One CDC event of our contract (conf/events.avsc), as the seed's TxnEvent: a Flink POJO
 * (public fields, no-arg constructor) so keyed list state can hold it.
 */
public class TxnEvent {
    public int partition;
    public long offset;
    public String txnId;
    /** TXN_BEGIN, DATA or TXN_END. */
    public String type;
    public String database;
    public String table;
    /** The row as StarRocks Stream Load JSON: the event's row, plus "__op":1 for a DELETE. */
    public String json;

    public TxnEvent() {}
}
