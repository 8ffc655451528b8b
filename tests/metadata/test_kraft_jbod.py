"""JBOD in KRaft mode (KIP-858, issue 28): a broker with several log dirs registers their ids, tells the
controller where each replica lives (AssignReplicasToDirs), and reports a failed dir in its heartbeat; the
controller then moves only that dir's partitions to other leaders. Before KIP-858 (Kafka 3.6) the
broker never said a word: its leaders in the failed dir stayed put and acks=all produce to them timed out.
"""

from __future__ import annotations

import errno
import random
import uuid

from kafkalite.host.kraft_cluster import KRaftCluster
from kafkalite.metadata.controller.replication_control import ReplicationControlManager, default_dir
from kafkalite.metadata.delta import replay_all
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.placement import assign_replicas
from kafkalite.metadata.records import (
    DIR_LOST,
    DIR_UNASSIGNED,
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.broker_lifecycle import (
    AssignDirectory,
    AssignPartition,
    AssignReplicasToDirsRequest,
    AssignTopic,
)
from kafkalite.protocol.metadata import CreatableTopic
from kafkalite.storage.file_ops import DiskFaults
from tests.metadata.kraft_harness import ManualTimers

CONFIG = {"replica.lag.time.max.ms": 1000}
PRODUCER = {"acks": "all", "linger.ms": 1, "request.timeout.ms": 2500, "delivery.timeout.ms": 60_000}
PARTITIONS = 6


# ------------------------------------------------------------------------- the controller's handling
TID = uuid.UUID(int=77)
DIRS = {b: (uuid.UUID(int=1000 + 10 * b), uuid.UUID(int=1001 + 10 * b)) for b in (1, 2, 3)}


def _image() -> MetadataImage:
    """Brokers 1-3 with two dirs each; partition p led by broker 1, its replica there in dir p % 2."""
    records: list = [
        RegisterBrokerRecord(broker_id=b, broker_epoch=b, log_dirs=DIRS[b], fenced=False) for b in (1, 2, 3)
    ]
    records.append(TopicRecord(name="t", topic_id=TID))
    for p in range(4):
        records.append(
            PartitionRecord(
                partition_id=p, topic_id=TID, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1,
                leader_epoch=0, partition_epoch=0,
                directories=(DIRS[1][p % 2], DIRS[2][0], DIRS[3][1]),
            )
        )  # fmt: skip
    return replay_all(records)


def _rcm() -> ReplicationControlManager:
    return ReplicationControlManager(assign_replicas, random.Random(1))


def test_an_offline_dir_takes_its_replicas_out_of_the_isr_and_moves_only_their_leadership():
    img = _image()
    records = _rcm().handle_directories_offline(img, 1, 1, [DIRS[1][0]])
    changes = [r for r in records if isinstance(r, PartitionChangeRecord)]
    assert sorted(r.partition_id for r in changes) == [0, 2], "only the partitions in the failed dir"
    for r in changes:
        assert r.isr == (2, 3) and r.leader == 2, r
    assert records[-1] == BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, log_dirs=(DIRS[1][1],))
    after = replay_all(records, img)
    assert after.brokers[1].directories == (DIRS[1][1],)
    t = after.topic("t")
    assert t is not None
    assert [t.partitions[p].leader for p in range(4)] == [2, 1, 2, 1]
    assert t.partitions[0].directories == img.topic("t").partitions[0].directories, "dirs stay recorded"
    # a heartbeat that reports the same dir again changes nothing
    assert _rcm().handle_directories_offline(after, 1, 1, [DIRS[1][0]]) == []
    # a replica in an offline dir may not lead even a preferred election
    rec, _ = _rcm().elect_leader(after, TopicPartition("t", 0), 0)
    assert rec is None


def test_assign_replicas_to_dirs_records_the_dir_and_an_offline_one_means_offline():
    img = _image()
    req = AssignReplicasToDirsRequest(
        broker_id=1,
        broker_epoch=1,
        directories=(
            AssignDirectory(
                id=DIRS[1][1],
                topics=(AssignTopic(topic_id=TID, partitions=(AssignPartition(partition_index=0),)),),
            ),
            AssignDirectory(
                id=DIRS[1][0],
                topics=(
                    AssignTopic(topic_id=uuid.UUID(int=5), partitions=(AssignPartition(partition_index=0),)),
                ),
            ),
        ),
    )
    records, resp = _rcm().assign_replicas_to_dirs(img, req)
    assert records == [
        PartitionChangeRecord(
            partition_id=0,
            topic_id=TID,
            leader=NO_LEADER_CHANGE,
            directories=(DIRS[1][1], DIRS[2][0], DIRS[3][1]),
        )
    ]
    codes = [p.error_code for d in resp.directories for t in d.topics for p in t.partitions]
    assert codes == [0, 100], "UNKNOWN_TOPIC_ID for a topic the controller does not know"
    after = replay_all(records, img)
    assert after.topic("t").partitions[0].directory(1) == DIRS[1][1]
    # dir 1 of broker 1 is offline; assigning a replica there takes it out of the ISR
    offline = replay_all(_rcm().handle_directories_offline(after, 1, 1, [DIRS[1][0]]), after)
    req2 = AssignReplicasToDirsRequest(
        broker_id=1,
        broker_epoch=1,
        directories=(
            AssignDirectory(
                id=DIRS[1][0],
                topics=(AssignTopic(topic_id=TID, partitions=(AssignPartition(partition_index=1),)),),
            ),
        ),
    )
    records, _ = _rcm().assign_replicas_to_dirs(offline, req2)
    part = replay_all(records, offline).topic("t").partitions[1]
    assert part.directory(1) == DIRS[1][0] and 1 not in part.isr and part.leader == 2, part


def test_new_replicas_get_the_only_dir_or_stay_unassigned():
    one = replay_all(
        [RegisterBrokerRecord(broker_id=1, broker_epoch=0, log_dirs=(DIRS[1][0],), fenced=False)]
    )
    assert default_dir(one, 1) == DIRS[1][0]
    assert default_dir(_image(), 1) == DIR_UNASSIGNED and default_dir(_image(), 9) == DIR_UNASSIGNED
    records, _ = _rcm().create_topic(
        _image(), CreatableTopic(name="u", num_partitions=2, replication_factor=3)
    )
    parts = [r for r in records if isinstance(r, PartitionRecord)]
    assert parts and all(r.directories == (DIR_UNASSIGNED,) * 3 for r in parts)
    reg = _image().brokers[1]
    assert reg.has_online_dir(DIR_UNASSIGNED) and not reg.has_online_dir(DIR_LOST)


# ------------------------------------------------------------------------------------ the simulator
def _produce(c, producer, keys, acked: dict[int, tuple[int, int]], errors: list) -> None:
    for i in keys:

        def cb(md, err, i=i):
            if err is None:
                acked[i] = (md.partition, md.offset)
            else:
                errors.append((i, err))

        producer.send("t", value=b"v%d" % i, partition=i % PARTITIONS, callback=cb)
        c.run_for(5)


def _values(c: KRaftCluster) -> set[bytes]:
    return {r.value for recs in c.read_all("t").values() for r in recs}


def test_kraft_brokers_register_their_dirs_and_assign_every_replica_to_one():
    c = KRaftCluster(3, 3, seed=11, log_dirs_per_broker=2, config=CONFIG)
    try:
        c.create_topic("t", PARTITIONS, 3)
        img = c.image()
        for b, node in c.brokers.items():
            assert sorted(node.dir_ids.values()) == list(img.brokers[b].directories), b
        t = img.topic("t")
        assert t is not None

        def assigned() -> bool:
            img = c.image()
            parts = img.topic("t").partitions  # type: ignore[union-attr]
            return all(
                parts[q].directory(b) == c.brokers[b].dir_ids[c.replica(b, "t", q).log.dir.parent]
                for q in range(PARTITIONS)
                for b in parts[q].replicas
            )

        assert c.run_until(assigned, 10_000), "every replica's registration names the dir holding its log"
        assert c.run_until(lambda: all(i == c.image() for i in c.broker_images().values()), 10_000)
    finally:
        c.close()


def test_a_failed_dir_moves_only_its_partitions_and_acks_all_produce_goes_on():
    faults = DiskFaults()
    c = KRaftCluster(3, 3, seed=12, log_dirs_per_broker=2, config=CONFIG, file_ops=faults)
    try:
        c.create_topic("t", PARTITIONS, 3, config={"min.insync.replicas": 2})
        b = c.leader("t", 0)
        assert b is not None
        node = c.brokers[b]
        led = [q for q in range(PARTITIONS) if c.leader("t", q) == b]
        bad_dir = c.replica(b, "t", 0).log.dir.parent
        on_bad = {q for q in led if c.replica(b, "t", q).log.dir.parent == bad_dir}
        on_good = {q for q in range(PARTITIONS) if c.replica(b, "t", q).log.dir.parent != bad_dir}
        assert on_good & set(led), ("the broker leads partitions in both dirs", led, on_bad)
        bad_id = node.dir_ids[bad_dir]
        # the controller knows which replicas live in the dir that is about to fail
        assert c.run_until(
            lambda: all(c.partition_state("t", q).directory(b) == bad_id for q in on_bad), 10_000
        )
        producer = c.producer(config=PRODUCER)
        acked: dict[int, tuple[int, int]] = {}
        errors: list = []
        _produce(c, producer, range(100), acked, errors)
        faults.fail(errno.EIO, under=bad_dir, on_call=3)
        _produce(c, producer, range(100, 400), acked, errors)
        producer.flush()
        c.run_for(3000)
        assert c.net.is_up(b), "the broker has a good dir left: it keeps running"
        assert set(node.rm.offline_dirs) == {bad_dir}
        for q in on_bad:
            part = c.partition_state("t", q)
            assert part.leader not in (b, -1) and b not in part.isr, (q, part)
            assert node.rm.partition_or_none(TopicPartition("t", q)) is None
        for q in on_good:
            part = c.partition_state("t", q)
            assert b in part.isr, (q, part)
            if q in led:
                assert part.leader == b, ("a partition in the good dir stays led there", q, part)
        assert len(acked) == 400 and not errors, (len(acked), errors[:3])
        img = c.image()
        assert bad_id not in img.brokers[b].directories and len(img.brokers[b].directories) == 1
        values = _values(c)
        lost = sorted(i for i in acked if b"v%d" % i not in values)
        assert lost == [], lost
        assert c.run_until(lambda: all(i == c.image() for i in c.broker_images().values()), 10_000), (
            "every broker's replayed image agrees with the controller's"
        )
        # the disk replaced and the broker restarted: its dir registers again and its replicas rejoin
        faults.clear()
        c.crash(b)
        c.restart(b)
        assert c.run_until(lambda: all(len(c.isr("t", q)) == 3 for q in range(PARTITIONS)), 30_000)
        assert len(c.image().brokers[b].directories) == 2
        values = _values(c)
        assert all(b"v%d" % i in values for i in acked), "every acked record survives the restart"
    finally:
        c.close()


# ------------------------------------------------------------------------------- the broker's side
def _lifecycle(timers: ManualTimers, offline: list, fatal: list):
    from kafkalite.metadata.broker_lifecycle_manager import BrokerLifecycleManager

    lc = BrokerLifecycleManager(
        1, "c", (), rng=random.Random(1), send=lambda dst, env: timers.sent.append(env),
        set_timer=timers.set, cancel_timer=timers.cancel, controllers=lambda: (9, (9,)),
        metadata_offset=lambda: 5, heartbeat_interval_ms=2000, log_dirs=lambda: [DIRS[1][1]],
        offline_dirs=lambda: list(offline), dir_failure_timeout_ms=30_000, on_fatal=fatal.append,
    )  # fmt: skip
    lc.broker_epoch, lc.fenced = 3, False
    return lc


def test_a_failed_dir_goes_out_in_a_heartbeat_at_once_and_unacknowledged_it_halts_the_broker():
    from kafkalite.protocol.broker_lifecycle import BrokerHeartbeatResponse
    from kafkalite.protocol.envelope import ResponseEnvelope

    for answered in (True, False):
        timers, offline, fatal = ManualTimers(), [], []
        lc = _lifecycle(timers, offline, fatal)
        offline.append(DIRS[1][0])
        lc.heartbeat_now()
        timers.advance(1)
        hb = timers.sent[-1]
        assert hb.request.offline_log_dirs == (DIRS[1][0],), "the next heartbeat names the dir, at once"
        if answered:
            lc.on_response(9, ResponseEnvelope(hb.correlation_id, BrokerHeartbeatResponse(is_fenced=False)))
        else:
            lc._controllers = lambda: (None, (9,))  # the controllers are unreachable: nothing answers
        timers.advance(31_000)
        assert (fatal == []) is answered, (answered, fatal)
        assert all(e.request.offline_log_dirs == (DIRS[1][0],) for e in timers.sent[-2:]), "in every one"
