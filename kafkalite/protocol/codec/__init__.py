"""Kafka's wire format: primitive types, message schemas with version ranges, request/response headers, and
the adapter between the schemas and kafkalite's protocol dataclasses."""
