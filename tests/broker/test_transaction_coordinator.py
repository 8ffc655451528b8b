"""The transaction coordinator on the brokers, driven by raw requests as a transactional producer sends
them: placement, epochs and fencing, commit and abort with markers, timeouts, and a coordinator failover
that loads ``__transaction_state``."""

from __future__ import annotations

import pytest

from kafkalite.host.cluster import Cluster
from kafkalite.protocol import (
    AddPartitionsToTxnRequest,
    CoordinatorType,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
)
from kafkalite.protocol.txn_log_schema import (
    TransactionMetadata,
    TxnState,
    decode_record,
    encode_key,
    encode_value,
)
from kafkalite.records import build_batch, set_producer_fields

OUT = TopicPartition("out", 0)


@pytest.fixture
def cluster(make_cluster):
    c = make_cluster(brokers=3, seed=5, config={"transaction.state.log.num.partitions": 4})
    c.create_topic("out", 1, 3, config={"min.insync.replicas": 2})
    return c


def coordinator(c: Cluster, tid: str) -> int:
    for _ in range(50):
        r = c.request(1, FindCoordinatorRequest(key=tid, key_type=CoordinatorType.TRANSACTION))
        if r.error_code == 0:
            return r.node_id
        c.run_for(200)
    raise AssertionError(f"no transaction coordinator for {tid}: {r}")


def init(c: Cluster, tid: str, timeout_ms: int = 60_000):
    for _ in range(50):
        r = c.request(
            coordinator(c, tid),
            InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms),
        )
        if r.error_code == 0:
            return r.producer_id, r.producer_epoch
        assert r.error_code in (14, 15, 16, 51), r  # loading, not available, moved, still completing
        c.run_for(200)
    raise AssertionError("InitProducerId kept failing")


def add(c: Cluster, tid: str, pid: int, epoch: int, tps=(OUT,)) -> int:
    r = c.request(
        coordinator(c, tid),
        AddPartitionsToTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, partitions=tuple(tps)
        ),
    )
    return r.results[0].error_code


def produce(c: Cluster, pid: int, epoch: int, seq: int, values: list[bytes]) -> int:
    batch = build_batch([(None, v, None) for v in values], timestamp=c.net.now_ms())
    data = bytes(set_producer_fields(bytearray(batch), pid, epoch, seq, transactional=True))
    r = c.request(
        c.leader("out", 0), ProduceRequest(acks=-1, partitions=(ProducePartition(tp=OUT, records=data),))
    )
    return r.partitions[0].error_code


def end(c: Cluster, tid: str, pid: int, epoch: int, commit: bool) -> int:
    r = c.request(
        coordinator(c, tid),
        EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit),
    )
    return r.error_code


def committed_values(c: Cluster) -> list[bytes]:
    consumer = c.consumer(isolation_level="read_committed", auto_offset_reset="earliest")
    consumer.assign([OUT])
    out: list[bytes] = []
    for _ in range(15):
        for recs in consumer.poll(200).values():
            out += [r.value for r in recs]
    consumer.close()
    return out


def state(c: Cluster, tid: str) -> TransactionMetadata | None:
    """The transaction as its current coordinator holds it (no network round trip: usable in run_until)."""
    for b in c.brokers.values():
        tc = b.txn_coordinator
        if tc is not None and tid in tc.txns and tc.partition_for(tid) in tc.owned:
            return tc.txns[tid]
    return None


def in_state(c: Cluster, tid: str, want: TxnState) -> bool:
    """``tid`` has reached ``want`` and nothing more is in flight for it (markers, state writes)."""
    m = state(c, tid)
    busy = any(tid in b.txn_coordinator.pending for b in c.brokers.values() if b.txn_coordinator)
    return m is not None and m.state == want and not busy


def test_state_records_round_trip_in_kafkas_schema():
    m = TransactionMetadata("t1", 7, 3, 60_000, TxnState.ONGOING, {OUT, TopicPartition("x", 2)}, 10, 20)
    key, value = encode_key("t1"), encode_value(m)
    assert key[:2] == b"\x00\x00" and value[:2] == b"\x00\x00"
    assert decode_record(key, value) == ("t1", m)
    assert decode_record(key, None) == ("t1", None)


def test_commit_and_abort_reach_read_committed_consumers(cluster):
    pid, epoch = init(cluster, "tx")
    assert add(cluster, "tx", pid, epoch) == 0
    assert produce(cluster, pid, epoch, 0, [b"c1", b"c2"]) == 0
    assert committed_values(cluster) == []  # open: the LSO holds it back
    assert end(cluster, "tx", pid, epoch, True) == 0
    assert cluster.run_until(lambda: in_state(cluster, "tx", TxnState.COMPLETE_COMMIT), 5000)
    assert committed_values(cluster) == [b"c1", b"c2"]
    assert add(cluster, "tx", pid, epoch) == 0
    assert produce(cluster, pid, epoch, 2, [b"a1"]) == 0
    assert end(cluster, "tx", pid, epoch, False) == 0
    assert cluster.run_until(lambda: in_state(cluster, "tx", TxnState.COMPLETE_ABORT), 5000)
    assert committed_values(cluster) == [b"c1", b"c2"]
    assert end(cluster, "tx", pid, epoch, False) == 0  # a retried EndTxn is answered as done
    assert end(cluster, "tx", pid, epoch, True) == 48  # INVALID_TXN_STATE: nothing open to commit


def test_a_new_init_bumps_the_epoch_and_fences_the_zombie(cluster):
    pid, epoch = init(cluster, "tx")
    pid2, epoch2 = init(cluster, "tx")
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert add(cluster, "tx", pid, epoch) == 90  # PRODUCER_FENCED
    assert add(cluster, "tx", pid + 1, epoch2) == 49  # INVALID_PRODUCER_ID_MAPPING
    assert add(cluster, "tx", pid2, epoch2) == 0
    # The zombie's batch in the new transaction's partition is refused by the leader too.
    assert produce(cluster, pid2, epoch2, 0, [b"new"]) == 0
    assert produce(cluster, pid, epoch, 1, [b"old"]) == 47  # INVALID_PRODUCER_EPOCH


def test_an_init_while_a_transaction_is_open_aborts_it_first(cluster):
    pid, epoch = init(cluster, "tx")
    assert add(cluster, "tx", pid, epoch) == 0
    assert produce(cluster, pid, epoch, 0, [b"left-open"]) == 0
    pid2, epoch2 = init(cluster, "tx")  # retries through CONCURRENT_TRANSACTIONS while the abort completes
    assert pid2 == pid and epoch2 == epoch + 2  # one bump for the abort, one for the new producer
    assert committed_values(cluster) == []
    leader = cluster.replica(cluster.leader("out", 0), "out", 0).log
    assert [(a.producer_id, a.first_offset) for a in leader.aborted_transactions] == [(pid, 0)]


def test_a_transaction_past_its_timeout_is_aborted(cluster):
    pid, epoch = init(cluster, "slow", timeout_ms=1000)
    assert add(cluster, "slow", pid, epoch) == 0
    assert produce(cluster, pid, epoch, 0, [b"late"]) == 0
    cluster.run_for(15_000)  # the check runs every 10 s
    meta = state(cluster, "slow")
    assert meta.state == TxnState.COMPLETE_ABORT and meta.producer_epoch == epoch + 1
    assert end(cluster, "slow", pid, epoch, True) == 90  # the producer that let it time out is fenced


def test_a_new_coordinator_loads_the_state_after_a_crash(cluster):
    pid, epoch = init(cluster, "tx")
    assert add(cluster, "tx", pid, epoch) == 0
    assert produce(cluster, pid, epoch, 0, [b"x"]) == 0
    assert end(cluster, "tx", pid, epoch, True) == 0
    assert cluster.run_until(lambda: in_state(cluster, "tx", TxnState.COMPLETE_COMMIT), 5000)
    old = coordinator(cluster, "tx")
    cluster.crash(old)
    cluster.run_for(20_000)
    new = coordinator(cluster, "tx")
    assert new != old
    assert (
        state(cluster, "tx").producer_epoch == epoch
        and state(cluster, "tx").state == TxnState.COMPLETE_COMMIT
    )
    assert init(cluster, "tx") == (pid, epoch + 1)
    assert committed_values(cluster) == [b"x"]


# ------------------------------------------------------------------------------ the producer's API


def test_a_transactional_producer_commits_and_aborts(cluster):
    from kafkalite.errors import InvalidTxnStateError

    p = cluster.producer(transactional_id="app-1", linger_ms=0)
    with pytest.raises(InvalidTxnStateError, match="UNINITIALIZED"):
        p.send("out", b"too early")
    with pytest.raises(InvalidTxnStateError, match="state UNINITIALIZED"):
        p.begin_transaction()
    p.init_transactions()
    with pytest.raises(InvalidTxnStateError, match="call begin_transaction"):
        p.commit_transaction()
    p.begin_transaction()
    futures = [p.send("out", f"k{i}".encode()) for i in range(5)]
    p.commit_transaction()
    assert all(f.done() and f.exception() is None for f in futures)
    p.begin_transaction()
    p.send("out", b"never")
    p.abort_transaction()
    p.begin_transaction()
    p.send("out", b"last")
    p.commit_transaction()
    assert committed_values(cluster) == [b"k0", b"k1", b"k2", b"k3", b"k4", b"last"]


def test_a_second_producer_with_the_same_id_fences_the_first(cluster):
    from kafkalite.errors import ProducerFencedError

    zombie = cluster.producer("zombie", transactional_id="app-1", linger_ms=0)
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("out", b"from the zombie")
    cluster.run_for(100)
    fresh = cluster.producer("fresh", transactional_id="app-1", linger_ms=0)
    fresh.init_transactions()  # aborts the zombie's open transaction, bumps the epoch
    fresh.begin_transaction()
    fresh.send("out", b"from the new one")
    fresh.commit_transaction()
    with pytest.raises(ProducerFencedError):
        zombie.commit_transaction()
    assert committed_values(cluster) == [b"from the new one"]


def test_transactional_config_rules():
    from kafkalite.config.producer import ProducerConfig
    from kafkalite.errors import InvalidConfigError

    assert ProducerConfig.from_props({"transactional.id": "t"}).idempotence
    with pytest.raises(InvalidConfigError, match="without also enabling idempotence"):
        ProducerConfig.from_props({"transactional.id": "t", "enable.idempotence": False})
    with pytest.raises(InvalidConfigError, match="acks to all"):
        ProducerConfig.from_props({"transactional.id": "t", "acks": 1})


def _copy_loop(c: Cluster, producer, n: int, *, abort_every: int = 0, crash_after: int | None = None) -> int:
    """Kafka's consume-transform-produce loop: read 'in' (read_committed), write 'out' and the group's
    offsets in one transaction per poll. Returns how many transactions were aborted."""
    consumer = c.consumer(group_id="copy", isolation_level="read_committed", auto_offset_reset="earliest",
                          enable_auto_commit=False, max_poll_records=7)  # fmt: skip
    consumer.subscribe(["in"])
    done = aborted = txns = 0
    while done < n:
        batch = consumer.poll(500)
        records = [r for recs in batch.values() for r in recs]
        if not records:
            continue
        producer.begin_transaction()
        for r in records:
            producer.send("out", r.value.upper())
        txns += 1
        if abort_every and txns % abort_every == 0:
            producer.abort_transaction()
            aborted += 1
            # Rewind to the last committed position, as an application does after an abort.
            for tp in batch:
                consumer.seek(tp, c.group_offsets("copy").get(tp, 0))
            continue
        offsets = {tp: recs[-1].offset + 1 for tp, recs in batch.items()}
        producer.send_offsets_to_transaction(offsets, "copy")
        producer.commit_transaction()
        done += len(records)
        if crash_after is not None and txns == crash_after:
            c.crash(coordinator(c, "copier"))
    consumer.close()
    return aborted


@pytest.mark.parametrize("crash", [False, True])
def test_consume_transform_produce_is_exactly_once(cluster, crash):
    n = 60
    cluster.create_topic("in", 2, 3, config={"min.insync.replicas": 2})
    feeder = cluster.producer("feeder", linger_ms=0)
    for i in range(n):
        feeder.send("in", f"r{i:03d}".encode(), key=str(i % 5).encode())
    feeder.flush()
    assert cluster.run_until(feeder.idle, 10_000)
    copier = cluster.producer("copier-1", transactional_id="copier", linger_ms=0)
    copier.init_transactions()
    aborted = _copy_loop(cluster, copier, n, abort_every=4, crash_after=3 if crash else None)
    assert aborted > 0
    got = sorted(committed_values_of(cluster, "out"))
    assert got == sorted(f"R{i:03d}".encode() for i in range(n))  # every input once, none of the aborts
    offsets = cluster.group_offsets("copy")
    assert sum(offsets.values()) == n


def committed_values_of(c: Cluster, topic: str) -> list[bytes]:
    consumer = c.consumer(isolation_level="read_committed", auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(len(c.read_all(topic)))])
    out: list[bytes] = []
    for _ in range(20):
        for recs in consumer.poll(200).values():
            out += [r.value for r in recs]
    consumer.close()
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_transactional_copy_is_exactly_once_under_fault_schedules(seed):
    from kafkalite.harness.faults_txn import run_txn_schedule

    r = run_txn_schedule(seed)
    assert r.ok, str(r)
    assert sum(r.copied.values()) == r.inputs and r.committed_offsets == r.inputs


def test_a_coordinator_that_dies_after_the_decision_is_finished_by_the_next(cluster):
    pid, epoch = init(cluster, "tx")
    assert add(cluster, "tx", pid, epoch) == 0
    assert produce(cluster, pid, epoch, 0, [b"decided"]) == 0
    old = coordinator(cluster, "tx")
    assert end(cluster, "tx", pid, epoch, True) == 0  # PrepareCommit is durable: the decision is made
    cluster.crash(old)  # before the markers are written and the transaction completed
    cluster.run_for(20_000)
    assert coordinator(cluster, "tx") != old
    assert cluster.run_until(lambda: in_state(cluster, "tx", TxnState.COMPLETE_COMMIT), 10_000)
    assert committed_values(cluster) == [b"decided"]
