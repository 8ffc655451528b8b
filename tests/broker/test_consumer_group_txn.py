"""TxnOffsetCommit to a KIP-848 consumer group (Kafka's OffsetMetadataManager with ConsumerGroup's offset
commit check): the member id and member epoch of the consumer's group metadata are checked against the
group's members (UNKNOWN_MEMBER_ID; a wrong epoch is ILLEGAL_GENERATION, TxnOffsetCommit's name for
STALE_MEMBER_EPOCH), a commit carrying no group metadata is taken as from an old client, and the offsets
count once the transaction commits and are dropped when it aborts."""

from __future__ import annotations

import pytest

from kafkalite.client.consumer_coordinator import ConsumerGroupMetadata
from kafkalite.errors import IllegalGenerationError, UnknownMemberIdError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkalite.protocol.group import OffsetCommitPartition
from kafkalite.protocol.txn import TxnOffsetCommitRequest

FAST = {
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
}
TP = TopicPartition("orders", 2)


@pytest.fixture
def cluster(make_cluster) -> Cluster:
    c = make_cluster(3, config=FAST)
    c.create_topic("orders", partitions=6, replication_factor=1)
    return c


def join(c: Cluster, group: str = "g"):
    req = ConsumerGroupHeartbeatRequest(
        group_id=group, rebalance_timeout_ms=30_000, subscribed_topic_names=("orders",), topic_partitions=()
    )
    resp = c.request(c.coordinator(group), req)
    assert resp.error_code == 0, resp
    return resp


def txn_commit(c: Cluster, member_id: str, epoch: int, offset: int, instance: str | None = None) -> int:
    req = TxnOffsetCommitRequest(
        transactional_id="t", group_id="g", producer_id=4000, producer_epoch=0, generation_id=epoch,
        member_id=member_id, group_instance_id=instance,
        partitions=(OffsetCommitPartition(tp=TP, committed_offset=offset),),
    )  # fmt: skip
    return c.request(c.coordinator("g"), req).partitions[0].error_code


def test_txn_offset_commit_checks_the_member_and_its_epoch(cluster: Cluster) -> None:
    r = join(cluster)
    assert txn_commit(cluster, r.member_id, r.member_epoch, 10) == 0
    # A stale epoch is ILLEGAL_GENERATION here (TxnOffsetCommit never answers STALE_MEMBER_EPOCH).
    assert txn_commit(cluster, r.member_id, r.member_epoch - 1, 11) == IllegalGenerationError.code
    assert txn_commit(cluster, r.member_id, r.member_epoch + 1, 12) == IllegalGenerationError.code
    assert txn_commit(cluster, "stranger", r.member_epoch, 13) == UnknownMemberIdError.code
    # No member id, no epoch and no instance id: an old client (TxnOffsetCommit before v3), accepted.
    assert txn_commit(cluster, "", -1, 14) == 0
    # A member id or an instance id without an epoch is checked, and fails.
    assert txn_commit(cluster, r.member_id, -1, 15) == IllegalGenerationError.code
    assert txn_commit(cluster, "", -1, 16, instance="i-1") == UnknownMemberIdError.code


def test_txn_offsets_of_a_member_count_on_commit_and_go_on_abort(cluster: Cluster) -> None:
    r = join(cluster)
    meta = ConsumerGroupMetadata("g", r.member_epoch, r.member_id, None)
    producer = cluster.producer("app", transactional_id="copier", linger_ms=0)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction({TP: 7}, "g", generation_id=r.member_epoch, member_id=r.member_id)
    producer.commit_transaction()
    assert cluster.group_offsets("g") == {TP: 7}

    producer.begin_transaction()
    producer.send_offsets_to_transaction({TP: 9}, meta)
    producer.abort_transaction()
    assert cluster.group_offsets("g") == {TP: 7}

    producer.begin_transaction()
    with pytest.raises(IllegalGenerationError):
        producer.send_offsets_to_transaction({TP: 11}, meta._replace(generation_id=r.member_epoch + 1))
    producer.abort_transaction()
    assert cluster.group_offsets("g") == {TP: 7}
