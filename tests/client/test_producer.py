"""Producer tests against a small fake broker on a SimNetwork (no real broker needed)."""

from __future__ import annotations

import pytest

from kafkalite.client.accumulator import NotCompletedError
from kafkalite.client.partitioner import partition_for_key
from kafkalite.client.producer import Producer, ProducerClosedError
from kafkalite.config.producer import ProducerConfig
from kafkalite.errors import (
    InvalidConfigError,
    MessageTooLargeError,
    RecordListTooLargeError,
    RequestTimedOutError,
)
from kafkalite.harness.checker import ACKED, FAILED, UNKNOWN, SendRecord, check_history
from kafkalite.net.sim import BaseNode, SimNetwork
from kafkalite.protocol import (
    BrokerEndpoint,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    RequestEnvelope,
    TopicMetadata,
    TopicPartition,
)
from kafkalite.records import decode_batch_tuples

NOT_LEADER = 6


class FakeCluster:
    """Shared state of the fake brokers: leaders, logs and what every broker received."""

    def __init__(self, net: SimNetwork, brokers: int = 1) -> None:
        self.net = net
        self.leaders: dict[TopicPartition, int] = {}
        self.epochs: dict[TopicPartition, int] = {}
        self.logs: dict[TopicPartition, list[bytes]] = {}
        self.brokers = [FakeBroker(self, i) for i in range(1, brokers + 1)]
        for b in self.brokers:
            net.add_node(b.broker_id, b)

    def create(self, topic: str, partitions: int, leader: int | list[int] = 1) -> None:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            self.leaders[tp] = leader if isinstance(leader, int) else leader[p]
            self.epochs[tp] = 0
            self.logs[tp] = []

    def move_leader(self, tp: TopicPartition, to: int) -> None:
        self.leaders[tp] = to
        self.epochs[tp] += 1

    def values(self, topic: str, partition: int = 0) -> list[bytes]:
        return self.logs[TopicPartition(topic, partition)]


class FakeBroker(BaseNode):
    def __init__(self, cluster: FakeCluster, broker_id: int) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.requests: list[ProduceRequest] = []
        self.metadata_requests = 0
        self.errors: dict[TopicPartition, list[int]] = {}  # next error codes to answer, per partition
        self.delay_ms = 0
        self.drop_responses = 0  # append, but do not answer, the next N produce requests
        self.outstanding = 0
        self.max_outstanding = 0
        self.stale_leaders: dict[TopicPartition, int] | None = None  # metadata this broker believes

    def on_message(self, src, msg, now_ms):
        assert isinstance(msg, RequestEnvelope)
        req = msg.request
        if isinstance(req, MetadataRequest):
            self.metadata_requests += 1
            self.send(src, msg.reply(self._metadata(req)))
            return
        assert isinstance(req, ProduceRequest)
        self.requests.append(req)
        out = []
        for part in req.partitions:
            codes = self.errors.get(part.tp)
            if codes:
                out.append(ProducePartitionResponse(tp=part.tp, error_code=codes.pop(0)))
                continue
            if self.cluster.leaders.get(part.tp) != self.broker_id:
                out.append(ProducePartitionResponse(tp=part.tp, error_code=NOT_LEADER))
                continue
            _, rows = decode_batch_tuples(part.records)
            log = self.cluster.logs[part.tp]
            base = len(log)
            log.extend(r[3] for r in rows)
            out.append(ProducePartitionResponse(tp=part.tp, base_offset=base))
        if req.acks == 0:
            return
        if self.drop_responses:
            self.drop_responses -= 1
            return
        reply = msg.reply(ProduceResponse(partitions=tuple(out)))
        self.outstanding += 1
        self.max_outstanding = max(self.max_outstanding, self.outstanding)
        self.set_timer(self.delay_ms, lambda now, r=reply: self._answer(src, r))

    def _answer(self, src, reply):
        self.outstanding -= 1
        self.send(src, reply)

    def _metadata(self, req: MetadataRequest) -> MetadataResponse:
        leaders = self.stale_leaders or self.cluster.leaders
        topics = []
        for name in req.topics or sorted({tp.topic for tp in leaders}):
            parts = sorted((tp.partition, lead) for tp, lead in leaders.items() if tp.topic == name)
            if not parts:
                topics.append(TopicMetadata(name=name, error_code=3))
                continue
            topics.append(
                TopicMetadata(
                    name=name,
                    partitions=tuple(
                        PartitionMetadata(
                            partition=p,
                            leader_id=lead,
                            leader_epoch=self.cluster.epochs[TopicPartition(name, p)],
                        )
                        for p, lead in parts
                    ),
                )
            )
        brokers = tuple(BrokerEndpoint(node_id=b.broker_id) for b in self.cluster.brokers)
        return MetadataResponse(brokers=brokers, topics=tuple(topics))


def setup(brokers: int = 1, partitions: int = 1, leader=1, seed: int = 0, **config):
    net = SimNetwork(seed, log_messages="none")
    cluster = FakeCluster(net, brokers)
    cluster.create("t", partitions, leader)
    # The fake brokers keep no producer state, so these producers run without idempotence (tests of the
    # idempotent producer use real brokers).
    producer = Producer("producer-1", [1], {"enable.idempotence": False, **config})
    net.add_node("producer-1", producer)
    return net, cluster, producer


def produce_requests(cluster: FakeCluster) -> list[ProduceRequest]:
    return [r for b in cluster.brokers for r in b.requests]


# ---------------------------------------------------------------------------------------------- config


def test_config_defaults_and_names():
    cfg = ProducerConfig.from_props({})
    assert cfg.acks == -1 and cfg["acks"] == "all"
    assert cfg.batch_size == 16384 and cfg.linger_ms == 5
    assert cfg.retries == 2147483647 and cfg.delivery_timeout_ms == 120_000
    assert cfg.request_timeout_ms == 30_000 and cfg.retry_backoff_ms == 100
    assert cfg.max_in_flight == 5 and cfg.max_request_size == 1_048_576
    assert cfg["compression.type"] == "none" and cfg["enable.idempotence"] is True and cfg.idempotence
    assert ProducerConfig.from_props({"linger_ms": 7, "acks": 1}).linger_ms == 7


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"lingerms": 1}, "lingerms"),
        ({"acks": 2}, "acks"),
        ({"batch.size": -1}, "batch.size"),
        ({"linger.ms": "soon"}, "linger.ms"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"enable.idempotence": True, "acks": 1}, "enable.idempotence"),
        ({"enable.idempotence": True, "retries": 0}, "enable.idempotence"),
        ({"enable.idempotence": True, "max.in.flight.requests.per.connection": 6}, "enable.idempotence"),
        ({"max.in.flight.requests.per.connection": 0}, "max.in.flight.requests.per.connection"),
        ({"delivery.timeout.ms": 1000}, "delivery.timeout.ms"),
    ],
)
def test_config_rejects_bad_values(props, named):
    with pytest.raises(InvalidConfigError, match=named.replace(".", r"\.")):
        ProducerConfig.from_props(props)


def test_unset_idempotence_gives_way_to_conflicting_configs():
    # Kafka 3.2+: left unset, enable.idempotence is turned off by acks=0/1, retries=0 or > 5 in flight.
    for props in ({"acks": 1}, {"acks": 0}, {"retries": 0}, {"max.in.flight.requests.per.connection": 6}):
        cfg = ProducerConfig.from_props(props)
        assert cfg.idempotence is False and cfg["enable.idempotence"] is False
    assert ProducerConfig.from_props({"acks": "all"}).idempotence is True


def test_delivery_timeout_raised_to_floor_when_not_set():
    cfg = ProducerConfig.from_props({"request.timeout.ms": 200_000})
    assert cfg.delivery_timeout_ms == 200_005


# --------------------------------------------------------------------------------------------- batching


def test_linger_collects_records_into_one_batch():
    net, cluster, p = setup(linger_ms=50)
    futs = [p.send("t", f"v{i}".encode()) for i in range(10)]
    net.run_for(40)
    assert produce_requests(cluster) == [] and not futs[0].done()
    net.run_for(20)
    reqs = produce_requests(cluster)
    assert len(reqs) == 1 and len(reqs[0].partitions) == 1
    assert cluster.values("t") == [f"v{i}".encode() for i in range(10)]
    assert [f.result().offset for f in futs] == list(range(10))
    with pytest.raises(NotCompletedError):
        p.send("t", b"late").result()


def test_batch_size_closes_batches_before_linger():
    net, cluster, p = setup(linger_ms=10_000, batch_size=1000)
    for i in range(30):
        p.send("t", bytes([i]) * 100)
    net.run_for(20)  # full batches leave at once, the open tail waits for linger.ms
    sizes = [
        len(decode_batch_tuples(pp.records)[1]) for r in produce_requests(cluster) for pp in r.partitions
    ]
    assert sizes and all(n == sizes[0] for n in sizes) and sizes[0] < 30
    assert sum(sizes) < 30  # the last, partial batch is still lingering
    assert all(len(pp.records) <= 1000 for r in produce_requests(cluster) for pp in r.partitions)
    net.run_for(10_000)
    assert len(cluster.values("t")) == 30


def test_flush_sends_lingering_batches_now():
    net, cluster, p = setup(linger_ms=60_000)
    fut = p.send("t", b"x")
    p.flush()
    net.run_for(5)
    assert fut.done() and fut.result().offset == 0
    assert p.idle()


def test_one_request_per_broker_with_one_batch_per_partition():
    net, cluster, p = setup(brokers=2, partitions=4, leader=[1, 2, 1, 2], linger_ms=5)
    for part in range(4):
        for i in range(3):
            p.send("t", f"{part}-{i}".encode(), partition=part)
    net.run_for(50)
    b1, b2 = cluster.brokers
    assert len(b1.requests) == 1 and len(b2.requests) == 1
    assert sorted(pp.tp.partition for pp in b1.requests[0].partitions) == [0, 2]
    assert sorted(pp.tp.partition for pp in b2.requests[0].partitions) == [1, 3]


def test_compression_type_is_used_for_batches():
    net, cluster, p = setup(compression_type="gzip")
    p.send("t", b"a" * 500)
    net.run_for(20)
    header, rows = decode_batch_tuples(produce_requests(cluster)[0].partitions[0].records)
    assert header.attributes & 0x7 == 1 and rows[0][3] == b"a" * 500


# ----------------------------------------------------------------------------------------- partitioning


def test_key_goes_to_murmur2_partition_and_explicit_partition_wins():
    net, cluster, p = setup(partitions=6)
    keys = [f"user-{i}".encode() for i in range(40)]
    futs = [p.send("t", b"v" + k, key=k) for k in keys]
    explicit = p.send("t", b"explicit", key=keys[0], partition=5)
    net.run_for(50)
    for k, f in zip(keys, futs, strict=True):
        assert f.result().partition == partition_for_key(k, 6)
    assert explicit.result().partition == 5
    assert b"explicit" in cluster.values("t", 5)


def test_keyless_records_stick_to_one_partition_per_batch():
    net, cluster, p = setup(partitions=4, seed=3, batch_size=16384)
    futs = [p.send("t", b"x" * 10) for _ in range(50)]
    net.run_for(50)
    assert len({f.result().partition for f in futs}) == 1  # far below batch.size: one sticky partition


def test_sends_before_metadata_wait_and_unknown_topic_times_out():
    net, cluster, p = setup(max_block_ms=500)
    ok = p.send("t", b"a")
    missing = p.send("nope", b"b")
    net.run_for(100)
    assert ok.result().offset == 0 and not missing.done()
    net.run_for(500)
    assert isinstance(missing.exception(), RequestTimedOutError)


# ------------------------------------------------------------------------------------------------ acks


@pytest.mark.parametrize(("acks", "wire"), [(0, 0), (1, 1), ("all", -1), (-1, -1)])
def test_acks_and_timeout_go_into_the_request(acks, wire):
    net, cluster, p = setup(acks=acks, request_timeout_ms=1234)
    fut = p.send("t", b"v")
    net.run_for(50)
    req = produce_requests(cluster)[0]
    assert req.acks == wire and req.timeout_ms == 1234
    md = fut.result()
    assert md.offset == (-1 if wire == 0 else 0)
    assert p.history[0].acks == wire and p.history[0].outcome == ACKED


def test_acks0_completes_when_the_request_is_sent_even_if_lost():
    net, cluster, p = setup(acks=0, linger_ms=0)
    p.send("t", b"warm-up")  # fetches the metadata
    net.run_for(10)
    fut = p.send("t", b"lost")
    net.after(0, lambda: net.crash(1))  # runs after the request left: it dies on the wire
    net.run_for(10)
    assert fut.result().offset == -1 and cluster.values("t") == [b"warm-up"]
    assert p.history[1].outcome == ACKED and p.history[1].offset is None


# --------------------------------------------------------------------------------------------- retries


def test_not_leader_refreshes_metadata_and_retries_on_new_leader():
    net, cluster, p = setup(brokers=2, retry_backoff_ms=10)
    first = p.send("t", b"a")
    net.run_for(20)
    assert first.result().offset == 0
    tp = TopicPartition("t", 0)
    cluster.move_leader(tp, 2)
    b1 = cluster.brokers[0]
    meta_before = b1.metadata_requests + cluster.brokers[1].metadata_requests
    fut = p.send("t", b"b")
    net.run_for(100)
    assert fut.result().offset == 1 and cluster.values("t") == [b"a", b"b"]
    assert len(cluster.brokers[1].requests) == 1
    assert b1.metadata_requests + cluster.brokers[1].metadata_requests > meta_before
    assert p.metrics["record-retry-total"] == 1
    assert [e.fields["error"] for e in net.events("retry")] == ["NOT_LEADER_OR_FOLLOWER"]


def test_stale_metadata_epoch_is_ignored():
    net, cluster, p = setup(brokers=2, retry_backoff_ms=10)
    p.send("t", b"a")
    net.run_for(20)
    tp = TopicPartition("t", 0)
    cluster.move_leader(tp, 2)
    cluster.brokers[0].stale_leaders = {tp: 1}  # broker 1 still thinks it leads, but with epoch 1
    cluster.epochs[tp] = 1
    p.metadata.update(cluster.brokers[1]._metadata(MetadataRequest(topics=("t",))), net.now_ms())
    assert p.metadata.leader_for(tp) == 2
    cluster.epochs[tp] = 0  # an older epoch naming broker 1 must not move the leader back
    p.metadata.update(cluster.brokers[0]._metadata(MetadataRequest(topics=("t",))), net.now_ms())
    assert p.metadata.leader_for(tp) == 2


def test_retries_exhausted_by_delivery_timeout():
    net, cluster, p = setup(
        delivery_timeout_ms=1000, request_timeout_ms=200, linger_ms=0, retry_backoff_ms=50
    )
    cluster.brokers[0].errors[TopicPartition("t", 0)] = [19] * 1000  # NOT_ENOUGH_REPLICAS, retriable
    errors = []
    fut = p.send("t", b"v", callback=lambda md, err: errors.append((net.now_ms(), err)))
    net.run_for(2000)
    # Kafka's TimeoutException (REQUEST_TIMED_OUT) once the batch is older than delivery.timeout.ms
    assert isinstance(fut.exception(), RequestTimedOutError)
    assert len(errors) == 1 and errors[0][0] == 2 + 1000  # created at 2 ms, once metadata came
    assert len(cluster.brokers[0].requests) > 3  # retried with backoff (50, 100, 200, 400 ms) until then
    # Every attempt was refused, so nothing was written: a definite failure.
    assert p.history[0].outcome == FAILED and p.history[0].error == "REQUEST_TIMED_OUT"


def test_batch_that_never_gets_a_leader_expires_with_timeout():
    net, cluster, p = setup(delivery_timeout_ms=600, request_timeout_ms=100, linger_ms=0)
    net.run_for(0)
    cluster.leaders[TopicPartition("t", 0)] = -1
    fut = p.send("t", b"v", partition=0)
    net.run_for(1000)
    err = fut.exception()
    assert isinstance(err, RequestTimedOutError) and "since batch creation" in str(err)
    assert p.history[0].outcome == FAILED


def test_retries_zero_fails_at_first_error():
    net, cluster, p = setup(retries=0)
    cluster.brokers[0].errors[TopicPartition("t", 0)] = [6]
    fut = p.send("t", b"v")
    net.run_for(100)
    assert fut.exception().name == "NOT_LEADER_OR_FOLLOWER"


def test_request_timeout_then_retry_writes_a_duplicate():
    net, cluster, p = setup(request_timeout_ms=300, linger_ms=0, retry_backoff_ms=10)
    cluster.brokers[0].drop_responses = 1  # the broker appends, the answer never comes
    fut = p.send("t", b"once")
    net.run_for(200)
    assert not fut.done() and cluster.values("t") == [b"once"]
    net.run_for(400)
    assert fut.result().offset == 1
    assert cluster.values("t") == [b"once", b"once"]  # the retry wrote it again: no idempotence
    assert p.metrics["request-timeout-total"] == 1
    report = check_history(p.history, {("t", 0): list(enumerate(cluster.values("t")))})
    assert [a.kind for a in report.anomalies] == ["duplicate"]


def test_late_response_after_timeout_is_ignored():
    net, cluster, p = setup(request_timeout_ms=100, linger_ms=0, retry_backoff_ms=10)
    cluster.brokers[0].delay_ms = 150
    fut = p.send("t", b"x")
    net.run_for(120)
    cluster.brokers[0].delay_ms = 0
    net.run_for(200)
    assert fut.result().offset == 1 and p.metrics["late-response-total"] == 1


def test_max_in_flight_is_respected():
    for limit in (1, 3):
        net, cluster, p = setup(
            partitions=6, linger_ms=0, max_in_flight_requests_per_connection=limit, batch_size=100
        )
        net.run_for(10)
        b = cluster.brokers[0]
        b.delay_ms = 50
        for i in range(60):
            p.send("t", bytes(60), partition=i % 6)
        net.run_for(2000)
        assert b.max_outstanding == limit
        assert len(cluster.values("t", 0)) == 10
        assert all(f.outcome == ACKED for f in p.history)


def test_message_too_large_fails_without_retry():
    net, cluster, p = setup(linger_ms=0)
    cluster.brokers[0].errors[TopicPartition("t", 0)] = [10]
    fut = p.send("t", b"big")
    net.run_for(100)
    assert isinstance(fut.exception(), MessageTooLargeError)
    assert len(cluster.brokers[0].requests) == 1
    assert p.history[0].outcome == FAILED and p.history[0].error == "MESSAGE_TOO_LARGE"


def test_message_too_large_splits_a_multi_record_batch():
    net, cluster, p = setup(linger_ms=20)
    cluster.brokers[0].errors[TopicPartition("t", 0)] = [10]
    futs = [p.send("t", f"r{i}".encode()) for i in range(4)]
    net.run_for(200)
    assert [f.result().offset for f in futs] == [0, 1, 2, 3]
    assert cluster.values("t") == [b"r0", b"r1", b"r2", b"r3"]
    assert p.metrics["batch-split-total"] == 1


def test_record_list_too_large_fails():
    net, cluster, p = setup(linger_ms=0)
    cluster.brokers[0].errors[TopicPartition("t", 0)] = [18]
    fut = p.send("t", b"v")
    net.run_for(100)
    assert isinstance(fut.exception(), RecordListTooLargeError)


def test_max_request_size_checked_client_side():
    net, cluster, p = setup(max_request_size=1000)
    seen = []
    fut = p.send("t", bytes(2000), callback=lambda md, err: seen.append(err))
    assert fut.done() and isinstance(fut.exception(), MessageTooLargeError)
    assert "max.request.size" in str(fut.exception()) and seen == [fut.exception()]
    net.run_for(50)
    assert produce_requests(cluster) == []


# ------------------------------------------------------------------------------------ callbacks/history


def test_callbacks_in_record_order_per_partition_and_completion_order():
    net, cluster, p = setup(brokers=2, partitions=2, leader=[1, 2], linger_ms=0)
    cluster.brokers[0].delay_ms = 30  # partition 0's broker answers later
    order = []
    for i in range(3):
        for part in (0, 1):
            p.send("t", f"{part}{i}".encode(), partition=part,
                   callback=lambda md, err, v=f"{part}{i}": order.append((v, md.offset)))  # fmt: skip
    net.run_for(200)
    assert order == [("10", 0), ("11", 1), ("12", 2), ("00", 0), ("01", 1), ("02", 2)]


def test_history_outcomes_feed_the_checker():
    net, cluster, p = setup(request_timeout_ms=100, delivery_timeout_ms=300, linger_ms=0, retry_backoff_ms=10)
    a = p.send("t", b"acked")
    net.run_for(20)
    cluster.brokers[0].drop_responses = 1000  # written, never answered: outcome unknown
    b = p.send("t", b"maybe")
    net.run_for(400)
    cluster.brokers[0].drop_responses = 0
    cluster.brokers[0].errors[TopicPartition("t", 0)] = [10]
    c = p.send("t", b"toolarge")
    net.run_for(100)
    assert a.result().offset == 0 and isinstance(b.exception(), RequestTimedOutError)
    assert isinstance(c.exception(), MessageTooLargeError)
    hist = p.history
    assert all(isinstance(h, SendRecord) for h in hist)
    assert [(h.id, h.outcome, h.offset, h.error) for h in hist] == [
        (b"acked", ACKED, 0, None),
        (b"maybe", UNKNOWN, None, "REQUEST_TIMED_OUT"),
        (b"toolarge", FAILED, None, "MESSAGE_TOO_LARGE"),
    ]
    assert [h.seq for h in hist] == [0, 1, 2] and hist[0].producer == "producer-1"
    log = cluster.values("t")
    report = check_history(hist, {("t", 0): list(enumerate(log))})
    # "maybe" was written by every unanswered attempt: duplicates (no idempotence), but nothing lost.
    assert log.count(b"maybe") > 1 and {a.kind for a in report.violations} == {"duplicate"}


def test_pending_sends_are_unknown_and_close_rejects_new_sends():
    net, cluster, p = setup(linger_ms=1000)
    p.send("t", b"q")
    assert p.history[0].outcome == UNKNOWN and p.history[0].error == "pending"
    p.close()
    with pytest.raises(ProducerClosedError):
        p.send("t", b"after")
    net.run_for(50)
    assert p.closed and cluster.values("t") == [b"q"]


def test_runs_are_deterministic():
    def run():
        net, cluster, p = setup(brokers=2, partitions=4, leader=[1, 2, 1, 2], seed=7, linger_ms=2)
        for i in range(200):
            p.send("t", f"v{i}".encode(), key=None if i % 3 else f"k{i}".encode())
            if i % 20 == 0:
                net.run_for(1)
        net.run_for(100)
        return [(h.id, h.partition, h.offset) for h in p.history]

    assert run() == run()


def test_producer_is_importable_from_the_client_package():
    from kafkalite.client import Producer as FromPackage

    assert FromPackage is Producer
