"""kafkalite: a small but real implementation of Apache Kafka in Python."""

__version__ = "0.1.0"
