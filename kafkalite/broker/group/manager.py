"""Kafka's ``GroupMetadataManager`` and ``OffsetMetadataManager``: what a group coordinator stores, kept in the
compacted topic ``__consumer_offsets``. The coordinator keeps the rebalance protocol; this module the rest.

``OffsetMetadataManager`` holds the committed offsets of the coordinator's groups: it stores an OffsetCommit
the coordinator accepted (each partition's metadata checked against ``offset.metadata.max.bytes``; the
commit applied and answered only once the write succeeded), a TxnOffsetCommit (held until the
transaction's marker), answers OffsetFetch, and removes offsets: expired ones, those of deleted topics, and
all of a deleted group. It writes through the coordinator's ``store`` (a ``GroupStore``); without one (unit
tests) every write succeeds at once.

The group a coordinator serves is decided by placement (``coordinator_partition``): the broker leading
partition ``p`` of ``__consumer_offsets`` coordinates every group hashing to ``p``. This manager follows that
leadership (the replica manager's ``on_leadership_change``):

- *elected* for ``p``: the partition is *loading* (requests for its groups get COORDINATOR_LOAD_IN_PROGRESS)
  until its log has been read from the start to the end: the last record per key wins, a tombstone (null
  value) deletes its key; the groups found are handed to the ``GroupCoordinator``; then ``p`` is *owned*.
- *resigned* (follower, or replica stopped): every group of ``p`` is unloaded (Dead here; waiting members are
  told NOT_COORDINATOR and look for the new coordinator).

Writes go through the replica manager's internal append, with ``offsets.commit.required.acks`` (-1: the
whole ISR) and ``offsets.commit.timeout.ms``: ``store_offsets`` and ``store_group`` call back only once the
append is acknowledged, with the log error translated the way Kafka's coordinator translates it.

Retention: every ``offsets.retention.check.interval.ms`` the offsets older than ``offsets.retention.minutes``
(for an Empty group, counted from when it became Empty) are removed and tombstones appended; a group left
Empty with no offsets is removed too, with a tombstone for its metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kafkalite.broker.group.consumer_group_records import ConsumerGroupReplay
from kafkalite.broker.group.member import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from kafkalite.common.utils import coordinator_partition
from kafkalite.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidCommitOffsetSizeError,
    InvalidGroupIdError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RebalanceInProgressError,
    RecordListTooLargeError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol import NO_ERROR, UNKNOWN_EPOCH, UNKNOWN_OFFSET, CreatableTopic, TopicPartition
from kafkalite.protocol.group import OffsetFetchPartitionResponse
from kafkalite.protocol.offsets_schema import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kafkalite.records import build_batch, set_producer_fields

if TYPE_CHECKING:
    from kafkalite.broker.group.coordinator import GroupCoordinator

OFFSETS_TOPIC = "__consumer_offsets"
GROUP_METADATA_TOPIC_NAME = OFFSETS_TOPIC
OFFSET_METADATA_TOO_LARGE = 12  # Kafka's error code: commit metadata longer than offset.metadata.max.bytes

Done = Callable[[int], None]
"""Called with an error code (NO_ERROR on success) once a store operation is over."""


class GroupStore(Protocol):
    """Where a coordinator persists offsets and group metadata (``GroupMetadataManager``)."""

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        done: Done,
        producer: tuple[int, int] | None = None,
    ) -> None: ...

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes], done: Done) -> None: ...

    def store_consumer_group_records(
        self, group_id: str, records: list[tuple[bytes, bytes | None]], done: Done
    ) -> None: ...


_INVALID_FETCH_SIZE = 4  # Kafka's INVALID_FETCH_SIZE, counted with the "too large" errors below
_TOO_LARGE = {MessageTooLargeError.code, RecordListTooLargeError.code, _INVALID_FETCH_SIZE}
_UNAVAILABLE = {
    UnknownTopicOrPartitionError.code,
    NotEnoughReplicasError.code,
    NotEnoughReplicasAfterAppendError.code,
}
_NOT_COORDINATOR = {NotLeaderOrFollowerError.code, KafkaStorageError.code}


def offset_commit_error(code: int) -> int:
    """The OffsetCommit error for a failed append to ``__consumer_offsets`` (Kafka's translation)."""
    if code in _UNAVAILABLE:
        return CoordinatorNotAvailableError.code
    if code in _NOT_COORDINATOR:
        return NotCoordinatorError.code
    if code in _TOO_LARGE:
        return InvalidCommitOffsetSizeError.code
    return code


def store_group_error(code: int) -> int:
    """The SyncGroup error for a failed append of group metadata (Kafka's translation)."""
    if code in _UNAVAILABLE:
        return CoordinatorNotAvailableError.code
    if code in _NOT_COORDINATOR:
        return NotCoordinatorError.code
    if code == RequestTimedOutError.code:
        return RebalanceInProgressError.code
    if code in _TOO_LARGE:
        return UnknownServerError.code
    return code


def consumer_group_write_error(code: int) -> int:
    """The ConsumerGroupHeartbeat error for a failed append of a consumer group's records."""
    if code in _UNAVAILABLE or code == RequestTimedOutError.code:
        return CoordinatorNotAvailableError.code
    if code in _NOT_COORDINATOR:
        return NotCoordinatorError.code
    if code in _TOO_LARGE:
        return UnknownServerError.code
    return code


def offsets_topic(config: Any) -> CreatableTopic:
    """The CreateTopics entry a broker sends to auto-create ``__consumer_offsets`` (compacted)."""
    return CreatableTopic(
        name=OFFSETS_TOPIC,
        num_partitions=config.offsets_topic_num_partitions,
        replication_factor=config.offsets_topic_replication_factor,
        configs=(
            # Kafka also sets compression.type=producer, which kafkalite's LogConfig does not model.
            ("cleanup.policy", "compact"),
            ("segment.bytes", str(config.offsets_topic_segment_bytes)),
        ),
    )


class OffsetMetadataManager:
    """The committed offsets of one coordinator's groups. See the module doc."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    def _event(self, event: str, **fields: Any) -> None:
        self.coordinator._log_event(event, **fields)

    def _write(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        done: Done,
        producer: tuple[int, int] | None = None,
    ) -> None:
        store = self.coordinator.store
        if store is None:
            done(NO_ERROR)
        elif producer is None:
            store.store_offsets(group, offsets, done)
        else:
            store.store_offsets(group, offsets, done, producer)

    def commit_offsets(
        self,
        group: GroupMetadata,
        member_id: str,
        generation: int,
        parts: Sequence[Any],
        respond: Callable[[dict[TopicPartition, int]], None],
    ) -> None:
        """Store the partitions ``parts`` of an OffsetCommit the coordinator accepted; ``respond`` gets each
        partition's error code once the write is over. A failed write applies nothing; a group unloaded
        meanwhile is answered NOT_COORDINATOR."""
        now = self.coordinator.clock.now_ms()
        max_bytes = self.coordinator.config.offset_metadata_max_bytes
        committed: dict[TopicPartition, OffsetAndMetadata] = {}
        too_large: set[TopicPartition] = set()
        for p in parts:
            if len((p.committed_metadata or "").encode("utf-8")) > max_bytes:
                too_large.add(p.tp)
                continue
            committed[p.tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch,
                metadata=p.committed_metadata,
                commit_timestamp_ms=now,
            )

        def answer(code: int) -> None:
            respond({p.tp: OFFSET_METADATA_TOO_LARGE if p.tp in too_large else code for p in parts})

        def stored(code: int) -> None:
            if code != NO_ERROR or self.coordinator.groups.get(group.group_id) is not group:
                self._event("group_commit_failed", group=group.group_id, member=member_id, error=code)
                answer(code if code != NO_ERROR else NotCoordinatorError.code)
                return
            group.offsets.update(committed)
            self._event(
                "group_commit",
                group=group.group_id,
                member=member_id,
                generation=generation,
                offsets={str(tp): om.offset for tp, om in committed.items()},
            )
            if self.coordinator.on_commit is not None:
                self.coordinator.on_commit(group.group_id, committed)
            answer(NO_ERROR)

        if not committed:
            stored(NO_ERROR)
        else:
            self._write(group, committed, stored)

    def commit_txn_offsets(
        self, group: GroupMetadata, producer: tuple[int, int], parts: Sequence[Any], respond: Done
    ) -> None:
        """Offsets written inside the transaction of ``producer`` (id, epoch): stored now as that producer's
        transactional batch, but visible only once its COMMIT marker reaches the offsets partition
        (``complete_txn_offsets``)."""
        now = self.coordinator.clock.now_ms()
        offsets = {
            p.tp: OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch, p.committed_metadata, now)
            for p in parts
        }

        def stored(code: int) -> None:
            if code != NO_ERROR or self.coordinator.groups.get(group.group_id) is not group:
                respond(code if code != NO_ERROR else NotCoordinatorError.code)
                return
            group.pending_txn_offsets.setdefault(producer[0], {}).update(offsets)
            self._event("group_txn_commit", group=group.group_id, producer_id=producer[0],
                        offsets={str(tp): om.offset for tp, om in offsets.items()})  # fmt: skip
            respond(NO_ERROR)

        self._write(group, offsets, stored, producer)

    def complete_txn_offsets(self, group_id: str, producer_id: int, committed: bool) -> None:
        """The producer's COMMIT/ABORT marker for ``group_id``'s partition landed: its offsets count or go."""
        group = self.coordinator.groups.get(group_id)
        if group is None:
            return
        pending = group.complete_pending_txn_offset_commit(producer_id, committed)
        if pending and committed:
            self._event("group_txn_offsets_committed", group=group_id, producer_id=producer_id,
                        offsets={str(tp): om.offset for tp, om in pending.items()})  # fmt: skip

    def fetch_offsets(
        self, group: GroupMetadata | None, tps: Iterable[TopicPartition] | None
    ) -> tuple[OffsetFetchPartitionResponse, ...]:
        """OffsetFetch: the committed offset of each of ``tps`` (None: every one committed)."""
        offsets = group.offsets if group is not None else {}
        out = []
        for tp in sorted(offsets) if tps is None else tps:
            om = offsets.get(tp)
            if om is None:
                out.append(OffsetFetchPartitionResponse(tp=tp, committed_offset=UNKNOWN_OFFSET, metadata=""))
            else:
                epoch = om.leader_epoch if om.leader_epoch is not None else UNKNOWN_EPOCH
                out.append(
                    OffsetFetchPartitionResponse(
                        tp=tp, committed_offset=om.offset, committed_leader_epoch=epoch, metadata=om.metadata
                    )
                )
        return tuple(out)

    def remove_offsets(self, group_id: str, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Drop the group's committed offsets for ``tps`` (their topic is gone); returns those removed."""
        group = self.coordinator.groups.get(group_id)
        return [] if group is None else group.remove_offsets(tps)

    def remove_expired_offsets(
        self, group_id: str, now_ms: int, retention_ms: int
    ) -> tuple[list[TopicPartition], bool]:
        """Offset retention for one group (``GroupMetadata.remove_expired_offsets``). Returns the removed
        partitions and whether the group, now Empty without offsets, was removed (Dead)."""
        group = self.coordinator.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return [], False
        # A KIP-848 consumer group keeps the offsets of the topics its members subscribe to for as long as
        # it has members (Kafka's ConsumerGroup.isSubscribedToTopic); the rest expire by commit time.
        subscribed = self.coordinator.consumer.subscribed_topic_names(group_id)
        expired = group.remove_expired_offsets(now_ms, retention_ms, subscribed)
        if expired:
            self._event("group_offsets_expired", group=group_id, partitions=[str(tp) for tp in expired])
        # A group with an open transaction's offsets stays: its COMMIT marker is still to find it.
        dead = (
            group.is_(GroupState.EMPTY)
            and not group.offsets
            and not group.pending_members
            and not group.pending_txn_offsets
        )
        if dead:
            self.coordinator.remove_group(group, "empty group without offsets")
        return expired, dead


class GroupMetadataManager:
    """The ``__consumer_offsets`` partitions one broker leads, and the groups in them. See the module doc."""

    def __init__(
        self,
        broker_id: int,
        config: Any,
        coordinator: GroupCoordinator,
        replica_manager: Any,
        *,
        clock: Any,
        set_timer: Callable[[int, Callable[[int], None]], int],
        log_event: Callable[..., None],
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.num_partitions: int = config.offsets_topic_num_partitions
        self.coordinator = coordinator
        self.rm = replica_manager
        self.clock = clock
        self._set_timer = set_timer
        self._log_event = log_event
        self.owned: set[int] = set()
        """Offsets partitions this broker leads and has loaded: their groups are served."""
        self.loading: set[int] = set()
        self._load_generation: dict[int, int] = {}
        self.stopped = False
        self._retention_timer_started = False
        coordinator.store = self

    def shutdown(self) -> None:
        """Clean broker shutdown: serve nothing more, write nothing more."""
        self.stopped = True
        self.owned.clear()
        self.loading.clear()
        self.coordinator.shutdown()

    # ----------------------------------------------------------------------------------- placement
    def partition_for(self, group_id: str) -> int:
        return coordinator_partition(group_id, self.num_partitions)

    def topic_partition(self, group_id: str) -> TopicPartition:
        return TopicPartition(OFFSETS_TOPIC, self.partition_for(group_id))

    def ownership_error(self, group_id: str) -> int:
        """NO_ERROR if this broker serves ``group_id`` now, else COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR."""
        p = self.partition_for(group_id)
        if p in self.loading:
            return CoordinatorLoadInProgressError.code
        if p not in self.owned:
            return NotCoordinatorError.code
        return NO_ERROR

    def groups_in(self, partition: int) -> list[str]:
        """The classic and consumer groups of ``partition`` this coordinator holds."""
        ids = set(self.coordinator.groups) | set(self.coordinator.consumer.groups)
        return sorted(g for g in ids if self.partition_for(g) == partition)

    # ----------------------------------------------------------------------------------- leadership
    def on_leadership_change(self, elected: list[TopicPartition], resigned: list[TopicPartition]) -> None:
        for tp in resigned:
            if tp.topic == OFFSETS_TOPIC:
                self._resign(tp.partition)
        for tp in elected:
            if tp.topic == OFFSETS_TOPIC:
                self._elect(tp.partition)

    def _elect(self, p: int) -> None:
        if self.stopped or p in self.owned or p in self.loading:
            return  # still leading since the last load (a new epoch of the same leader): memory is current
        self.loading.add(p)
        gen = self._load_generation.get(p, 0) + 1
        self._load_generation[p] = gen
        self._log_event("offsets_partition_loading", partition=p)
        self._set_timer(0, lambda _now: self._load(p, gen))

    def _resign(self, p: int) -> None:
        was = p in self.owned or p in self.loading
        self.owned.discard(p)
        self.loading.discard(p)
        self._load_generation[p] = self._load_generation.get(p, 0) + 1  # a pending load is void
        groups = self.groups_in(p)
        for gid in groups:
            self.coordinator.unload_group(gid)
        if was:
            self._log_event("offsets_partition_unloaded", partition=p, groups=groups)

    def _load(self, p: int, gen: int) -> None:
        if self._load_generation.get(p) != gen or p not in self.loading:
            return
        tp = TopicPartition(OFFSETS_TOPIC, p)
        part = self.rm.partition_or_none(tp)
        if part is None or not part.is_leader:
            self.loading.discard(p)
            return
        consumer = ConsumerGroupReplay()
        groups = read_groups(part.log, log_event=self._log_event, consumer=consumer)
        for group in groups.values():
            self.coordinator.load_group(group)
        topics = self.coordinator.consumer.topics()
        names = {self.coordinator.consumer.topic_id(t): t for t in topics}
        for cg in consumer.groups(names, self._log_event).values():
            self.coordinator.consumer.load_group(cg, consumer.image(cg.group_id))
        self.loading.discard(p)
        self.owned.add(p)
        if not self._retention_timer_started:
            # Started with the first partition led (Kafka starts it with the broker): a broker that never
            # coordinates a group has nothing to expire, and its timers stay exactly as before groups existed.
            self._retention_timer_started = True
            self._set_timer(self.config.offsets_retention_check_interval_ms, self._retention_check)
        self._log_event(
            "offsets_partition_loaded",
            partition=p,
            groups=sorted(set(groups) | set(consumer.groups({}))),
            log_end_offset=part.log_end_offset,
        )

    # ----------------------------------------------------------------------------------- writes
    def _append(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        acks: int,
        done: Done,
        producer: tuple[int, int] | None = None,
    ) -> None:
        tp = self.topic_partition(group_id)
        if self.stopped or tp.partition not in self.owned:
            done(NotLeaderOrFollowerError.code)
            return
        batch = build_batch(records, timestamp=self.clock.now_ms())
        if producer is not None:
            batch = bytes(
                set_producer_fields(bytearray(batch), producer[0], producer[1], -1, transactional=True)
            )
        self.rm.append_records(
            tp,
            batch,
            lambda resp: done(resp.error_code),
            acks=acks,
            timeout_ms=self.config.offsets_commit_timeout_ms,
        )

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        done: Done,
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Append one offset commit record per partition; ``done`` gets the OffsetCommit error code.
        ``producer`` (id, epoch): a transactional commit, written as that producer's transactional batch."""
        records = [
            (
                encode_offset_commit_key(group.group_id, tp.topic, tp.partition),
                encode_offset_commit_value(
                    OffsetCommitValue(om.offset, om.leader_epoch, om.metadata or "", om.commit_timestamp_ms)
                ),
            )
            for tp, om in sorted(offsets.items())
        ]
        acks = self.config.offsets_commit_required_acks
        self._append(group.group_id, records, acks, lambda code: done(offset_commit_error(code)), producer)

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes], done: Done) -> None:
        """Append the group's metadata record (members, generation, assignment)."""
        value = group_metadata_value(group, assignment)
        records = [(encode_group_metadata_key(group.group_id), encode_group_metadata_value(value))]
        acks = self.config.offsets_commit_required_acks
        self._append(group.group_id, records, acks, lambda code: done(store_group_error(code)))

    def store_consumer_group_records(
        self, group_id: str, records: list[tuple[bytes, bytes | None]], done: Done
    ) -> None:
        """Append a consumer group's records (``consumer_group_records``); ``done`` gets the heartbeat's error."""
        acks = self.config.offsets_commit_required_acks
        self._append(group_id, records, acks, lambda code: done(consumer_group_write_error(code)))

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, committed: bool) -> None:
        """A COMMIT/ABORT marker reached ``tp`` of ``__consumer_offsets``: the producer's transactional
        offsets for the groups of that partition count now (commit) or never (abort)."""
        if tp.topic != OFFSETS_TOPIC:
            return
        for gid in self.groups_in(tp.partition):
            self.coordinator.offset_manager.complete_txn_offsets(gid, producer_id, committed)

    def delete_groups(self, group_ids: tuple[str, ...]) -> dict[str, int]:
        """DeleteGroups: each Empty group this broker coordinates goes, with tombstones for its metadata and
        offsets (written as Kafka writes them, without waiting for the ISR). group id -> error code."""
        out: dict[str, int] = {}
        for gid in group_ids:
            code = InvalidGroupIdError.code if not gid else self.ownership_error(gid)
            consumer = self.coordinator.consumer.groups.get(gid) if code == NO_ERROR else None
            if consumer is not None:
                # A KIP-848 group: only an empty one goes, its records tombstoned; then its offsets below.
                if consumer.members:
                    out[gid] = NonEmptyGroupError.code
                    continue
                self.coordinator.consumer.delete_empty_group(gid, deleted=True)
                if gid not in self.coordinator.groups:
                    out[gid] = NO_ERROR
                    continue
            if code == NO_ERROR:
                group = self.coordinator.groups.get(gid)
                code = self.coordinator.delete_group(gid)
                if code == NO_ERROR and group is not None:
                    removed = group.remove_all_offsets()
                    tombstones: list[tuple[bytes, bytes | None]] = [
                        (encode_offset_commit_key(gid, tp.topic, tp.partition), None) for tp in removed
                    ]
                    tombstones.append((encode_group_metadata_key(gid), None))
                    self._log_event("group_deleted", group=gid, partitions=[str(tp) for tp in removed])
                    self._append(gid, tombstones, 0, lambda _code: None)
            out[gid] = code
        return out

    def on_partitions_deleted(self, tps: list[TopicPartition]) -> None:
        """Their topic was deleted: the groups this broker coordinates forget offsets committed for them
        (tombstones), as Kafka's coordinator does on ``onPartitionsDeleted``."""
        gone = set(tps)
        for p in sorted(self.owned):
            for gid in self.groups_in(p):
                removed = self.coordinator.offset_manager.remove_offsets(gid, gone)
                if removed:
                    tombstones: list[tuple[bytes, bytes | None]] = [
                        (encode_offset_commit_key(gid, tp.topic, tp.partition), None) for tp in removed
                    ]
                    self._log_event("offsets_deleted", group=gid, partitions=[str(tp) for tp in removed])
                    self._append(gid, tombstones, 0, lambda _code: None)

    # ----------------------------------------------------------------------------------- retention
    def _retention_check(self, now_ms: int) -> None:
        if self.stopped:
            return
        self._set_timer(self.config.offsets_retention_check_interval_ms, self._retention_check)
        self.cleanup_expired(now_ms)

    def cleanup_expired(self, now_ms: int | None = None) -> dict[str, list[TopicPartition]]:
        """Remove expired offsets (and groups left with nothing), appending tombstones for them."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        retention_ms = self.config.offsets_retention_minutes * 60_000
        removed: dict[str, list[TopicPartition]] = {}
        for p in sorted(self.owned):
            for gid in self.groups_in(p):
                expired, dead = self.coordinator.offset_manager.remove_expired_offsets(gid, now, retention_ms)
                if not expired and not dead:
                    continue
                removed[gid] = expired
                tombstones: list[tuple[bytes, bytes | None]] = [
                    (encode_offset_commit_key(gid, tp.topic, tp.partition), None) for tp in expired
                ]
                if dead:
                    tombstones.append((encode_group_metadata_key(gid), None))
                self._log_event(
                    "offsets_expired", group=gid, partitions=[str(tp) for tp in expired], group_removed=dead
                )
                # Kafka writes these without waiting for the ISR (acks=0): they only shorten the log.
                self._append(gid, tombstones, 0, lambda _code: None)
        return removed


# ------------------------------------------------------------------------------------------ helpers
def group_metadata_value(group: GroupMetadata, assignment: dict[str, bytes]) -> GroupMetadataValue:
    """The record Kafka writes for a group: generation, protocol, leader and every member's share."""
    members = tuple(
        MemberMetadataValue(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name) if group.protocol_name else b"",
            assignment=assignment.get(m.member_id, b""),
        )
        for m in group.members.values()
    )
    return GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=group.state_timestamp_ms,
        members=members,
    )


def group_from_value(group_id: str, value: GroupMetadataValue) -> GroupMetadata:
    """A group as a new coordinator rebuilds it: Stable with its members, or Empty."""
    group = GroupMetadata(
        group_id,
        state=GroupState.STABLE if value.members else GroupState.EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader,
        state_timestamp_ms=value.current_state_timestamp,
    )
    for m in value.members:
        member = MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout,
            session_timeout_ms=m.session_timeout,
            protocol_type=value.protocol_type,
            protocols=((value.protocol or "", m.subscription),),
            assignment=m.assignment,
        )
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    return group


def _offsets_records(log: Any, end: int | None, pending: dict | None):
    """The records of a ``__consumer_offsets`` log that count: transactional offsets of an aborted
    transaction are dropped; those of a transaction still open go to ``pending`` (by producer id, as
    ``(key, value)`` pairs) instead, to count once its marker comes."""
    if not hasattr(log, "read"):  # a log-like object with records only (no batches, no transactions)
        yield from log.iter_records(None, end)
        return
    aborted = [
        (a.producer_id, a.first_offset, a.last_offset) for a in getattr(log, "aborted_transactions", ())
    ]
    state = getattr(log, "producer_state", None)
    open_first = {}
    if state is not None:
        open_first = {
            pid: e.txn_first_offset for pid, e in state.producers.items() if e.txn_first_offset >= 0
        }
    offset = log.log_start_offset
    end = log.log_end_offset if end is None else end
    while offset < end:
        batches = list(log.read(offset, 1 << 20, max_offset=end).records.batches())
        if not batches:
            return
        for batch in batches:
            h = batch.header
            offset = max(offset, h.next_offset)
            if h.is_control:
                continue
            pid = h.producer_id
            if h.is_transactional and pid >= 0:
                if any(p == pid and first <= h.base_offset <= last for p, first, last in aborted):
                    continue
                if pid in open_first and h.base_offset >= open_first[pid]:
                    if pending is not None:
                        pending.setdefault(pid, []).extend((r.key, r.value) for r in batch.records)
                    continue
            yield from (r for r in batch.records if r.offset < end)


def read_offsets_log(
    log: Any,
    end: int | None = None,
    *,
    log_event: Callable[..., None] | None = None,
    pending: dict | None = None,
    consumer: ConsumerGroupReplay | None = None,
) -> tuple[dict[str, GroupMetadataValue], dict[str, dict[TopicPartition, OffsetAndMetadata]]]:
    """Replay a ``__consumer_offsets`` log: the last value per key wins, tombstones delete.

    Returns (group metadata by group, committed offsets by group). Unreadable records are skipped and
    reported through ``log_event`` (``offsets_record_skipped``). Offsets of open transactions go into
    ``pending`` (producer id -> records), those of aborted ones nowhere. The records of KIP-848 consumer
    groups go to ``consumer`` (skipped without one)."""
    metadata: dict[str, GroupMetadataValue] = {}
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    for rec in _offsets_records(log, end, pending):
        try:
            if rec.key is None:
                raise KafkaError("record without a key")
            key = decode_key(rec.key)
            value = decode_value(key, rec.value)
        except KafkaError as e:
            if log_event is not None:
                log_event("offsets_record_skipped", offset=rec.offset, error=str(e))
            continue
        if not isinstance(key, OffsetCommitKey | GroupMetadataKey):
            if consumer is not None:
                consumer.replay(key, value)  # type: ignore[arg-type]
            continue
        if isinstance(key, GroupMetadataKey):
            if value is None:
                metadata.pop(key.group, None)
            else:
                assert isinstance(value, GroupMetadataValue)
                metadata[key.group] = value
        else:
            assert isinstance(key, OffsetCommitKey)
            tp = TopicPartition(key.topic, key.partition)
            if value is None:
                group_offsets = offsets.get(key.group)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
                    if not group_offsets:
                        del offsets[key.group]
            else:
                assert isinstance(value, OffsetCommitValue)
                offsets.setdefault(key.group, {})[tp] = OffsetAndMetadata(
                    offset=value.offset,
                    leader_epoch=value.leader_epoch,
                    metadata=value.metadata,
                    commit_timestamp_ms=value.commit_timestamp,
                )
    return metadata, offsets


def read_groups(
    log: Any, *, log_event: Callable[..., None] | None = None, consumer: ConsumerGroupReplay | None = None
) -> dict[str, GroupMetadata]:
    """Every group in a ``__consumer_offsets`` log, rebuilt (a group with offsets but no metadata is an Empty
    group with no protocol type: a consumer that only commits, or the offsets of a KIP-848 consumer group,
    whose own records go to ``consumer``)."""
    pending: dict[int, list] = {}
    metadata, offsets = read_offsets_log(log, log_event=log_event, pending=pending, consumer=consumer)
    groups: dict[str, GroupMetadata] = {}
    for gid in sorted(set(metadata) | set(offsets)):
        value = metadata.get(gid)
        group = group_from_value(gid, value) if value is not None else GroupMetadata(gid)
        group.offsets = dict(sorted(offsets.get(gid, {}).items()))
        groups[gid] = group
    for pid, records in pending.items():
        for key_bytes, value_bytes in records:
            try:
                key = decode_key(key_bytes)
                value = decode_value(key, value_bytes)
            except KafkaError:
                continue
            if isinstance(key, OffsetCommitKey) and isinstance(value, OffsetCommitValue):
                group = groups.setdefault(key.group, GroupMetadata(key.group))
                group.pending_txn_offsets.setdefault(pid, {})[TopicPartition(key.topic, key.partition)] = (
                    OffsetAndMetadata(
                        value.offset, value.leader_epoch, value.metadata, value.commit_timestamp
                    )
                )
    return groups


__all__ = [
    "GROUP_METADATA_TOPIC_NAME",
    "OFFSETS_TOPIC",
    "OFFSET_METADATA_TOO_LARGE",
    "Done",
    "GroupMetadataManager",
    "GroupStore",
    "OffsetMetadataManager",
    "consumer_group_write_error",
    "group_from_value",
    "group_metadata_value",
    "offset_commit_error",
    "offsets_topic",
    "read_groups",
    "read_offsets_log",
    "store_group_error",
]
