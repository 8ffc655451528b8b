"""Configuration with Kafka's key names, defaults and validation: the parse helpers (``base``), the broker's
settings (``broker``), a topic's log settings (``topic``), the producer's (``producer``) and the consumer's
(``consumer``)."""
