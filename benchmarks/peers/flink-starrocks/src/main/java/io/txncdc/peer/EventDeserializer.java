package io.txncdc.peer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Our JSON events (txn_id, type, database, table, op, row, event_count) into TxnEvent, with the
 * Kafka partition the seed keys by. The row is JSON text (or, in one generator mode, an object).
 */
public class EventDeserializer implements KafkaRecordDeserializationSchema<TxnEvent> {
    private static final long serialVersionUID = 1L;
    private transient ObjectMapper mapper;

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<TxnEvent> out)
            throws java.io.IOException {
        if (mapper == null) {
            mapper = new ObjectMapper();
        }
        JsonNode node = mapper.readTree(record.value());
        TxnEvent e = new TxnEvent();
        e.partition = record.partition();
        e.offset = record.offset();
        e.txnId = text(node, "txn_id");
        e.type = text(node, "type");
        e.database = text(node, "database");
        e.table = text(node, "table");
        JsonNode row = node.get("row");
        if (row != null && !row.isNull()) {
            String json = row.isTextual() ? row.asText() : row.toString();
            if ("DELETE".equals(text(node, "op"))) {
                String body = json.trim().substring(1).trim();
                json = "{\"__op\":1" + (body.equals("}") ? "" : ",") + body;
            }
            e.json = json;
        }
        out.collect(e);
    }

    private static String text(JsonNode node, String field) {
        JsonNode v = node.get(field);
        return v == null || v.isNull() ? null : v.asText();
    }

    @Override
    public TypeInformation<TxnEvent> getProducedType() {
        return TypeInformation.of(TxnEvent.class);
    }
}
