"""Incremental fetch sessions (KIP-227): the broker's cache and the fetcher's handler on their own, then
followers using them in a cluster (smaller fetches, same replication, recovery after a leader restart)
and a real client (kafka-python) using them over TCP."""

from __future__ import annotations

import collections

import pytest

from kafkalite.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSessionCache,
    FetchSessionHandler,
    next_epoch,
)
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import FetchPartition, FetchPartitionResponse, TopicPartition

A, B, C = (TopicPartition("t", i) for i in range(3))


def fp(tp: TopicPartition, offset: int = 0) -> FetchPartition:
    return FetchPartition(tp=tp, fetch_offset=offset)


def answer(tp: TopicPartition, hw: int = 5, records: bytes = b"", error: int = 0) -> FetchPartitionResponse:
    return FetchPartitionResponse(
        tp=tp, error_code=error, high_watermark=hw, last_stable_offset=hw, log_start_offset=0, records=records
    )


def context(cache: FetchSessionCache, sid: int, epoch: int, parts=(), forgotten=(), now: int = 0):
    return cache.context(
        session_id=sid,
        session_epoch=epoch,
        partitions=tuple(parts),
        forgotten=tuple(forgotten),
        follower=True,
        now_ms=now,
    )


def test_epochs_wrap_past_zero() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1 and next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1, "0 would mean a new session"
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_session_opens_then_names_only_what_changed() -> None:
    cache = FetchSessionCache(10, 120_000, seed="s")
    full = context(cache, 0, INITIAL_EPOCH, [fp(A), fp(B), fp(C)])
    assert full.session is not None and full.session_id > 0 and full.full
    assert full.select([answer(A), answer(B), answer(C)]) == (answer(A), answer(B), answer(C))
    # next: B moved on; C forgotten. The broker reads the session's partitions: A and B.
    inc = context(cache, full.session_id, 1, [fp(B, 3)], [C])
    assert inc.error_code == 0 and not inc.full
    assert [p.tp for p in inc.partitions] == [A, B] and inc.partitions[1].fetch_offset == 3
    # Only what has news is sent: records for B; A's marks did not move.
    assert inc.select([answer(A), answer(B, records=b"x")]) == (answer(B, records=b"x"),)
    again = context(cache, full.session_id, 2)
    assert again.select([answer(A, hw=6), answer(B)]) == (answer(A, hw=6),), "a moved HW is news"


def test_an_error_is_sent_and_the_partition_again_once_it_clears() -> None:
    cache = FetchSessionCache(10, 120_000, seed="s")
    sid = context(cache, 0, INITIAL_EPOCH, [fp(A)]).session_id
    failed = answer(A, hw=-1, error=6)
    assert context(cache, sid, 1).select([failed]) == (failed,)
    assert context(cache, sid, 2).select([answer(A)]) == (answer(A),), "resent after the error"
    assert context(cache, sid, 3).select([answer(A)]) == ()


def test_unknown_sessions_and_wrong_epochs_are_refused() -> None:
    cache = FetchSessionCache(10, 120_000, seed="s")
    sid = context(cache, 0, INITIAL_EPOCH, [fp(A)]).session_id
    assert context(cache, sid + 1, 1).error_code == FetchSessionIdNotFoundError.code
    assert context(cache, sid, 5).error_code == InvalidFetchSessionEpochError.code
    assert context(cache, sid, 1).error_code == 0, "a refused fetch does not move the epoch"
    # epoch -1 closes the session and fetches in full without one
    closing = context(cache, sid, FINAL_EPOCH, [fp(A)])
    assert closing.session is None and closing.session_id == 0 and closing.partitions == (fp(A),)
    assert context(cache, sid, 2).error_code == FetchSessionIdNotFoundError.code


def test_a_full_cache_evicts_only_idle_sessions() -> None:
    assert context(FetchSessionCache(0, 120_000, seed="s"), 0, INITIAL_EPOCH, [fp(A)]).session is None
    cache = FetchSessionCache(1, 1_000, seed="s")
    first = context(cache, 0, INITIAL_EPOCH, [fp(A)], now=0).session_id
    assert context(cache, 0, INITIAL_EPOCH, [fp(B)], now=500).session is None, "the first is busy"
    second = context(cache, 0, INITIAL_EPOCH, [fp(B)], now=1_000)
    assert second.session is not None and list(cache.sessions) == [second.session_id]
    assert context(cache, first, 1).error_code == FetchSessionIdNotFoundError.code


def test_the_handler_sends_full_then_only_changes() -> None:
    h = FetchSessionHandler()
    assert h.build([fp(A), fp(B)]) == (0, INITIAL_EPOCH, (fp(A), fp(B)), ())
    h.on_response(INITIAL_EPOCH, 0, 77)
    assert h.build([fp(A), fp(B, 4)]) == (77, 1, (fp(B, 4),), ())
    h.on_response(1, 0, 77)
    assert h.build([fp(B, 4), fp(C)]) == (77, 2, (fp(C),), (A,))
    assert h.sent == {B: fp(B, 4), C: fp(C)}, "what the leader's session holds"
    h.on_response(2, FetchSessionIdNotFoundError.code, 0)
    assert h.build([fp(B, 4)]) == (0, INITIAL_EPOCH, (fp(B, 4),), ()), "an error starts over in full"


# --------------------------------------------------------------------------------- followers in a cluster
@pytest.fixture
def fetches(monkeypatch):
    """Every follower fetch a broker handles: (session epoch, partitions named)."""
    seen: list[tuple[int, int]] = []
    inner = ReplicaManager.handle_fetch

    def counted(self, env, src):
        if env.request.replica_id >= 0:
            seen.append((env.request.session_epoch, len(env.request.partitions)))
        return inner(self, env, src)

    monkeypatch.setattr(ReplicaManager, "handle_fetch", counted)
    return seen


def _produce(c: Cluster, n: int) -> None:
    p = c.producer(config={"acks": "all"})
    for i in range(n):
        p.send("t", b"v%d" % i)
        c.net.run_for(5)
    p.flush()
    assert c.run_until(p.idle, 30_000), "the records were acknowledged"


def test_followers_fetch_incrementally_and_replicate_the_same(fetches) -> None:
    with Cluster(brokers=3, seed=3) as c:
        c.create_topic("idle", 30, 3)
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        c.net.run_for(2_000)
        fetches.clear()
        _produce(c, 50)
        assert c.high_watermark("t", 0) == 50
        for b in c.replicas("t", 0):
            assert c.brokers[b].rm.partition(TopicPartition("t", 0)).log_end_offset == 50
        incremental = [n for epoch, n in fetches if epoch > 0]
        assert len(incremental) == len(fetches), "every follower fetch is in its session"
        # each follower follows about 20 partitions at each leader; a fetch names what moved
        assert max(incremental) <= 1 and sum(incremental) >= 50
        c.net.run_for(40_000)  # longer than replica.lag.time.max.ms: idle partitions keep their ISR
        assert all(len(c.isr("idle", p)) == 3 for p in range(30)), "an idle follower left the ISR"


def test_a_restarted_leader_makes_its_followers_start_over(fetches) -> None:
    with Cluster(brokers=3, seed=5) as c:
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        _produce(c, 10)
        leader = c.leader("t", 0)
        events = collections.Counter()
        for b in c.brokers:
            if b != leader:
                # a follower that keeps its session id while the leader restarts gets refused once
                for f in c.brokers[b].rm.fetcher_manager.fetchers.values():
                    events[f.session.session_id > 0] += 1
        assert events[True] >= 1, "followers hold sessions"
        c.crash(leader)
        c.net.run_for(5_000)
        c.restart(leader)
        c.net.run_for(20_000)
        _produce(c, 10)
        assert c.high_watermark("t", 0) == 20
        assert len(c.isr("t", 0)) == 3, "the restarted broker caught up"
        assert any(epoch == INITIAL_EPOCH for epoch, _ in fetches), "a session opened again"


def test_sessions_off_fetches_in_full(fetches) -> None:
    config = {"max.incremental.fetch.session.cache.slots": 0}
    with Cluster(brokers=3, seed=3, config=config) as c:
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        _produce(c, 10)
        assert c.high_watermark("t", 0) == 10
        assert {epoch for epoch, _ in fetches} == {INITIAL_EPOCH}, "every fetch asks for a session"
        for b in c.brokers:
            assert c.brokers[b].rm.fetch_sessions.sessions == {}, "none is opened"


# --------------------------------------------------------------------------------------- a real client
def test_kafka_python_reads_through_an_incremental_session(monkeypatch) -> None:
    """kafka-python keeps a fetch session per broker (its FetchSessionHandler): it gets one, and reads
    every record while records keep arriving in several fetches."""
    from kafka import KafkaConsumer, KafkaProducer

    from kafkalite.host.server import BackgroundServer

    consumer_fetches: list[tuple[int, int]] = []
    inner = ReplicaManager.handle_fetch

    def counted(self, env, src):
        if env.request.replica_id < 0:
            consumer_fetches.append((env.request.session_id, env.request.session_epoch))
        return inner(self, env, src)

    monkeypatch.setattr(ReplicaManager, "handle_fetch", counted)
    with BackgroundServer(1) as srv:
        srv.create_topic("s", 3, 1)
        producer = KafkaProducer(bootstrap_servers=srv.bootstrap_servers)
        consumer = KafkaConsumer(
            "s", bootstrap_servers=srv.bootstrap_servers, auto_offset_reset="earliest", group_id=None,
            fetch_max_wait_ms=50,
        )  # fmt: skip
        got: list[bytes] = []
        for round_ in range(5):
            for i in range(20):
                producer.send("s", b"r%d-%d" % (round_, i), partition=i % 3)
            producer.flush()
            for _ in range(40):
                got += [m.value for ms in consumer.poll(200).values() for m in ms]
                if len(got) == 20 * (round_ + 1):
                    break
        consumer.close()
        producer.close()
    assert sorted(got) == sorted(b"r%d-%d" % (r, i) for r in range(5) for i in range(20))
    assert len(got) == len(set(got)), "a record came twice"
    assert any(sid > 0 and epoch > 0 for sid, epoch in consumer_fetches), "no incremental fetch"


# ------------------------------------------------------------------- the leader's work per session fetch
def test_a_parked_fetch_reads_again_only_the_partitions_that_moved(monkeypatch) -> None:
    """A follower's parked fetch completes when a record arrives in one partition of its session; at
    completion the leader reads that partition again and reuses its first answer for the others."""
    from kafkalite.broker.partition import Partition

    with Cluster(brokers=3, seed=3) as c:
        c.create_topic("idle", 30, 3)
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        c.net.run_for(2_000)
        reads = collections.Counter()
        inner = Partition.read_records

        def counted(self, req, fp, **kw):
            if req.replica_id >= 0:
                reads[self.tp.topic] += 1
            return inner(self, req, fp, **kw)

        monkeypatch.setattr(Partition, "read_records", counted)
        _produce(c, 20)
        assert c.high_watermark("t", 0) == 20
    # each follower fetch reads its session once on arrival; only "t" is read again at completion
    # read once: about 5.6 idle partitions per read of "t" here; read again at completion, about 11
    assert reads["t"] > 0 and reads["idle"] < 8 * reads["t"], dict(reads)


def test_an_append_looks_only_at_its_own_partition_of_a_parked_fetch(monkeypatch) -> None:
    """An append tries each parked fetch watching its partition. Every earlier try found the fetch's
    partitions empty and still led here, so only the appended partition needs looking at: one per
    parked follower fetch per append, not the whole session (31 partitions here). Replication is
    unchanged: every record reaches all three replicas."""
    from kafkalite.broker.delayed import DelayedFetch

    with Cluster(brokers=3, seed=3) as c:
        c.create_topic("idle", 30, 3)
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        c.net.run_for(2_000)
        looked = collections.Counter()
        inner_look, inner_at = DelayedFetch._look, DelayedFetch.try_complete_at
        keyed = [False]

        def look(self, fp):
            if keyed[0]:
                looked[fp.tp.topic] += 1
            return inner_look(self, fp)

        def at(self, key):
            keyed[0] = True
            try:
                return inner_at(self, key)
            finally:
                keyed[0] = False

        monkeypatch.setattr(DelayedFetch, "_look", look)
        monkeypatch.setattr(DelayedFetch, "try_complete_at", at)
        _produce(c, 20)
        assert c.high_watermark("t", 0) == 20
        c.net.run_for(1_000)
        assert set(c.log_end_offsets("t", 0).values()) == {20}, c.log_end_offsets("t", 0)
    assert looked["t"] > 0, "no append tried a parked fetch"
    assert looked["idle"] == 0, f"an append to t looked at {looked['idle']} idle partitions"


def test_a_follower_fetch_at_the_same_offset_leaves_the_hw_alone(monkeypatch) -> None:
    """As Kafka's updateFollowerFetchState: the HW is recomputed only when a follower's log end (or log
    start) moved, not for each idle partition of each fetch."""
    from kafkalite.broker.partition import Partition

    with Cluster(brokers=3, seed=3) as c:
        c.create_topic("idle", 30, 3)
        c.net.run_for(5_000)
        calls = []
        inner = Partition.maybe_increment_hw
        monkeypatch.setattr(
            Partition,
            "maybe_increment_hw",
            lambda self, *a, **k: calls.append(self.tp) or inner(self, *a, **k),
        )
        c.net.run_for(10_000)  # idle: the followers fetch every partition again and again
        assert calls == [], f"the HW was recomputed {len(calls)} times with nothing moving"
        assert all(len(c.isr("idle", p)) == 3 for p in range(30))


def test_a_parked_follower_fetch_sees_what_its_own_update_set_off() -> None:
    """The follower's fetch that moves a HW completes a waiting coordinator append, whose callback appends
    to another partition of the same fetch session. The fetch was parked before that update ran, so the
    append completes it at once: the follower has the new record well within replica.fetch.wait.max.ms
    (500 ms), not at the fetch's timeout."""
    from kafkalite.records import build_values_batch

    with Cluster(brokers=2, seed=5) as c:
        c.create_topic("t", 4, 2)
        c.net.run_for(2_000)
        x, y = [TopicPartition("t", i) for i in range(4) if c.leader("t", i) == c.leader("t", 0)][:2]
        leader = c.leader("t", 0)
        follower = next(b for b in c.replicas("t", x.partition) if b != leader)
        rm = c.brokers[leader].rm
        fired: list[int] = []

        def then_append_to_y(_answer) -> None:
            fired.append(c.net._now)
            rm.append_records(y, build_values_batch([b"after"], [c.net._now]), lambda _a: None, acks=1)

        rm.append_records(x, build_values_batch([b"first"], [c.net._now]), then_append_to_y, acks=-1)
        while not fired:
            c.net.run_for(1)
        t0 = fired[0]
        while c.replica(follower, "t", y.partition).log_end_offset < 1 and c.net._now < t0 + 1_000:
            c.net.run_for(1)
        took = c.net._now - t0
    assert took < 100, f"the follower got the record {took} ms after the append (fetch timeout 500 ms)"


# ------------------------------------------------------------- the memo of an idle partition's answer
class _FollowerSession:
    """A fetch session of follower ``replica`` at the leader of ``tp``, driven by hand: each ``fetch``
    goes straight to the leader's ``handle_fetch`` (max_wait_ms=0) and returns its answer, with the
    partitions it read (``Partition.read_records`` calls) in ``reads``."""

    def __init__(self, c: Cluster, tp: TopicPartition, replica: int, monkeypatch) -> None:
        from kafkalite.broker.partition import Partition

        self.rm = c.brokers[c.leader(tp.topic, tp.partition)].rm
        self.replica = replica
        self.reads: list[TopicPartition] = []
        self.answers: list = []
        self.id, self.epoch = 0, INITIAL_EPOCH
        self.request = None
        self.name = f"session-of-{replica}"
        inner_send, inner_read = self.rm._send, Partition.read_records

        def send(dst, msg):  # our answers stay here; the broker's own traffic goes on
            return self.answers.append(msg) if dst == self.name else inner_send(dst, msg)

        def read(p, req, fp, **kw):
            if req is self.request:
                self.reads.append(p.tp)
            return inner_read(p, req, fp, **kw)

        monkeypatch.setattr(self.rm, "_send", send)
        monkeypatch.setattr(Partition, "read_records", read)

    def at_log_end(self, tp: TopicPartition) -> FetchPartition:
        p = self.rm.partition(tp)
        return FetchPartition(
            tp=tp,
            fetch_offset=p.log_end_offset,
            log_start_offset=p.log.log_start_offset,
            current_leader_epoch=p.leader_epoch,
            last_fetched_epoch=p.log.leader_epoch_cache.latest_epoch,
        )

    def fetch(self, parts=(), *, session: bool = True):
        from kafkalite.protocol import FetchRequest, RequestEnvelope

        self.reads.clear()
        sid, epoch = (self.id, self.epoch) if session else (0, FINAL_EPOCH)
        req = FetchRequest(
            replica_id=self.replica,
            max_wait_ms=0,
            session_id=sid,
            session_epoch=epoch,
            partitions=tuple(parts),
        )
        self.request = req
        self.rm.handle_fetch(RequestEnvelope(len(self.answers), self.name, req), self.name)
        answer = self.answers[-1].response
        assert answer.error_code == 0, answer
        if session:
            self.id, self.epoch = answer.session_id, next_epoch(epoch)
        return answer


@pytest.fixture
def idle_cluster():
    """3 brokers; ``t-0`` holds 5 records every replica has, ``idle`` 10 partitions none."""
    with Cluster(brokers=3, seed=3) as c:
        c.create_topic("idle", 10, 3)
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        _produce(c, 5)
        c.net.run_for(1_000)
        assert set(c.log_end_offsets("t", 0).values()) == {5}
        yield c


def _session_at_leader_of_t(c: Cluster, monkeypatch) -> tuple[_FollowerSession, int, int]:
    """A session of one follower of t-0 (``f``; ``g`` is the other) naming every partition its leader
    leads, each at its log end, after one incremental fetch that read them all."""
    leader = c.leader("t", 0)
    f, g = (b for b in c.replicas("t", 0) if b != leader)
    s = _FollowerSession(c, TopicPartition("t", 0), f, monkeypatch)
    led = [TopicPartition("idle", i) for i in range(10) if c.leader("idle", i) == leader]
    assert led, "the leader of t-0 leads idle partitions too"
    s.fetch([s.at_log_end(tp) for tp in [TopicPartition("t", 0), *led]])
    s.fetch()
    assert len(s.reads) == 1 + len(led), "the first incremental fetch reads every partition"
    return s, f, g


def test_a_repeated_follower_fetch_does_not_read_its_idle_partitions_again(idle_cluster, monkeypatch) -> None:
    """The leader keeps the empty answer of each partition of a follower's session that it is caught up
    on, and sends it again while nothing it depends on moved: no read, and nothing new to send."""
    s, f, _ = _session_at_leader_of_t(idle_cluster, monkeypatch)
    for _ in range(3):
        assert s.fetch().partitions == (), "nothing new"
        assert s.reads == [], f"read again: {s.reads}"
    p = s.rm.partition(TopicPartition("t", 0))
    assert f in p.isr and p.remotes[f].log_end_offset == 5
    # a sessionless follower fetch and a consumer's session keep reading
    s.fetch([s.at_log_end(TopicPartition("t", 0))], session=False)
    assert s.reads == [TopicPartition("t", 0)]
    consumer = _FollowerSession(idle_cluster, TopicPartition("t", 0), -1, monkeypatch)
    consumer.fetch([consumer.at_log_end(TopicPartition("t", 0))])
    for _ in range(2):
        assert consumer.fetch().partitions == ()
        assert consumer.reads == [TopicPartition("t", 0)], "a consumer's fetch reads"


def test_a_change_the_answer_shows_is_sent_though_the_log_end_stays(idle_cluster, monkeypatch) -> None:
    """A HW move, a log start move (DeleteRecords) and a leader epoch bump, each at the same log end
    offset: the next fetch of the session reads the partition again and sends what changed."""
    from types import SimpleNamespace

    from kafkalite.errors import FencedLeaderEpochError
    from kafkalite.protocol import DeleteRecordsPartition, DeleteRecordsRequest, RequestEnvelope
    from kafkalite.records import build_values_batch

    c = idle_cluster
    tp = TopicPartition("t", 0)
    s, f, g = _session_at_leader_of_t(c, monkeypatch)
    p = s.rm.partition(tp)
    s.rm.append_records(tp, build_values_batch([b"six"], [c.net._now]), lambda _a: None, acks=1)
    assert [(r.tp, len(r.records) > 0) for r in s.fetch().partitions] == [(tp, True)], "the new record"
    s.fetch([s.at_log_end(tp)])  # f is at 6 now; the HW waits for g
    assert (p.log_end_offset, p.high_watermark) == (6, 5)
    assert s.fetch().partitions == () and s.reads == [], "kept: nothing moved"

    # g's fetch moves the HW, not the log end
    other = _FollowerSession(c, tp, g, monkeypatch)
    other.fetch([other.at_log_end(tp)], session=False)
    assert (p.log_end_offset, p.high_watermark) == (6, 6)
    assert [(r.tp, r.high_watermark) for r in s.fetch().partitions] == [(tp, 6)], "the new HW"
    assert s.reads != []

    # DeleteRecords moves the log start, not the log end
    req = DeleteRecordsRequest(partitions=(DeleteRecordsPartition(tp=tp, offset=3),), timeout_ms=0)
    s.rm.handle_delete_records(RequestEnvelope(99, s.name, req), s.name)
    assert (p.log_end_offset, p.log.log_start_offset) == (6, 3)
    assert [(r.tp, r.log_start_offset) for r in s.fetch().partitions] == [(tp, 3)], "the new log start"
    assert s.fetch().partitions == () and s.reads == [], "kept again"

    # a new leader epoch on the same leader, at the same log end: the follower's epoch is fenced
    state = SimpleNamespace(
        leader=p.leader_id,
        leader_epoch=p.leader_epoch + 1,
        partition_epoch=p.partition_epoch + 1,
        controller_epoch=p.controller_epoch,
        replicas=p.replicas,
        isr=p.isr,
    )
    p.make_leader(state, c.net._now)
    assert p.log_end_offset == 6
    assert [(r.tp, r.error_code) for r in s.fetch().partitions] == [(tp, FencedLeaderEpochError.code)]


def test_a_follower_outside_the_isr_rejoins_on_a_kept_answer(idle_cluster, monkeypatch) -> None:
    """A follower caught up on an idle partition, but not in its ISR (dropped while its broker was
    fenced, say), is proposed for the ISR again by its next fetch, whose answer is the kept one."""
    s, f, _ = _session_at_leader_of_t(idle_cluster, monkeypatch)
    proposals: list = []
    monkeypatch.setattr(
        s.rm.alter_partition_manager, "submit", lambda p, isr, why: proposals.append((p.tp, isr))
    )
    s.fetch()
    assert proposals == [] and s.reads == []
    idle = next(i for i in range(10) if idle_cluster.leader("idle", i) == s.rm.broker_id)
    p = s.rm.partition(TopicPartition("idle", idle))
    p.isr = tuple(r for r in p.isr if r != f)
    s.fetch()
    assert s.reads == [], "the answer was the kept one"
    assert proposals == [(p.tp, tuple(sorted((*p.isr, f))))], "the follower is proposed for the ISR"


def test_a_follower_that_stops_fetching_leaves_the_isr_of_a_busy_partition() -> None:
    """Only a follower's own fetches refresh its caught-up time: one cut off from the leader leaves the
    ISR of a partition that got new records, while the other follower's fetches go on, answered from
    their memos once it is at the log end again. At the idle partitions, where the silent one is at the
    log end, it stays (Kafka's isCaughtUp)."""
    with Cluster(brokers=3, seed=3, config={"replica.lag.time.max.ms": 2_000}) as c:
        c.create_topic("idle", 10, 3)
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        c.net.run_for(2_000)
        leader = c.leader("t", 0)
        g = next(b for b in c.replicas("t", 0) if b != leader)
        c.cut(leader, g)
        p = c.producer(config={"acks": 1})
        for i in range(5):
            p.send("t", b"v%d" % i)
        p.flush()
        assert c.run_until(p.idle, 10_000)
        assert c.run_until(lambda: g not in c.isr("t", 0), 10_000), "the silent follower stayed in the ISR"
        lagging = [e for e in c.events("isr_lagging", node=leader) if e.fields["replica"] == g]
        assert lagging, "the leader dropped it for lagging"
        led = [i for i in range(10) if c.leader("idle", i) == leader]
        assert led and all(g in c.isr("idle", i) for i in led)
