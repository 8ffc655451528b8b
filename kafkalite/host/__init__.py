"""Hosting kafkalite: the in-process ``Cluster`` facade, the TCP server speaking Kafka's wire protocol, the
process runner for brokers and the coordination store, and the admin client that talks to them."""
