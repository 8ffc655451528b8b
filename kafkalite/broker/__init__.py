"""The broker side: decisions a Kafka broker or controller makes for the cluster."""
