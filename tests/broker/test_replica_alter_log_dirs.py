"""Several log dirs per broker (JBOD, issue 29): where new partitions go, DescribeLogDirs, and moving a
replica between dirs with AlterReplicaLogDirs (KIP-113) while it serves, across a crash, losing nothing
acknowledged."""

from __future__ import annotations

import contextlib
import errno
import shutil

import pytest

from kafkalite.errors import KafkaStorageError, LogDirNotFoundError, ReplicaNotAvailableError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import NO_ERROR, TopicPartition
from kafkalite.storage.file_ops import DiskFaults

CONFIG = {"zookeeper.session.timeout.ms": 1500, "replica.lag.time.max.ms": 1000}
PRODUCER = {"acks": "all", "linger.ms": 1, "request.timeout.ms": 2500, "delivery.timeout.ms": 60_000}
T0 = TopicPartition("t", 0)


def _dir_counts(c: Cluster, b: int) -> dict:
    rm = c.brokers[b].rm
    counts = {d: 0 for d in rm.log_dirs}
    for p in rm.partitions():
        counts[p.log.dir.parent] += 1
    return counts


def _produce(c, producer, values, acked, errors, step_ms=5):
    def cb(i):
        def done(md, err):
            if err is None:
                acked[i] = md.offset
            else:
                errors.append((i, err))

        return done

    for i in values:
        producer.send("t", b"v%d" % i, callback=cb(i))
        c.run_for(step_ms)


def _other_dir(c: Cluster, b: int, tp: TopicPartition = T0):
    rm = c.brokers[b].rm
    here = rm.partition(tp).log.dir.parent
    return here, next(d for d in rm.log_dirs if d != here)


def _values(log) -> list[bytes]:
    return [r.value for r in log.iter_records()]


# ------------------------------------------------------------------------------------------ placement


def test_a_new_partition_goes_to_the_dir_with_fewest_partitions(make_cluster):
    c = make_cluster(1, seed=1, log_dirs_per_broker=3, config=CONFIG)
    c.create_topic("a", 4, 1)
    assert sorted(_dir_counts(c, 1).values()) == [1, 1, 2], "four partitions over three dirs: 2, 1, 1"
    c.create_topic("b", 2, 1)
    assert sorted(_dir_counts(c, 1).values()) == [2, 2, 2], "the two new ones went to the emptier dirs"


# ------------------------------------------------------------------------------------ DescribeLogDirs


def test_describe_log_dirs_lists_each_dir_its_replicas_and_an_offline_dir_as_storage_error(make_cluster):
    faults = DiskFaults()
    c = make_cluster(1, seed=2, log_dirs_per_broker=2, config=CONFIG, file_ops=faults)
    c.create_topic("t", 4, 1)
    producer = c.producer(config={"acks": 1, "linger.ms": 1})
    for i in range(40):
        producer.send("t", b"x" * 100, partition=i % 4)
    producer.flush()
    c.run_for(200)
    rm = c.brokers[1].rm
    resp = c.describe_log_dirs(1)
    assert [r.log_dir for r in resp.results] == [str(d) for d in rm.log_dirs]
    seen = {}
    for r in resp.results:
        assert r.error_code == NO_ERROR and r.total_bytes > 0 and 0 <= r.usable_bytes <= r.total_bytes
        for e in r.partitions:
            seen[e.tp] = (r.log_dir, e)
    assert sorted(seen) == [TopicPartition("t", q) for q in range(4)]
    for tp, (d, e) in seen.items():
        log = rm.partition(tp).log
        assert d == str(log.dir.parent) and e.partition_size == log.size_bytes > 0
        assert e.offset_lag == 0 and not e.is_future
    only = c.describe_log_dirs(1, [TopicPartition("t", 1)])
    assert [e.tp for r in only.results for e in r.partitions] == [TopicPartition("t", 1)]
    # one dir fails: DescribeLogDirs says KAFKA_STORAGE_ERROR for it and still lists the other
    bad = rm.partition(TopicPartition("t", 0)).log.dir.parent
    faults.fail(errno.EIO, under=bad)
    producer.send("t", b"y", partition=0)
    producer.flush()
    c.run_for(500)
    after = {r.log_dir: r for r in c.describe_log_dirs(1).results}
    assert after[str(bad)].error_code == KafkaStorageError.code and not after[str(bad)].partitions
    good = next(d for d in after if d != str(bad))
    assert after[good].error_code == NO_ERROR and after[good].partitions


# -------------------------------------------------------------------------------- AlterReplicaLogDirs


def test_alter_replica_log_dirs_errors_are_kafkas(make_cluster):
    faults = DiskFaults()
    c = make_cluster(1, seed=3, log_dirs_per_broker=3, config=CONFIG, file_ops=faults)
    c.create_topic("t", 1, 1)
    rm = c.brokers[1].rm
    here, there = _other_dir(c, 1)
    assert c.alter_replica_log_dirs(1, {T0: "/no/such/dir"}) == {T0: LogDirNotFoundError.code}
    assert c.alter_replica_log_dirs(1, {T0: here}) == {T0: NO_ERROR}, "already there: nothing to do"
    assert not rm.alter_log_dirs.futures
    # A replica this broker does not host yet: REPLICA_NOT_AVAILABLE, and it is created in that dir later.
    later = TopicPartition("later", 0)
    assert c.alter_replica_log_dirs(1, {later: there}) == {later: ReplicaNotAvailableError.code}
    c.create_topic("later", 1, 1)
    assert rm.partition(later).log.dir.parent == there, "the preferred dir was kept for the new replica"
    # A move sent back to where the replica is cancels the copy, and its future log is deleted.
    assert c.alter_replica_log_dirs(1, {T0: there}) == {T0: NO_ERROR}
    future_dir = rm.alter_log_dirs.futures[T0].dir
    assert future_dir.parent == there and future_dir.is_dir()
    assert c.alter_replica_log_dirs(1, {T0: here}) == {T0: NO_ERROR}
    assert not rm.alter_log_dirs.futures and not future_dir.exists()
    # An offline target dir: KAFKA_STORAGE_ERROR.
    third = next(d for d in rm.log_dirs if d not in (here, there))
    faults.fail(errno.EIO, under=third)
    rm.failure_channel.maybe_add_offline_log_dir(third, "test", OSError(errno.EIO, "I/O error"))
    c.run_for(100)
    assert c.alter_replica_log_dirs(1, {T0: third}) == {T0: KafkaStorageError.code}
    # No future log is created while any dir is offline (the partition might have one there): as Kafka.
    assert c.alter_replica_log_dirs(1, {T0: there}) == {T0: KafkaStorageError.code}
    assert not rm.alter_log_dirs.futures


def test_a_replica_moves_to_another_dir_while_acks_all_produce_goes_on_and_loses_nothing(make_cluster):
    # A small copy step so the move takes many ticks, with the producer writing all along.
    c = make_cluster(3, seed=4, log_dirs_per_broker=2, config={**CONFIG, "replica.fetch.max.bytes": 2048})
    c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
    b = c.leader("t", 0)
    producer = c.producer(config=PRODUCER)
    acked: dict[int, int] = {}
    errors: list = []
    _produce(c, producer, range(300), acked, errors)
    source, target = _other_dir(c, b)
    assert c.alter_replica_log_dirs(b, {T0: target}) == {T0: NO_ERROR}
    rm = c.brokers[b].rm
    fut = rm.alter_log_dirs.futures[T0]
    assert fut.dir.parent == target and fut.dir.name.endswith("-future")
    c.run_for(20)
    during = {r.log_dir: r for r in c.describe_log_dirs(b).results}
    (future_entry,) = during[str(target)].partitions
    assert future_entry.is_future and future_entry.offset_lag > 0, future_entry
    _produce(c, producer, range(300, 600), acked, errors)
    producer.flush()
    assert c.run_until(lambda: not rm.alter_log_dirs.futures, 30_000), "the move finished"
    _produce(c, producer, range(600, 700), acked, errors)
    producer.flush()
    c.run_for(1000)
    assert not errors and len(acked) == 700
    log = rm.partition(T0).log
    assert log.dir == target / "t-0" and not (source / "t-0").exists()
    assert c.events("log_dir_moved", node=b)
    assert c.leader("t", 0) == b and b in c.isr("t", 0), "it led the partition all along"
    values = _values(log)
    assert sorted(values) == sorted(b"v%d" % i for i in range(700)), "every acknowledged record, once"
    assert [values.index(b"v%d" % i) for i in sorted(acked)] == [acked[i] for i in sorted(acked)]
    c.run_for(61_000)  # file.delete.delay.ms
    assert not [e for e in source.iterdir() if e.name.startswith("t-0")], "the old log was deleted"


def test_a_broker_crashing_mid_move_resumes_the_move_on_restart_and_loses_nothing(make_cluster):
    c = make_cluster(3, seed=5, log_dirs_per_broker=2, config={**CONFIG, "replica.fetch.max.bytes": 1024})
    c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
    b = c.leader("t", 0)
    producer = c.producer(config=PRODUCER)
    acked: dict[int, int] = {}
    errors: list = []
    _produce(c, producer, range(400), acked, errors)
    source, target = _other_dir(c, b)
    assert c.alter_replica_log_dirs(b, {T0: target}) == {T0: NO_ERROR}
    rm = c.brokers[b].rm
    assert c.run_until(lambda: rm.alter_log_dirs.futures[T0].log_end_offset > 0, 1000)
    copied = rm.alter_log_dirs.futures[T0].log_end_offset
    assert 0 < copied < rm.partition(T0).log_end_offset, "crashing with the copy half done"
    c.crash(b)
    _produce(c, producer, range(400, 500), acked, errors)  # the others go on without it
    c.restart(b)
    assert c.run_until(lambda: c.brokers[b].rm is not None and c.events("log_dir_moved", node=b), 60_000)
    assert c.events("future_log_resumed", node=b), "the future log was found and the copy went on"
    _produce(c, producer, range(500, 600), acked, errors)
    producer.flush()
    assert c.run_until(lambda: b in c.isr("t", 0), 30_000)
    c.run_for(1000)
    assert not errors and len(acked) == 600
    log = c.brokers[b].rm.partition(T0).log
    assert log.dir == target / "t-0" and not (source / "t-0").exists()
    assert sorted(_values(log)) == sorted(b"v%d" % i for i in range(600))


def test_a_swap_cut_short_by_a_crash_is_finished_at_the_next_start(make_cluster):
    c = make_cluster(1, seed=6, log_dirs_per_broker=2, config=CONFIG)
    c.create_topic("t", 1, 1)
    producer = c.producer(config={"acks": 1, "linger.ms": 1})
    for i in range(20):
        producer.send("t", b"v%d" % i)
    producer.flush()
    c.run_for(100)
    source, target = _other_dir(c, 1)
    c.shutdown(1, controlled=False)
    # What the disk holds when the broker died between the swap's two renames: the old log retired,
    # its full copy still named as the future log.
    shutil.copytree(source / "t-0", target / "t-0.abc-future")
    (source / "t-0").rename(source / "t-0.abc-delete")
    c.restart(1)
    assert c.run_until(lambda: c.brokers[1].rm.partition_or_none(T0) is not None, 30_000)
    log = c.brokers[1].rm.partition(T0).log
    assert log.dir == target / "t-0"
    assert not (source / "t-0.abc-delete").exists() and not (target / "t-0.abc-future").exists()
    assert _values(log) == [b"v%d" % i for i in range(20)]


@pytest.mark.parametrize("where", ["target", "source"])
def test_a_dir_failing_mid_move_stops_the_move_and_keeps_the_partition_where_it_can(make_cluster, where):
    faults = DiskFaults()
    c = make_cluster(
        3, seed=7, log_dirs_per_broker=2, file_ops=faults, config={**CONFIG, "replica.fetch.max.bytes": 1024}
    )
    c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
    b = c.leader("t", 0)
    producer = c.producer(config=PRODUCER)
    acked: dict[int, int] = {}
    errors: list = []
    _produce(c, producer, range(300), acked, errors)
    source, target = _other_dir(c, b)
    assert c.alter_replica_log_dirs(b, {T0: target}) == {T0: NO_ERROR}
    c.run_for(20)
    faults.fail(errno.EIO, under=target if where == "target" else source)
    _produce(c, producer, range(300, 400), acked, errors)
    producer.flush()
    c.run_for(3000)
    rm = c.brokers[b].rm
    assert not rm.alter_log_dirs.futures, "the move stopped"
    if where == "target":
        assert rm.partition(T0).log.dir.parent == source, "the replica stays in its own, healthy dir"
    else:
        assert rm.partition_or_none(T0) is None and c.leader("t", 0) != b, "offline here, led elsewhere"
    assert len(acked) + len(errors) == 400
    leader = c.leader("t", 0)
    values = _values(c.brokers[leader].rm.partition(T0).log)
    assert all(b"v%d" % i in values for i in acked)


def test_a_topic_deleted_while_its_moving_replica_was_down_leaves_no_future_log(make_cluster):
    c = make_cluster(3, seed=8, log_dirs_per_broker=2, config={**CONFIG, "replica.fetch.max.bytes": 1024})
    c.create_topic("t", 1, 3)
    b = next(r for r in c.replicas("t", 0) if r != c.controller())  # the controller must stay up
    producer = c.producer(config=PRODUCER)
    _produce(c, producer, range(300), {}, [])
    _source, target = _other_dir(c, b)
    rm = c.brokers[b].rm
    assert c.alter_replica_log_dirs(b, {T0: target}) == {T0: NO_ERROR}
    assert c.run_until(lambda: rm.alter_log_dirs.futures[T0].log_end_offset > 0, 1000)
    dirs = list(rm.log_dirs)
    c.crash(b)
    with contextlib.suppress(Exception):  # the deletion waits for the broker that is down
        c.delete_topic("t", timeout_ms=2000)
    c.restart(b)
    assert c.run_until(
        lambda: not [e for d in dirs for e in d.iterdir() if e.name.startswith("t-0")], 60_000
    ), [e.name for d in dirs for e in d.iterdir()]


def test_kraft_brokers_describe_their_log_dirs_and_move_a_replica_between_them():
    from kafkalite.host.kraft_cluster import KRaftCluster

    c = KRaftCluster(3, 3, seed=9, log_dirs_per_broker=2, config={"replica.fetch.max.bytes": 1024})
    try:
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        c.create_topic("u", 1, 3)
        b = c.leader("t", 0)
        rm = c.brokers[b].rm
        assert [r.log_dir for r in c.describe_log_dirs(b).results] == [str(d) for d in rm.log_dirs]
        assert sorted(len(r.partitions) for r in c.describe_log_dirs(b).results) == [1, 1], "one per dir"
        producer = c.producer(config=PRODUCER)
        acked: dict[int, int] = {}
        errors: list = []
        _produce(c, producer, range(300), acked, errors)
        source, target = _other_dir(c, b)
        assert c.alter_replica_log_dirs(b, {T0: target}) == {T0: NO_ERROR}
        _produce(c, producer, range(300, 500), acked, errors)
        producer.flush()
        assert c.run_until(lambda: not rm.alter_log_dirs.futures, 30_000)
        c.run_for(1000)
        assert not errors and len(acked) == 500
        log = rm.partition(T0).log
        assert log.dir == target / "t-0" and not (source / "t-0").exists()
        assert sorted(_values(log)) == sorted(b"v%d" % i for i in range(500)), "every acked record, once"
    finally:
        c.close()
