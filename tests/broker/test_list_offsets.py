"""ListOffsets and the isolation level, as Kafka answers it: a client's "latest" is the last stable
offset under read_committed and the high watermark under read_uncommitted, timestamp lookups find
nothing at or past that bound, and a replica (or a debugging tool) sees the whole log."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.host.cluster import Cluster
from kafkalite.protocol import (
    DEBUGGING_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    TopicPartition,
)

TP = TopicPartition("t", 0)
UNCOMMITTED, COMMITTED = 0, 1
T = 1_000_000_000  # record timestamps, far ahead of the virtual clock


def ask(c: Cluster, timestamp: int, isolation: int, replica_id: int = -1) -> tuple[int, int]:
    """(offset, timestamp) the leader answers, -1 for none."""
    req = ListOffsetsRequest(
        replica_id=replica_id,
        isolation_level=isolation,
        partitions=(ListOffsetsPartition(tp=TP, timestamp=timestamp),),
    )
    (p,) = c.request(c.leader("t", 0), req).partitions
    assert p.error_code == 0, p
    return p.offset, p.timestamp


def decided(c: Cluster) -> bool:
    """No transaction open in ``t-0`` and everything written is below the high watermark."""
    log = c.replica(1, "t", 0).log
    return log.first_unstable_offset() is None and c.high_watermark("t", 0) == log.log_end_offset


def settle(c: Cluster, futures=(), hw: int | None = None) -> None:
    """Run until ``futures`` are acknowledged and the high watermark reaches ``hw`` (markers included)."""
    assert c.run_until(lambda: all(f.done() for f in futures), 10_000), "sends not acknowledged"
    if hw is not None:
        assert c.run_until(lambda: c.high_watermark("t", 0) == hw, 10_000), (c.high_watermark("t", 0), hw)


@pytest.fixture
def open_txn():
    """``t-0``: two committed records (offsets 0, 1; marker 2) at T+1000 and T+2000 ms, then an open
    transaction whose two records (3, 4) carry the later timestamps T+3000 and T+4000 ms. (T is far
    ahead of the virtual clock, so the marker, stamped with that clock, is never the answer.)"""
    c = Cluster(brokers=1, config={"transaction.state.log.replication.factor": 1,
                                   "transaction.state.log.min.isr": 1,
                                   "transaction.state.log.num.partitions": 2})  # fmt: skip
    c.create_topic("t", 1, 1)
    p = c.producer(transactional_id="tx", linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    for ts in (T + 1000, T + 2000):
        p.send("t", b"committed", partition=0, timestamp=ts)
    p.commit_transaction()
    p.begin_transaction()
    sent = [p.send("t", b"open", partition=0, timestamp=ts) for ts in (T + 3000, T + 4000)]
    p.flush()
    settle(c, sent, hw=5)
    yield c, p
    c.close()


def test_latest_is_the_lso_under_read_committed_and_the_hw_otherwise(open_txn) -> None:
    c, p = open_txn
    assert ask(c, LATEST_TIMESTAMP, COMMITTED)[0] == 3  # the open transaction's first offset
    assert ask(c, LATEST_TIMESTAMP, UNCOMMITTED)[0] == 5
    assert ask(c, EARLIEST_TIMESTAMP, COMMITTED)[0] == 0  # not bounded, as in Kafka
    # a follower, or a debugging tool, asks for the log end whatever the isolation level
    assert ask(c, LATEST_TIMESTAMP, COMMITTED, replica_id=DEBUGGING_REPLICA_ID)[0] == 5
    p.commit_transaction()
    settle(c, hw=6)
    assert ask(c, LATEST_TIMESTAMP, COMMITTED)[0] == ask(c, LATEST_TIMESTAMP, UNCOMMITTED)[0] == 6


def test_timestamp_lookups_stop_at_the_same_bound(open_txn) -> None:
    c, p = open_txn
    assert ask(c, T + 1500, COMMITTED) == ask(c, T + 1500, UNCOMMITTED) == (1, T + 2000)
    assert ask(c, T + 2500, UNCOMMITTED) == (3, T + 3000)
    assert ask(c, T + 2500, COMMITTED) == (-1, -1)  # the first record that late is not stable yet
    assert ask(c, MAX_TIMESTAMP, UNCOMMITTED) == (4, T + 4000)
    assert ask(c, MAX_TIMESTAMP, COMMITTED) == (-1, -1)
    assert ask(c, T + 2500, COMMITTED, replica_id=DEBUGGING_REPLICA_ID) == (3, T + 3000)
    p.abort_transaction()
    settle(c, hw=6)
    assert ask(c, T + 2500, COMMITTED) == (3, T + 3000)  # decided (aborted): below the LSO now


def test_the_consumer_passes_its_isolation_level(open_txn) -> None:
    c, _ = open_txn
    committed = c.consumer(isolation_level="read_committed", auto_offset_reset="latest")
    uncommitted = c.consumer(auto_offset_reset="latest")
    assert committed.end_offsets([TP]) == {TP: 3}
    assert uncommitted.end_offsets([TP]) == {TP: 5}
    assert committed.offsets_for_times({TP: T + 2500}) == {TP: None}
    assert uncommitted.offsets_for_times({TP: T + 2500})[TP].offset == 3  # type: ignore[union-attr]
    # auto.offset.reset=latest starts a read_committed consumer at the LSO, as Kafka's does
    committed.assign([TP])
    committed.poll(200)
    assert committed.position(TP) == 3
    assert c.list_offsets([TP], LATEST_TIMESTAMP, isolation_level=COMMITTED) == {TP: 3}
    assert c.list_offsets([TP], LATEST_TIMESTAMP) == {TP: 5}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["plain", "commit", "abort"]), min_size=0, max_size=4),
       st.integers(1, 3), st.booleans())  # fmt: skip
def test_the_bounds_follow_the_oldest_open_transaction(steps, open_records, leave_open) -> None:
    """Whatever came before (plain records, decided transactions), read_committed's latest is the first
    offset of the transaction still open (or the HW when none is), and a timestamp lookup answers an
    offset below that bound or nothing."""
    c = Cluster(brokers=1, config={"transaction.state.log.replication.factor": 1,
                                   "transaction.state.log.min.isr": 1,
                                   "transaction.state.log.num.partitions": 1})  # fmt: skip
    try:
        c.create_topic("t", 1, 1)
        plain = c.producer(linger_ms=0)
        txn = c.producer(transactional_id="tx", linger_ms=0)
        txn.init_transactions()
        ts = T
        for step in steps:
            ts += 1000
            if step == "plain":
                f = plain.send("t", b"p", partition=0, timestamp=ts)
                plain.flush()
                settle(c, [f])
            else:
                txn.begin_transaction()
                txn.send("t", b"x", partition=0, timestamp=ts)
                txn.commit_transaction() if step == "commit" else txn.abort_transaction()
                assert c.run_until(lambda: decided(c), 10_000), "the marker was not written"
        first_open = None
        if leave_open:
            txn.begin_transaction()
            sent = []
            for _ in range(open_records):
                ts += 1000
                sent.append(txn.send("t", b"open", partition=0, timestamp=ts))
            txn.flush()
            first_open = c.high_watermark("t", 0)
            settle(c, sent, hw=first_open + open_records)
        hw = c.high_watermark("t", 0)
        lso = hw if first_open is None else first_open
        assert ask(c, LATEST_TIMESTAMP, COMMITTED)[0] == lso
        assert ask(c, LATEST_TIMESTAMP, UNCOMMITTED)[0] == hw
        for probe in range(T, ts + 1001, 500):
            for isolation, bound in ((COMMITTED, lso), (UNCOMMITTED, hw)):
                offset, _ = ask(c, probe, isolation)
                assert offset == -1 or offset < bound, (probe, isolation, offset, bound)
                if offset == -1:  # nothing answered: the first record that late is at or past the bound
                    later = ask(c, probe, COMMITTED, replica_id=DEBUGGING_REPLICA_ID)[0]
                    assert later == -1 or later >= bound
    finally:
        c.close()


# ------------------------------------------------------------------------------- real clients, over TCP


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_real_clients_get_the_lso_while_a_transaction_is_open() -> None:
    import time

    ck = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    from kafkalite.host.admin_client import AdminClient
    from kafkalite.host.server import BackgroundServer

    txn_on_one_broker = {"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}
    with BackgroundServer(1, config=txn_on_one_broker) as srv:
        srv.create_topic("t", 1, 1)
        bs = srv.bootstrap_servers
        # the open transaction's records are stamped later than the commit marker (stamped now) so
        # the marker is not what a lookup of their time finds
        t0 = int(time.time() * 1000) - 60_000
        p = ck.Producer({"bootstrap.servers": bs, "transactional.id": "lso", "log_level": 0})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(3):
            p.produce("t", b"committed", partition=0, timestamp=t0 + i)
        p.commit_transaction(30)  # offsets 0-2, marker 3
        p.begin_transaction()
        for i in range(2):
            p.produce("t", b"open", partition=0, timestamp=t0 + 600_000 + i)
        p.flush(30)  # offsets 4-5 in the log, their transaction open: LSO 4, HW 6
        tp = ck.TopicPartition("t", 0)
        deadline = time.monotonic() + 20
        ends = {}
        for iso in ("read_committed", "read_uncommitted"):
            c = ck.Consumer(
                {"bootstrap.servers": bs, "group.id": iso, "isolation.level": iso, "log_level": 0}
            )
            while True:  # the marker of the first transaction lands shortly after commit_transaction
                ends[iso] = c.get_watermark_offsets(tp, timeout=10, cached=False)
                if ends[iso][1] >= 4 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            (found,) = c.offsets_for_times([ck.TopicPartition("t", 0, t0 + 600_000)], timeout=10)
            ends[iso + " by time"] = found.offset
            c.close()
        assert ends["read_committed"] == (0, 4) and ends["read_uncommitted"] == (0, 6), ends
        assert ends["read_committed by time"] == -1 and ends["read_uncommitted by time"] == 4, ends

        kp_tp = kafka.TopicPartition("t", 0)
        for iso, end, by_time in (("read_committed", 4, None), ("read_uncommitted", 6, 4)):
            kc = kafka.KafkaConsumer(bootstrap_servers=bs, isolation_level=iso)
            assert kc.end_offsets([kp_tp]) == {kp_tp: end}, iso
            got = kc.offsets_for_times({kp_tp: t0 + 600_000})[kp_tp]
            assert (got and got.offset) == by_time, (iso, got)
            kc.close()

        with AdminClient(bs) as admin:
            from kafkalite.protocol import TopicPartition as KTP

            assert admin.list_offsets([KTP("t", 0)], LATEST_TIMESTAMP, isolation_level=COMMITTED) == {
                KTP("t", 0): 4
            }
            assert admin.list_offsets([KTP("t", 0)], LATEST_TIMESTAMP) == {KTP("t", 0): 6}
        p.commit_transaction(30)


def test_a_new_leader_whose_hw_lags_its_epoch_start_answers_offset_not_available() -> None:
    """Kafka's rule after a failover: until the new leader's HW reaches the offset its epoch started at,
    a client's "latest" and a timestamp lookup it cannot answer get OFFSET_NOT_AVAILABLE (78, retriable);
    "earliest" and a replica's request are answered. Once a follower fetches, the HW catches up."""
    with Cluster(brokers=3, seed=1) as c:
        c.create_topic("t", 1, 3)
        producer = c.producer(acks="all", linger_ms=0)
        sent = [producer.send("t", b"v", partition=0, timestamp=T + i) for i in range(10)]
        # The followers learn the HW of 10 only from their next fetch response, which waits out
        # replica.fetch.wait.max.ms: stop the leader the moment the records are acknowledged.
        assert c.run_until(lambda: all(f.done() for f in sent), 10_000), "records not acknowledged"
        old = c.leader("t", 0)
        # Both followers stay in the ISR. Everything between them takes 2 s more (in order, so the
        # controller's LeaderAndIsr still arrives first): the new leader hears no follower's fetch for 2 s.
        a, b = (r for r in (1, 2, 3) if r != old)
        c.net.delay(a, b, 2_000)
        c.crash(old)
        assert c.run_until(
            lambda: any((r := c.replica(x, "t", 0)) is not None and r.is_leader for x in (a, b)), 30_000
        ), "no new leader"
        new = a if c.replica(a, "t", 0).is_leader else b
        p = c.replica(new, "t", 0)
        assert p.leader_epoch_start_offset == 10 and p.high_watermark < 10, (
            p.leader_epoch_start_offset,
            p.high_watermark,
        )

        def answer(timestamp: int, replica_id: int = -1):
            req = ListOffsetsRequest(
                replica_id=replica_id,
                isolation_level=UNCOMMITTED,
                partitions=(ListOffsetsPartition(tp=TP, timestamp=timestamp),),
            )
            (part,) = c.request(new, req).partitions
            return part.error_code, part.offset

        assert answer(LATEST_TIMESTAMP)[0] == 78, "latest while the HW lags the epoch start"
        assert answer(T + 9)[0] == 78, "a lookup past the HW while the HW lags"
        assert answer(EARLIEST_TIMESTAMP) == (0, 0), "earliest is always known"
        assert answer(LATEST_TIMESTAMP, DEBUGGING_REPLICA_ID) == (0, 10), "a tool sees the whole log"
        assert c.run_until(lambda: p.high_watermark >= 10, 30_000), "the HW never caught up"
        assert answer(LATEST_TIMESTAMP) == (0, 10), "latest once the HW caught up"
        assert answer(T + 9) == (0, 9), "the lookup once the HW caught up"
