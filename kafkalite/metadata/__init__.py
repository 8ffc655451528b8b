"""KRaft's metadata (Kafka's ``metadata`` module): the records of ``__cluster_metadata``, the image a node
builds by replaying them, and the quorum controller that writes them."""
