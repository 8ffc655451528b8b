"""The quorum's settings, with Kafka's names (``QuorumConfig``: ``controller.quorum.*``) and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_KEYS = {
    "controller.quorum.voters": "voters",
    "controller.quorum.election.timeout.ms": "election_timeout_ms",
    "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "controller.quorum.election.backoff.max.ms": "election_backoff_max_ms",
    "controller.quorum.request.timeout.ms": "request_timeout_ms",
    "controller.quorum.retry.backoff.ms": "retry_backoff_ms",
}


def parse_voters(value: Any) -> tuple[int, ...]:
    """``controller.quorum.voters``: ``"1@host:9093,2@host:9094"`` (Kafka's form) or ids, to sorted ids."""
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
        try:
            ids = [int(v.split("@", 1)[0]) for v in items]
        except ValueError:
            raise ValueError(
                f"controller.quorum.voters: expected id@host:port entries, got {value!r}"
            ) from None
    else:
        ids = [int(v) for v in value]
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise ValueError(f"controller.quorum.voters needs distinct non-negative node ids, got {value!r}")
    return tuple(sorted(ids))


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """Timeouts of the Raft quorum. ``fetch_max_wait_ms`` is the leader's long poll (KafkaRaftClient's
    fixed 500 ms in Kafka); the rest are Kafka's ``controller.quorum.*`` settings."""

    voters: tuple[int, ...]
    election_timeout_ms: int = 1_000
    """A voter that hears from no leader starts an election after a random time in [T, 2T)."""
    fetch_timeout_ms: int = 2_000
    """A follower that gets no fetch response from the leader for this long starts an election; a
    leader that no majority fetched from within 1.5 times this resigns (check quorum)."""
    election_backoff_max_ms: int = 1_000
    """A candidate that lost waits a random time up to this before it tries again in the next epoch."""
    request_timeout_ms: int = 2_000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    fetch_snapshot_max_bytes: int = 8 << 20
    """The largest chunk of a snapshot one FetchSnapshot asks for (KafkaRaftClient's fixed 8 MiB)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "voters", parse_voters(self.voters))
        for name in (
            "election_timeout_ms",
            "fetch_timeout_ms",
            "election_backoff_max_ms",
            "request_timeout_ms",
            "retry_backoff_ms",
            "fetch_max_wait_ms",
            "fetch_snapshot_max_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> QuorumConfig:
        """Build from Kafka-named settings; an unknown ``controller.quorum.*`` key is an error."""
        kw: dict[str, Any] = {}
        for key, value in props.items():
            attr = _KEYS.get(key)
            if attr is None:
                if key.startswith("controller.quorum."):
                    raise ValueError(f"unknown quorum setting {key!r}; known: {sorted(_KEYS)}")
                continue
            kw[attr] = value if attr == "voters" else int(value)
        if "voters" not in kw:
            raise ValueError("controller.quorum.voters is required")
        return cls(**kw)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1
