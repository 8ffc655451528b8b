"""A full or failing disk (issue 24, item 5): injected through the storage layer's ``FileOps`` seam.

What Kafka does and these tests hold kafkalite to: the request that hit the failure gets
KAFKA_STORAGE_ERROR (never an ack), the log dir goes offline with every replica in it, the controller
hears of it (``/log_dir_event_notification``) and elects other leaders from the ISR, other dirs keep
serving, a broker with no dir left halts, and once the disk is freed and the broker restarted every
acknowledged record is there.
"""

from __future__ import annotations

import errno

import pytest

from kafkalite.errors import KafkaStorageError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition
from kafkalite.records import build_batch
from kafkalite.storage import Log
from kafkalite.storage.file_ops import DiskFaults
from kafkalite.storage.log_dir_failure_channel import LogDirFailureChannel

CONFIG = {"zookeeper.session.timeout.ms": 1500, "replica.lag.time.max.ms": 1000}
PRODUCER = {"acks": "all", "linger.ms": 1, "request.timeout.ms": 2500, "delivery.timeout.ms": 60_000}


# ----------------------------------------------------------------------------------------- the seam


def test_disk_faults_fill_a_directory_after_n_bytes_and_tear_the_crossing_write(tmp_path):
    faults = DiskFaults()
    faults.fail(errno.ENOSPC, under=tmp_path / "full", after_bytes=10)
    (tmp_path / "full").mkdir()
    (tmp_path / "other").mkdir()
    import os

    fd = faults.open(tmp_path / "full" / "f", os.O_WRONLY | os.O_CREAT)
    assert faults.write(fd, b"0123456") == 7
    assert faults.write(fd, b"789abc") == 3, "the write crossing the limit writes what fits"
    with pytest.raises(OSError) as e:
        faults.write(fd, b"d")
    assert e.value.errno == errno.ENOSPC
    os.close(fd)
    other = faults.open(tmp_path / "other" / "f", os.O_WRONLY | os.O_CREAT)
    assert faults.write(other, b"x" * 100) == 100, "other directories are not affected"
    os.close(other)
    assert (tmp_path / "full" / "f").read_bytes() == b"0123456789"
    faults.clear()
    fd = faults.open(tmp_path / "full" / "f", os.O_WRONLY | os.O_APPEND)
    assert faults.write(fd, b"more") == 4, "after clear() the disk has room again"
    os.close(fd)


def test_disk_faults_fail_the_nth_call_with_eio(tmp_path):
    faults = DiskFaults()
    faults.fail(errno.EIO, ops=("fsync",), on_call=2, times=1)
    import os

    fd = faults.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    faults.fsync(fd)
    with pytest.raises(OSError) as e:
        faults.fsync(fd)
    assert e.value.errno == errno.EIO
    faults.fsync(fd)  # the rule was spent after one failure
    os.close(fd)
    assert [f[2] for f in faults.failures] == [errno.EIO]


def test_a_log_whose_disk_fills_reports_its_dir_refuses_writes_and_recovers_after_restart(tmp_path):
    faults = DiskFaults()
    failed = []
    channel = LogDirFailureChannel(lambda d, why: failed.append((d, why)))
    log = Log.open(tmp_path / "t-0", file_ops=faults, failure_channel=channel)
    for i in range(5):
        log.append(build_batch([(b"k", b"v%d" % i)], timestamp=1000 + i))
    faults.fail(errno.ENOSPC, under=tmp_path, after_bytes=30)
    with pytest.raises(KafkaStorageError, match="No space left on device"):
        log.append(build_batch([(b"k", b"x" * 100)], timestamp=2000))
    assert failed and failed[0][0] == tmp_path, "the log dir (the partition dir's parent) is reported"
    with pytest.raises(KafkaStorageError, match="offline"):
        log.append(build_batch([(b"k", b"small")], timestamp=2001))
    log.crash()
    faults.clear()
    again = Log.open(tmp_path / "t-0")
    assert again.log_end_offset == 5, "recovery cut the torn batch and kept the five written before it"
    assert "torn batch" in str(again.recovery_report)
    assert [r.value for r in again.read_records(0)] == [b"v%d" % i for i in range(5)]


# ----------------------------------------------------------------------------------------- brokers


def _produce(cluster, producer, values, acked, errors, topic="t", step_ms=5):
    def cb(i):
        def done(md, err):
            if err is None:
                acked[i] = (md.partition, md.offset)
            else:
                errors.append((i, err))

        return done

    for i in values:
        producer.send(topic, b"v%d" % i, key=str(i).encode(), callback=cb(i))
        cluster.run_for(step_ms)


def _values(cluster, topic="t"):
    return {r.value for recs in cluster.read_all(topic).values() for r in recs}


def test_full_disk_on_the_leader_halts_it_moves_leadership_and_loses_no_acked_record():
    faults = DiskFaults()
    c = Cluster(3, seed=1, file_ops=faults, config=CONFIG)
    c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
    leader = c.leader("t", 0)
    producer = c.producer(config=PRODUCER)
    acked: dict[int, tuple[int, int]] = {}
    errors: list = []
    _produce(c, producer, range(50), acked, errors)
    faults.fail(errno.ENOSPC, under=c.dir / f"broker-{leader}", after_bytes=300)
    _produce(c, producer, range(50, 200), acked, errors)
    producer.flush()
    c.run_for(3000)
    kinds = [e.kind for e in c.net.events(node=leader)]
    assert "log_dir_offline" in kinds and "broker_halt" in kinds, kinds[-10:]
    assert not c.net.is_up(leader), "a broker with no log dir left halts"
    assert c.leader("t", 0) not in (None, leader), "another ISR member leads"
    errs = [e for e in c.net.events("produce_error", node=leader)]
    assert errs and all(e.fields["error"] == "KAFKA_STORAGE_ERROR" for e in errs), errs
    faults.clear()
    c.restart(leader)
    assert c.run_until(lambda: len(c.isr("t", 0)) == 3, 30_000), "the restarted broker rejoins the ISR"
    values = _values(c)
    lost = sorted(i for i in acked if b"v%d" % i not in values)
    assert len(acked) == 200 and lost == [], (len(acked), lost)


def test_one_failed_dir_of_two_goes_offline_and_the_other_keeps_serving():
    faults = DiskFaults()
    c = Cluster(3, seed=1, file_ops=faults, log_dirs_per_broker=2, config=CONFIG)
    c.create_topic("t", 4, 3, config={"min.insync.replicas": 2})
    b = c.leader("t", 0)
    bad_dir = c.replica(b, "t", 0).log.dir.parent
    on_bad = {q for q in range(4) if c.replica(b, "t", q).log.dir.parent == bad_dir}
    on_good = set(range(4)) - on_bad
    assert on_good, "partitions were spread over both dirs"
    producer = c.producer(config=PRODUCER)
    acked: dict[int, tuple[int, int]] = {}
    errors: list = []
    faults.fail(errno.EIO, under=bad_dir, on_call=3)
    _produce(c, producer, range(200), acked, errors)
    producer.flush()
    c.run_for(3000)
    assert c.net.is_up(b), "the broker still has a good dir: it keeps running"
    rm = c.brokers[b].rm
    assert set(rm.offline_dirs) == {bad_dir}
    assert c.net.events("log_dir_failure", node=c.controller()), "the controller heard of it"
    for q in on_bad:
        assert c.leader("t", q) != b and b not in c.isr("t", q), (q, c.leader("t", q), c.isr("t", q))
        assert rm.partition_or_none(TopicPartition("t", q)) is None
    for q in on_good:
        assert rm.partition_or_none(TopicPartition("t", q)) is not None, "the other dir still serves"
        assert b in c.isr("t", q)
    values = _values(c)
    assert len(acked) == 200 and all(b"v%d" % i in values for i in acked)
    # Freed and restarted: the dir comes back and every replica with it.
    faults.clear()
    c.crash(b)
    c.restart(b)
    assert c.run_until(lambda: all(len(c.isr("t", q)) == 3 for q in range(4)), 30_000)
    values = _values(c)
    assert all(b"v%d" % i in values for i in acked)


def test_a_full_disk_while_checkpointing_high_watermarks_takes_the_dir_offline_instead_of_wedging():
    faults = DiskFaults()
    c = Cluster(3, seed=2, file_ops=faults, config=CONFIG)
    c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
    producer = c.producer(config=PRODUCER)
    acked: dict[int, tuple[int, int]] = {}
    errors: list = []
    _produce(c, producer, range(20), acked, errors)
    follower = next(r for r in c.replicas("t", 0) if r != c.leader("t", 0))
    faults.fail(errno.ENOSPC, under=c.dir / f"broker-{follower}" / "replication-offset-checkpoint.tmp")
    c.run_for(6000)  # replica.high.watermark.checkpoint.interval.ms is 5 s by default
    offline = c.net.events("log_dir_offline", node=follower)
    assert offline, "the checkpoint's ENOSPC took the dir offline"
    assert not c.net.is_up(follower), "its only dir: the broker halted"
    _produce(c, producer, range(20, 60), acked, errors)
    producer.flush()
    c.run_for(2000)
    assert len(acked) == 60, "the other two replicas keep min.insync.replicas=2"
    faults.clear()
    c.restart(follower)
    assert c.run_until(lambda: len(c.isr("t", 0)) == 3, 30_000)
    values = _values(c)
    assert all(b"v%d" % i in values for i in acked)
