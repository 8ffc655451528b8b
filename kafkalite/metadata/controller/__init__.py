"""KRaft's quorum controller (Kafka's ``org.apache.kafka.controller``): the Raft leader among the
controllers turns requests into metadata records, and answers once the records are committed."""

from kafkalite.metadata.controller.quorum_controller import ControllerSettings, QuorumController

__all__ = ["ControllerSettings", "QuorumController"]
