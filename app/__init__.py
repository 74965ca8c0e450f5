"""The application: wires the Kafka source, the assembler and the sink on Spark."""
