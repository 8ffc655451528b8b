"""JBOD in KRaft mode (KIP-858, issue 28): a broker with several log dirs registers their ids, tells the
controller where each replica lives (AssignReplicasToDirs), and reports a failed dir in its heartbeat; the
controller then moves only that dir's partitions to other leaders. Before KIP-858 (Kafka 3.6) the
broker never said a word: its leaders in the failed dir stayed put and acks=all produce to them timed out.
"""

from __future__ import annotations

import errno

from kafkalite.host.kraft_cluster import KRaftCluster
from kafkalite.protocol import TopicPartition
from kafkalite.storage.file_ops import DiskFaults

CONFIG = {"replica.lag.time.max.ms": 1000}
PRODUCER = {"acks": "all", "linger.ms": 1, "request.timeout.ms": 2500, "delivery.timeout.ms": 60_000}
PARTITIONS = 6


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
        img = c.image()
        assert bad_id not in img.brokers[b].directories and len(img.brokers[b].directories) == 1
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
