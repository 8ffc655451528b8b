"""Small algorithms both sides share, as Kafka's ``org.apache.kafka.common``: Java's string hash and the
coordinator placement every client and broker must compute bit for bit alike, the ACL model and SCRAM's
credentials (which brokers and the KRaft controller both use)."""
