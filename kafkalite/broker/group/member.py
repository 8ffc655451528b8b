"""A consumer group's in-memory state: its members, its generation and its committed offsets (Kafka's
``MemberMetadata`` and ``GroupMetadata`` of the classic group protocol). Plain data plus the bookkeeping that
needs no timers, as Kafka's ``GroupMetadata`` keeps it: state transitions checked against
``VALID_PREVIOUS_STATES``, members and static members, the next generation and its leader, the answers held
for members waiting on a rebalance, and the offsets (retention, transactional offsets). ``GroupCoordinator``
drives the state machine; ``OffsetMetadataManager`` stores the offsets."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kafkalite.protocol.api import TopicPartition
from kafkalite.protocol.group import DescribedGroup, DescribedGroupMember


class GroupState(Enum):
    """Kafka's names for the classic group states (DescribeGroups/ListGroups show them)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's GroupMetadata.validPreviousStates
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    """(assignor name, subscription metadata), in the member's order of preference."""
    assignment: bytes = b""
    awaiting_join: Callable[[Any], None] | None = None
    awaiting_sync: Callable[[Any], None] | None = None
    is_new: bool = False
    heartbeat_timer: int | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def answer_join(self, response: Any) -> bool:
        """Kafka's ``maybeInvokeJoinCallback``: hand ``response`` to the JoinGroup waiting, if one is."""
        callback, self.awaiting_join = self.awaiting_join, None
        if callback is None:
            return False
        callback(response)
        return True

    def answer_sync(self, response: Any) -> bool:
        """Kafka's ``maybeInvokeSyncCallback``: hand ``response`` to the SyncGroup waiting, if one is."""
        callback, self.awaiting_sync = self.awaiting_sync, None
        if callback is None:
            return False
        callback(response)
        return True


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


@dataclass
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    """Insertion order is join order: the first member becomes leader when the leader goes."""
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> its current member id."""
    pending_members: set[str] = field(default_factory=set)
    """Member ids handed out with MEMBER_ID_REQUIRED that have not joined with them yet (KIP-394)."""
    pending_sync_members: set[str] = field(default_factory=set)
    """Members of the new generation that have not sent SyncGroup yet."""
    pending_txn_offsets: dict[int, dict[Any, Any]] = field(default_factory=dict)
    """Offsets committed inside a transaction, by producer id: they count once its COMMIT marker lands."""
    new_member_added: bool = False
    join_timer: int | None = None
    join_initial_delay: bool = False
    join_remaining_ms: int = 0
    sync_timer: int | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    """When the group entered its current state (Kafka's currentStateTimestamp): offset retention of an Empty
    group counts from it."""

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        """Enter ``state`` at ``now_ms``; a transition Kafka does not allow is a bug (AssertionError)."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise AssertionError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}"
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: tuple[tuple[str, bytes], ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        respond: Callable[[Any], None],
        retry_response: Any,
    ) -> None:
        """Kafka's ``updateMember``: a known member rejoins with ``protocols`` and waits with ``respond``; an
        older JoinGroup of it still waiting is answered with ``retry_response`` (the newest wins)."""
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.awaiting_join is not None and member.awaiting_join is not respond:
            member.awaiting_join(retry_response)
        member.awaiting_join = respond

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """Kafka's ``replaceStaticMember``: the static member ``instance_id`` is known as ``new_id`` from
        now on, wherever the group knew it as ``old_id`` (leader, pending sync)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """A request naming a group.instance.id whose current member id is another one."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else the first member that did; False when none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.is_awaiting_join:
            return True
        joined = [m.member_id for m in self.members.values() if m.is_awaiting_join]
        if not joined:
            return False
        self.leader_id = joined[0]
        return True

    def init_next_generation(self) -> None:
        """A new generation: with members, the protocol they voted for; without, no protocol or leader.
        (The coordinator then moves the group to CompletingRebalance or Empty.)"""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
        else:
            self.protocol_name = None
            self.leader_id = None

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        names = {name for name, _ in protocols}
        if self.is_(GroupState.EMPTY) and not self.members:
            return bool(protocol_type) and bool(names)
        if not self.members:
            # No member left, yet not Empty: the last one left while a rebalance was being prepared.
            # Every protocol is then shared by all (zero) members, as Kafka counts it; only the type binds.
            return protocol_type == self.protocol_type and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; most votes wins (ties: first voted)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda p: votes[p])  # max keeps the first of equal counts

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        assert self.protocol_name is not None
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        ]

    def summary(self) -> DescribedGroup:
        """Kafka's ``summary``: the group as DescribeGroups shows it (subscriptions and shares when Stable)."""
        stable = self.is_(GroupState.STABLE)
        members = tuple(
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(self.protocol_name) if stable and self.protocol_name else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in self.members.values()
        )
        return DescribedGroup(
            group_id=self.group_id,
            group_state=self.state.value,
            protocol_type=self.protocol_type or "",
            protocol_data=(self.protocol_name or "") if stable else "",
            members=members,
        )

    # ----- offsets -----------------------------------------------------------------------------------
    def remove_offsets(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Drop the committed offsets of ``tps``; returns those removed, sorted."""
        wanted = set(tps)
        removed = sorted(tp for tp in self.offsets if tp in wanted)
        for tp in removed:
            del self.offsets[tp]
        return removed

    def remove_all_offsets(self) -> list[TopicPartition]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int, subscribed: frozenset[str] = frozenset()
    ) -> list[TopicPartition]:
        """Kafka's ``removeExpiredOffsets``: offsets older than ``retention_ms`` go. An Empty consumer group
        counts from when it became Empty (its currentStateTimestamp); a group used only for commits (no
        protocol type) counts from each commit. Groups with members keep their offsets here (Kafka also
        expires, in a Stable group, offsets of topics no member subscribes to). Offsets of the
        ``subscribed`` topics are kept (a KIP-848 consumer group's, whose offsets this memberless group
        holds), and so are those an open transaction has an offset pending for (its COMMIT replaces them)."""
        if self.protocol_type is not None and not self.is_(GroupState.EMPTY):
            return []
        pending = {tp for offsets in self.pending_txn_offsets.values() for tp in offsets}
        expired = []
        for tp, om in sorted(self.offsets.items()):
            if tp.topic in subscribed or tp in pending:
                continue
            base = om.commit_timestamp_ms
            if self.protocol_type is not None and self.state_timestamp_ms >= 0:
                base = self.state_timestamp_ms
            if now_ms - base >= retention_ms:
                expired.append(tp)
        for tp in expired:
            del self.offsets[tp]
        return expired

    def complete_pending_txn_offset_commit(self, producer_id: int, committed: bool) -> dict[Any, Any]:
        """The producer's transaction ended: its offsets count now (``committed``) or never. Returns the
        offsets that were pending."""
        pending = self.pending_txn_offsets.pop(producer_id, None) or {}
        if committed:
            self.offsets.update(pending)
        return pending


__all__ = [
    "VALID_PREVIOUS_STATES",
    "GroupMetadata",
    "GroupState",
    "MemberMetadata",
    "OffsetAndMetadata",
]
