"""The idempotent producer end to end: producer ids from the brokers, retries that never duplicate nor
reorder, the epoch bump when a hole in the sequence cannot be filled, and seeded fault schedules."""

from __future__ import annotations

import json

import pytest

from kafkalite.broker.producer_id_manager import PRODUCER_ID_BLOCK_PATH, decode_block
from kafkalite.client.accumulator import ProducerBatch
from kafkalite.client.transaction_manager import BATCHES_REMEMBERED, TransactionManager
from kafkalite.harness.checker import check_history
from kafkalite.harness.faults import run_schedule
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import InitProducerIdRequest, TopicPartition
from kafkalite.records import decode_batch_tuples

TP = TopicPartition("t", 0)


@pytest.fixture
def cluster(make_cluster):
    c = make_cluster(brokers=3, seed=1)
    c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
    return c


def leader_log(c: Cluster, topic: str = "t", partition: int = 0):
    return c.replica(c.leader(topic, partition), topic, partition).log


def test_producer_ids_come_in_blocks_and_never_repeat(cluster):
    ids = [cluster.request(b, InitProducerIdRequest()) for b in (1, 2, 1, 3)]
    assert all(r.error_code == 0 and r.producer_epoch == 0 for r in ids)
    pids = [r.producer_id for r in ids]
    assert len(set(pids)) == 4
    assert pids[0] == 0 and pids[2] == 1  # broker 1 hands out its block in order
    assert sorted({p // 1000 for p in pids}) == [0, 1, 2]  # one block of 1,000 per broker
    data, _ = cluster.store.get(PRODUCER_ID_BLOCK_PATH)
    doc = json.loads(data)
    assert doc["version"] == 1 and isinstance(doc["block_start"], str)
    assert decode_block(data)[1:] == (2000, 2999)


def test_a_transactional_id_is_served_only_by_its_coordinator(cluster):
    from kafkalite.protocol import CoordinatorType, FindCoordinatorRequest

    find = FindCoordinatorRequest(key="tx", key_type=CoordinatorType.TRANSACTION)
    assert cluster.request(1, find).error_code == 15  # __transaction_state is being created
    for _ in range(100):
        answer = cluster.request(1, find)
        if answer.error_code == 0:
            break
        cluster.run_for(100)
    coordinator = answer.node_id
    cluster.run_for(1000)  # its partition loaded
    codes = {
        b: cluster.request(b, InitProducerIdRequest(transactional_id="tx")).error_code for b in (1, 2, 3)
    }
    assert codes == {b: 0 if b == coordinator else 16 for b in (1, 2, 3)}  # NOT_COORDINATOR elsewhere


def test_batches_carry_the_producer_id_epoch_and_sequences(cluster):
    p = cluster.producer(linger_ms=0)
    for i in range(5):
        p.send("t", f"v{i}".encode())
        cluster.run_for(20)
    p.flush()
    assert cluster.run_until(p.idle, 5000)
    data = leader_log(cluster).read(0, 1 << 20).records.read()
    seqs = []
    pos = 0
    while pos < len(data):
        h, rows = decode_batch_tuples(data, pos)
        assert h.producer_id == p._tm.producer_id >= 0 and h.producer_epoch == 0
        seqs.append((h.base_sequence, len(rows)))
        pos += h.batch_length + 12
    expected, nxt = [], 0
    for _seq, n in seqs:
        expected.append((nxt, n))
        nxt += n
    assert seqs == expected


def test_a_lost_answer_is_retried_without_a_duplicate(cluster):
    p = cluster.producer(linger_ms=0, request_timeout_ms=300, retry_backoff_ms=10, delivery_timeout_ms=5000)
    p.send("t", b"warm")
    assert cluster.run_until(p.idle, 5000)
    leader = cluster.leader("t", 0)
    cluster.net.drop(leader, p.node_id, 1.0, one_way=True)  # the leader appends, the answers vanish
    fut = p.send("t", b"once")
    cluster.run_for(250)
    cluster.net.drop(leader, p.node_id, 0.0, one_way=True)
    assert cluster.run_until(fut.done, 5000)
    assert fut.result().offset == 1
    assert p.metrics["request-timeout-total"] >= 1
    assert [r.value for r in leader_log(cluster).iter_records()] == [b"warm", b"once"]
    reads = {("t", 0): [(r.offset, r.value) for r in leader_log(cluster).iter_records()]}
    assert check_history(p.history, reads).ok


def test_the_same_retry_without_idempotence_duplicates(cluster):
    p = cluster.producer(
        linger_ms=0, request_timeout_ms=300, retry_backoff_ms=10, delivery_timeout_ms=5000,
        enable_idempotence=False,
    )  # fmt: skip
    p.send("t", b"warm")
    assert cluster.run_until(p.idle, 5000)
    leader = cluster.leader("t", 0)
    cluster.net.drop(leader, p.node_id, 1.0, one_way=True)
    fut = p.send("t", b"once")
    cluster.run_for(250)
    cluster.net.drop(leader, p.node_id, 0.0, one_way=True)
    assert cluster.run_until(fut.done, 5000)
    assert [r.value for r in leader_log(cluster).iter_records()] == [b"warm", b"once", b"once"]


def test_order_holds_with_five_in_flight_across_a_leader_failover(cluster):
    p = cluster.producer(
        linger_ms=0, request_timeout_ms=400, retry_backoff_ms=20, max_in_flight_requests_per_connection=5
    )
    futs = []
    for i in range(200):
        futs.append(p.send("t", f"{i:04d}".encode()))
        if i == 60:
            cluster.crash(cluster.leader("t", 0))
        if i == 140:
            for b in cluster.brokers:
                if not cluster.net.is_up(b):
                    cluster.restart(b)
        cluster.run_for(5)
    p.flush()
    assert cluster.run_until(lambda: all(f.done() for f in futs), 30_000)
    got = [r.value for r in leader_log(cluster).iter_records(None, cluster.high_watermark("t", 0))]
    acked = [f.result() for f in futs if f.exception() is None]
    assert len(acked) == 200
    assert got == [f"{i:04d}".encode() for i in range(200)]


# 777, 3147 and 4113 are seeds a 10,000-seed run found duplicating before the producer kept at most five
# batches per partition unanswered (a retry fell out of the leader's window of five).
@pytest.mark.parametrize("seed", [*range(12), 777, 3147, 4113])
def test_fault_schedules_with_idempotence_lose_nothing_and_duplicate_nothing(seed):
    r = run_schedule(seed, idempotence=True)
    assert r.idempotent and r.converged
    assert r.violations == [], str(r)
    assert r.report.duplicates == [] and r.report.of_kind("reordered") == []


# ---------------------------------------------------------------------- the client's sequence rules


def _batch(tm: TransactionManager, n: int = 1) -> ProducerBatch:
    b = ProducerBatch(TP, 0, -1)
    for i in range(n):
        b.append(None, b"x%d" % i, None, 0, i)
    return b


def test_sequences_are_given_at_drain_and_retries_go_alone():
    tm = TransactionManager(lambda *a, **k: None)
    a, b = _batch(tm, 3), _batch(tm, 2)
    assert not tm.gate(a)  # no producer id yet
    tm.set_producer_id(9, 0)
    assert tm.gate(a) and a.base_sequence == 0
    a.in_flight = True
    assert tm.gate(b) and b.base_sequence == 3  # a new batch may follow while a is in flight
    b.in_flight = True
    a.in_flight = False  # a failed retriably and waits to go again
    assert not tm.gate(a)  # ... but only once b is no longer in flight
    b.in_flight = False
    assert tm.gate(a) and a.base_sequence == 0


def test_answered_batches_do_not_pile_up_in_the_in_flight_list():
    """A producer that never retries still lets go of its answered batches (and their records)."""
    tm = TransactionManager(lambda *a, **k: None)
    tm.set_producer_id(9, 0)
    open_batches = []
    for i in range(1000):
        b = _batch(tm)
        assert tm.gate(b)
        b.in_flight = True
        open_batches.append(b)
        if len(open_batches) > 3:  # three requests in flight; the oldest is answered
            done = open_batches.pop(0)
            done.in_flight, done.done = False, True
        assert len(tm.inflight[TP]) <= 2 * BATCHES_REMEMBERED, f"after {i + 1} batches"
    assert set(open_batches) <= set(tm.inflight[TP])  # what is still in flight is kept
    open_batches[0].in_flight = False  # a failed one waits for its retry: it goes alone, after the rest
    assert not tm.gate(open_batches[0])
    for b in open_batches[1:]:
        b.in_flight, b.done = False, True
    assert tm.gate(open_batches[0])


def test_a_hole_bumps_the_epoch_and_resequences_what_was_never_written():
    tm = TransactionManager(lambda *a, **k: None)
    tm.set_producer_id(9, 4)
    a, b = _batch(tm), _batch(tm)
    tm.gate(a)
    tm.gate(b)
    tm.acked(a)
    assert tm.already_acked(a) and not tm.already_acked(b)
    tm.hole(TP)
    assert not tm.gate(_batch(tm))  # nothing new leaves before the bump
    queued = {TP: [b]}
    assert tm.maybe_bump(queued)
    assert tm.epoch == 5 and b.base_sequence == -1
    assert tm.gate(b) and b.base_sequence == 0 and b.producer_epoch == 5
    data = b.encode(0)
    h, _ = decode_batch_tuples(data)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 5, 0)


def test_batches_split_after_message_too_large_keep_their_order(cluster):
    cluster.create_topic("s", 1, 3, config={"min.insync.replicas": 2, "max.message.bytes": 3000})
    p = cluster.producer(linger_ms=50, batch_size=16384)
    futs = [p.send("s", f"{i:04d}".encode() + b"x" * 200) for i in range(60)]
    p.flush()
    assert cluster.run_until(lambda: all(f.done() for f in futs), 30_000)
    assert all(f.exception() is None for f in futs) and p.metrics["batch-split-total"] > 0
    log = cluster.replica(cluster.leader("s", 0), "s", 0).log
    assert [r.value[:4] for r in log.iter_records()] == [f"{i:04d}".encode() for i in range(60)]


def test_idle_producer_ids_expire_and_their_next_batch_is_still_accepted():
    c = Cluster(brokers=3, seed=4, config={"producer.id.expiration.ms": 5000,
                                           "producer.id.expiration.check.interval.ms": 1000})  # fmt: skip
    try:
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        p = c.producer(linger_ms=0)
        assert c.run_until(p.send("t", b"one").done, 5000)
        leader = c.replica(c.leader("t", 0), "t", 0).log
        assert p._tm.producer_id in leader.producer_state.producers
        c.run_for(8000)
        assert p._tm.producer_id not in leader.producer_state.producers  # forgotten after 5 s idle
        fut = p.send("t", b"two")  # sequence 1 from a producer the leader no longer knows: accepted
        assert c.run_until(fut.done, 5000) and fut.exception() is None
        assert [r.value for r in leader.iter_records()] == [b"one", b"two"]
    finally:
        c.close()
