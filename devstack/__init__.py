"""Local stand-ins for real services (Kafka, StarRocks). Product code never imports this."""
