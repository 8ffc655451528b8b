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


def _copy_some(c: Cluster, app: str, stop_after: int, crash: bool, inputs: int) -> int:
    """One instance of a consume-transform-produce app (``group.protocol=consumer``): per poll, the records
    go to ``out`` and the consumer's offsets to the transaction. Stops after ``stop_after`` transactions,
    with the last one left open and the app crashed (it neither commits nor leaves) when ``crash``, or
    once the group's offsets cover the ``inputs``."""
    consumer = c.consumer(
        f"{app}-consumer", group_id="copy", group_protocol="consumer", isolation_level="read_committed",
        auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=4,
    )  # fmt: skip
    consumer.subscribe(["in"])
    producer = c.producer(f"{app}-producer", transactional_id="copier", linger_ms=0)
    producer.init_transactions()
    done = 0
    for _ in range(1000):
        if done == stop_after:
            break
        batch = consumer.poll(200)
        if not batch:
            if sum(c.group_offsets("copy").values()) == inputs:
                break
            continue
        producer.begin_transaction()
        for recs in batch.values():
            for r in recs:
                producer.send("out", r.value.upper(), key=r.key)
        meta = consumer.group_metadata()
        producer.send_offsets_to_transaction(
            {tp: recs[-1].offset + 1 for tp, recs in batch.items()}, "copy",
            generation_id=meta.generation_id, member_id=meta.member_id,
        )  # fmt: skip
        done += 1
        if crash and done == stop_after:
            # Its records reach the log, its transaction stays open: the next instance's producer aborts it.
            producer.flush()
            assert c.run_until(producer.idle, 10_000)
            c.net.crash(f"{app}-consumer")
            c.net.crash(f"{app}-producer")
            return done
        producer.commit_transaction()
    consumer.close()
    producer.close()
    return done


def test_a_consumer_protocol_app_copies_a_topic_exactly_once_across_its_crash(make_cluster) -> None:
    c = make_cluster(3, config=FAST)
    for topic in ("in", "out"):
        c.create_topic(topic, partitions=3, replication_factor=3)
    feeder = c.producer("feeder", linger_ms=0)
    inputs = [f"v{i:03d}".encode() for i in range(30)]
    for i, v in enumerate(inputs):
        feeder.send("in", v, key=str(i).encode())
    feeder.flush()
    assert c.run_until(feeder.idle, 30_000)

    assert _copy_some(c, "first", stop_after=3, crash=True, inputs=len(inputs)) == 3
    # The second instance takes over once the first one's session has expired; it starts from the
    # offsets of the first one's committed transactions, and its init_transactions aborted the open one.
    _copy_some(c, "second", stop_after=10_000, crash=False, inputs=len(inputs))
    assert sum(c.group_offsets("copy").values()) == len(inputs)

    reader = c.consumer("reader", isolation_level="read_committed", auto_offset_reset="earliest")
    reader.assign([TopicPartition("out", p) for p in range(3)])
    out: list[bytes] = []
    for _ in range(20):
        out += [r.value for recs in reader.poll(200).values() for r in recs]
    assert sorted(out) == sorted(v.upper() for v in inputs), "every input once in out, nothing aborted"
    everything = c.consumer("raw", isolation_level="read_uncommitted", auto_offset_reset="earliest")
    everything.assign([TopicPartition("out", p) for p in range(3)])
    raw: list[bytes] = []
    for _ in range(20):
        raw += [r.value for recs in everything.poll(200).values() for r in recs]
    assert len(raw) > len(out), "the crashed instance's open transaction wrote to out (and was aborted)"


def test_offset_retention_spares_offsets_pending_in_an_open_transaction(make_cluster) -> None:
    """Kafka keeps a partition's offset while a transaction has one pending for it, and does not remove a
    group with an open transaction's offsets: the transaction's COMMIT then finds its offsets' group."""
    from kafkalite.protocol.group import OffsetCommitRequest

    cfg = {**FAST, "offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 1000}
    c = make_cluster(3, config=cfg)
    c.create_topic("orders", partitions=6, replication_factor=1)
    r = join(c)
    commit = OffsetCommitRequest(
        group_id="g", generation_id=r.member_epoch, member_id=r.member_id,
        partitions=(OffsetCommitPartition(tp=TP, committed_offset=1),),
    )  # fmt: skip
    assert c.request(c.coordinator("g"), commit).partitions[0].error_code == 0
    producer = c.producer("app", transactional_id="slow", linger_ms=0, transaction_timeout_ms=600_000)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction({TP: 3}, "g", generation_id=r.member_epoch, member_id=r.member_id)
    producer.send_offsets_to_transaction({TP: 4}, "fresh")  # a group with no offset but this pending one
    # The member leaves (the group is empty); the transaction stays open longer than the retention.
    leave = ConsumerGroupHeartbeatRequest(group_id="g", member_id=r.member_id, member_epoch=-1)
    assert c.request(c.coordinator("g"), leave).error_code == 0
    c.run_for(90_000)
    assert c.group_offsets("g") == {TP: 1}, "an offset with a pending transactional one does not expire"
    producer.commit_transaction()
    assert c.group_offsets("g") == {TP: 3}
    assert c.group_offsets("fresh") == {TP: 4}, "the group of the open transaction's offsets stayed"


def test_a_refused_txn_offset_commit_leaves_a_transaction_that_can_only_abort(cluster: Cluster) -> None:
    """Kafka's abortable error: once the coordinator refuses the offsets (a member no longer in the group),
    committing would write the records without them, so commit_transaction fails; the abort works and the
    producer goes on with a new transaction."""
    r = join(cluster)
    producer = cluster.producer("app", transactional_id="copier", linger_ms=0)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("orders", b"x", partition=0)
    with pytest.raises(UnknownMemberIdError):
        producer.send_offsets_to_transaction({TP: 5}, "g", generation_id=r.member_epoch, member_id="gone")
    with pytest.raises(UnknownMemberIdError, match="must be aborted"):
        producer.commit_transaction()
    producer.abort_transaction()
    assert cluster.group_offsets("g") == {}
    producer.begin_transaction()
    producer.send("orders", b"y", partition=0)
    producer.send_offsets_to_transaction({TP: 6}, "g", generation_id=r.member_epoch, member_id=r.member_id)
    producer.commit_transaction()
    assert cluster.group_offsets("g") == {TP: 6}
    reader = cluster.consumer("reader", isolation_level="read_committed", auto_offset_reset="earliest")
    reader.assign([TopicPartition("orders", 0)])
    got: list[bytes] = []
    for _ in range(10):
        got += [rec.value for recs in reader.poll(200).values() for rec in recs]
    assert got == [b"y"], "the aborted transaction's record is not read"
