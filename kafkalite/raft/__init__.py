"""KRaft's consensus core (KIP-595): the metadata quorum as sans-I/O state machines over kafkalite's log.

``KafkaRaftClient`` is one member; ``QuorumState`` and the ``EpochState`` classes hold its epoch, vote and
role, persisted in ``quorum-state``; ``KafkaMetadataLog`` is ``__cluster_metadata-0`` on disk, with its
snapshots (``kafkalite.raft.snapshot``, KIP-630); ``RaftNode`` runs a member on the simulator.
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
from kafkalite.raft.metadata_log import Batch, KafkaMetadataLog, MetadataLogConfig
from kafkalite.raft.quorum_config import QuorumConfig
from kafkalite.raft.quorum_state import IllegalStateError, QuorumState
from kafkalite.raft.quorum_state_store import ElectionState, FileQuorumStateStore
from kafkalite.raft.raft_node import RaftNode
from kafkalite.raft.snapshot import SnapshotId, SnapshotReader

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
    "MetadataLogConfig",
    "QuorumConfig",
    "QuorumState",
    "RaftListener",
    "RaftNode",
    "RaftRequest",
    "RaftResponse",
    "ResignedState",
    "SnapshotId",
    "SnapshotReader",
    "UnattachedState",
    "VotedState",
]
