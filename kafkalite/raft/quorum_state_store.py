"""The ``quorum-state`` file: the epoch, the leader and the vote a node must never forget.

Kafka's ``FileQuorumStateStore`` writes ``QuorumStateData`` as JSON next to the metadata log; a node reads
it at start so it neither votes twice in one epoch nor goes back to an epoch it has left. Written as Kafka
writes checkpoints: a ``.tmp`` file, fsync, rename over the old one, fsync the directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kafkalite.errors import KafkaStorageError
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps

QUORUM_STATE_FILE = "quorum-state"
DATA_VERSION = 0
NO_ID = -1


@dataclass(frozen=True, slots=True)
class ElectionState:
    """Kafka's ``ElectionState``: the epoch, its leader (if known) and whom this node voted for in it."""

    epoch: int
    leader_id: int = NO_ID
    voted_id: int = NO_ID

    @property
    def has_leader(self) -> bool:
        return self.leader_id != NO_ID

    @property
    def has_voted(self) -> bool:
        return self.voted_id != NO_ID


class FileQuorumStateStore:
    """Reads and atomically rewrites one ``quorum-state`` file."""

    def __init__(self, path: str | os.PathLike, file_ops: FileOps = OS_FILE_OPS) -> None:
        self.path = Path(path)
        self.file_ops = file_ops

    def read_election_state(self) -> ElectionState | None:
        """The persisted state, or None when the file does not exist yet (a new node)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            version = data["data_version"]
            if version != DATA_VERSION:
                raise ValueError(f"data_version {version} (this reader knows {DATA_VERSION})")
            state = ElectionState(int(data["leaderEpoch"]), int(data["leaderId"]), int(data["votedId"]))
        except (ValueError, KeyError, TypeError) as e:
            raise KafkaStorageError(f"cannot read quorum state {self.path}: {e}") from None
        if state.epoch < 0 and (state.has_leader or state.has_voted):
            raise KafkaStorageError(f"quorum state {self.path}: a leader or vote with epoch {state.epoch}")
        return state

    def write_election_state(self, state: ElectionState, voters: tuple[int, ...]) -> None:
        """Persist ``state`` durably before the caller acts on it (votes, leads or follows)."""
        data = {
            "clusterId": "",
            "leaderId": state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": state.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in voters],
            "data_version": DATA_VERSION,
        }
        self.file_ops.replace_atomically(self.path, json.dumps(data, separators=(",", ":")).encode())
