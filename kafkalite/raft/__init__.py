"""KRaft's consensus core (KIP-595): the metadata quorum as sans-I/O state machines over kafkalite's log.

``KafkaRaftClient`` is one member; ``QuorumState`` and the ``EpochState`` classes hold its epoch, vote and
role, persisted in ``quorum-state``; ``KafkaMetadataLog`` is ``__cluster_metadata-0`` on disk;
``RaftNode`` runs a member on the simulator.
"""

from kafkalite.raft.epoch_state import (
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ResignedState,
    UnattachedState,
    VotedState,
)
from kafkalite.raft.kafka_raft_client import KafkaRaftClient, RaftListener, RaftRequest, RaftResponse
from kafkalite.raft.metadata_log import Batch, KafkaMetadataLog
from kafkalite.raft.quorum_config import QuorumConfig
from kafkalite.raft.quorum_state import IllegalStateError, QuorumState
from kafkalite.raft.quorum_state_store import ElectionState, FileQuorumStateStore
from kafkalite.raft.raft_node import RaftNode

__all__ = [
    "Batch",
    "CandidateState",
    "ElectionState",
    "EpochState",
    "FileQuorumStateStore",
    "FollowerState",
    "IllegalStateError",
    "KafkaMetadataLog",
    "KafkaRaftClient",
    "LeaderState",
    "QuorumConfig",
    "QuorumState",
    "RaftListener",
    "RaftNode",
    "RaftRequest",
    "RaftResponse",
    "ResignedState",
    "UnattachedState",
    "VotedState",
]
