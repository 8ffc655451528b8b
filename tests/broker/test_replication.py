"""Replication core (ReplicaManager, Partition, fetcher, purgatory, leader epochs) on a SimNetwork with
tiny broker nodes, a fake controller that accepts every AlterPartition, and hand-made LeaderAndIsr."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kafkalite.broker.replica_manager import HIGH_WATERMARK_CHECKPOINT, ReplicaManager
from kafkalite.config.broker import BrokerConfig
from kafkalite.errors import (
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from kafkalite.net.sim import BaseNode, SimNetwork
from kafkalite.protocol import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    ProducePartition,
    ProduceRequest,
    RequestEnvelope,
    ResponseEnvelope,
    TopicPartition,
)
from kafkalite.records import build_batch
from kafkalite.storage.leader_epoch import LeaderEpochCache

TP = TopicPartition("t", 0)
CONTROLLER = 0


class Broker(BaseNode):
    def __init__(self, bid: int, root: Path, props: dict) -> None:
        self.bid, self.dir, self.props = bid, root / f"broker-{bid}", props
        self.lose_unflushed = False

    def bind(self, net, node_id) -> None:
        super().bind(net, node_id)
        self.rm = ReplicaManager(
            self.bid,
            self.dir,
            BrokerConfig.from_props({"broker.id": self.bid, **self.props}),
            clock=net.clock,
            send=self.send,
            set_timer=self.set_timer,
            cancel_timer=self.cancel_timer,
            controller_id=lambda: CONTROLLER,
            log_event=self.log,
        )

    def on_message(self, src, msg, now_ms) -> None:
        if isinstance(msg, ResponseEnvelope):
            self.rm.on_response(src, msg)
            return
        req = msg.request
        if isinstance(req, ProduceRequest):
            self.rm.handle_produce(msg, src)
        elif isinstance(req, FetchRequest):
            self.rm.handle_fetch(msg, src)
        elif isinstance(req, ListOffsetsRequest):
            self.rm.handle_list_offsets(msg, src)
        elif isinstance(req, OffsetForLeaderEpochRequest):
            self.rm.handle_offset_for_leader_epoch(msg, src)

    def on_tick(self, now_ms) -> None:
        self.rm.tick(now_ms)

    def on_crash(self) -> None:
        self.rm.crash(self.lose_unflushed)


class FakeController(BaseNode):
    """Accepts every ISR change that quotes the current leader epoch and partition epoch."""

    def __init__(self) -> None:
        self.state: dict[TopicPartition, dict] = {}
        self.requests: list[AlterPartitionRequest] = []

    def on_message(self, src, msg, now_ms) -> None:
        if not isinstance(msg, RequestEnvelope) or not isinstance(msg.request, AlterPartitionRequest):
            return
        self.requests.append(msg.request)
        out = []
        for item in msg.request.partitions:
            st = self.state[item.tp]
            if item.leader_epoch == st["leader_epoch"] and item.partition_epoch == st["partition_epoch"]:
                st["isr"] = tuple(item.new_isr)
                st["partition_epoch"] += 1
                out.append(AlterPartitionResult(tp=item.tp, **st))
            else:
                out.append(AlterPartitionResult(tp=item.tp, error_code=74))
        self.send(src, msg.reply(AlterPartitionResponse(partitions=tuple(out))))


class Client(BaseNode):
    def __init__(self) -> None:
        self.responses: dict[int, tuple[int, object]] = {}
        self.cid = 0

    def on_message(self, src, msg, now_ms) -> None:
        self.responses[msg.correlation_id] = (now_ms, msg.response)

    def request(self, dst, req) -> int:
        self.cid += 1
        self.send(dst, RequestEnvelope(self.cid, "client", req))
        return self.cid


class Cluster:
    def __init__(self, tmp_path: Path, n: int = 3, **props) -> None:
        self.net = SimNetwork(seed=1, log_messages="none")
        self.ctl = self.net.add_node(CONTROLLER, FakeController())
        self.brokers = {
            b: self.net.add_node(
                b, Broker(b, tmp_path, {k.replace("_", "."): v for k, v in props.items()}), tick_ms=100
            )
            for b in range(1, n + 1)
        }
        self.client = self.net.add_node("client", Client())
        self.controller_epoch = 1

    def rm(self, b: int) -> ReplicaManager:
        return self.brokers[b].rm

    def elect(self, leader: int, epoch: int, isr, replicas=None, brokers=None) -> None:
        replicas = tuple(replicas or sorted(self.brokers))
        st = self.ctl.state.get(TP)
        pe = 0 if st is None else st["partition_epoch"] + 1
        self.ctl.state[TP] = {
            "leader": leader,
            "leader_epoch": epoch,
            "isr": tuple(isr),
            "partition_epoch": pe,
        }
        state = LeaderAndIsrPartitionState(
            tp=TP,
            controller_epoch=1,
            leader=leader,
            leader_epoch=epoch,
            isr=tuple(isr),
            partition_epoch=pe,
            replicas=replicas,
        )
        req = LeaderAndIsrRequest(controller_id=CONTROLLER, controller_epoch=1, partition_states=(state,))
        for b in brokers or replicas:
            if self.net.is_up(b):
                self.rm(b).handle_leader_and_isr(req)

    def produce(self, leader: int, values, acks: int = -1, timeout_ms: int = 30_000) -> int:
        batch = build_batch([(None, v) for v in values], timestamp=1000)
        req = ProduceRequest(
            acks=acks, timeout_ms=timeout_ms, partitions=(ProducePartition(tp=TP, records=batch),)
        )
        return self.client.request(leader, req)

    def answer(self, cid: int):
        got = self.client.responses.get(cid)
        return None if got is None else got[1].partitions[0]

    def values(self, b: int) -> list[bytes]:
        return [r.value for r in self.rm(b).partition(TP).log.iter_records()]

    def run_until(self, pred, timeout_ms: int = 5000) -> bool:
        return self.net.run_until(pred, timeout_ms)


@pytest.fixture
def c3(tmp_path):
    c = Cluster(tmp_path, 3)
    c.elect(1, 0, (1, 2, 3))
    return c


def test_acks1_answered_after_leader_append_and_acks_all_after_followers(c3):
    cid = c3.produce(1, [b"a"], acks=1)
    c3.net.run_for(2)
    r = c3.answer(cid)
    assert r.error_code == 0 and r.base_offset == 0
    assert c3.client.responses[cid][0] == 2  # one hop each way: no waiting for followers
    cid = c3.produce(1, [b"b"], acks=-1)
    assert c3.run_until(lambda: c3.answer(cid) is not None)
    r = c3.answer(cid)
    assert r.error_code == 0 and r.base_offset == 1
    p1 = c3.rm(1).partition(TP)
    assert p1.high_watermark >= 2
    assert all(c3.rm(b).partition(TP).log_end_offset >= 2 for b in (2, 3))
    assert p1.remote_leo(2) >= 2 and p1.remote_leo(3) >= 2


def test_acks0_gets_no_response(c3):
    cid = c3.produce(1, [b"x"], acks=0)
    c3.net.run_for(200)
    assert c3.answer(cid) is None
    assert c3.rm(1).partition(TP).log_end_offset == 1


def test_consumer_reads_only_below_hw_and_follower_hw_follows(c3):
    c3.net.pause(2)
    c3.net.pause(3)
    cid = c3.produce(1, [b"a", b"b"], acks=1)
    c3.net.run_for(5)
    assert c3.answer(cid).error_code == 0
    p1 = c3.rm(1).partition(TP)
    assert (p1.log_end_offset, p1.high_watermark) == (2, 0)
    f = c3.client.request(1, FetchRequest(max_wait_ms=0, partitions=(FetchPartition(tp=TP, fetch_offset=0),)))
    c3.net.run_for(3)
    resp: FetchResponse = c3.client.responses[f][1]
    assert resp.partitions[0].records == b"" and resp.partitions[0].high_watermark == 0
    # A long-poll consumer fetch completes when the HW moves.
    f = c3.client.request(
        1, FetchRequest(max_wait_ms=10_000, partitions=(FetchPartition(tp=TP, fetch_offset=0),))
    )
    c3.net.run_for(3)
    assert f not in c3.client.responses
    c3.net.resume(2)
    c3.net.resume(3)
    assert c3.run_until(lambda: f in c3.client.responses)
    part = c3.client.responses[f][1].partitions[0]
    assert part.high_watermark == 2 and len(part.records) > 0
    assert c3.run_until(lambda: all(c3.rm(b).partition(TP).high_watermark == 2 for b in (2, 3)))
    hw_events = [e for e in c3.net.events("hw") if e.fields["tp"] == "t-0"]
    assert {e.node for e in hw_events} == {1, 2, 3}
    assert c3.net.events("leo")


def test_follower_learns_a_new_hw_with_data_or_at_the_fetch_wait_not_at_once(tmp_path):
    """KAFKA-9952 (Kafka 2.6): a follower's waiting fetch is not answered just because the HW moved;
    the follower learns the new HW with the next data, or when ``replica.fetch.wait.max.ms`` runs out."""
    c = Cluster(tmp_path, 3, replica_fetch_wait_max_ms=300)
    c.elect(1, 0, (1, 2, 3))
    cid = c.produce(1, [b"a"], acks=-1)
    assert c.run_until(lambda: c.answer(cid) is not None)
    acked = c.net.now_ms()
    assert c.rm(1).partition(TP).high_watermark == 1
    assert c.run_until(lambda: all(c.rm(b).partition(TP).high_watermark == 1 for b in (2, 3)), 1000)
    waited = c.net.now_ms() - acked
    assert 250 <= waited <= 310  # the followers' parked fetches ran to their max wait
    fetches = [e for e in c.net.events("hw") if e.node in (2, 3)]
    assert len(fetches) == 2


def test_min_insync_replicas_not_enough_replicas(tmp_path):
    c = Cluster(tmp_path, 3, min_insync_replicas=2)
    c.elect(1, 0, (1,))
    cid = c.produce(1, [b"a"], acks=-1)
    c.net.run_for(5)
    assert c.answer(cid).error_code == NotEnoughReplicasError.code
    assert c.rm(1).partition(TP).log_end_offset == 0  # checked before appending
    cid = c.produce(1, [b"a"], acks=1)  # acks=1 ignores min.insync.replicas
    c.net.run_for(5)
    assert c.answer(cid).error_code == 0


def test_isr_shrinks_after_lag_time_and_expands_after_catch_up(tmp_path):
    c = Cluster(tmp_path, 3, replica_lag_time_max_ms=1000)
    c.elect(1, 0, (1, 2, 3))
    c.net.run_for(100)
    c.net.cut(1, 3)
    cid = c.produce(1, [b"a"], acks=-1)
    c.net.run_for(500)
    assert c.answer(cid) is None  # 3 is still in the ISR and has not got it
    assert c.run_until(lambda: c.answer(cid) is not None, 3000)
    assert c.answer(cid).error_code == 0
    p1 = c.rm(1).partition(TP)
    assert p1.isr == (1, 2)
    shrink = c.net.events("isr_shrink")
    assert shrink and shrink[0].fields["isr"] == [1, 2]
    assert shrink[0].time_ms >= 1000
    c.net.heal(1, 3)
    assert c.run_until(lambda: p1.isr == (1, 2, 3), 35_000)
    assert c.net.events("isr_expand")[0].fields["isr"] == [1, 2, 3]
    assert c.ctl.state[TP]["isr"] == (1, 2, 3)
    assert c.rm(3).partition(TP).log_end_offset == 1


def test_paused_follower_leaves_isr(tmp_path):
    c = Cluster(tmp_path, 2, replica_lag_time_max_ms=500)
    c.elect(1, 0, (1, 2))
    c.net.run_for(50)
    c.net.pause(2, 2000)
    c.produce(1, [b"a"], acks=1)
    c.net.run_for(1000)
    assert c.rm(1).partition(TP).isr == (1,)
    assert c.run_until(lambda: c.rm(1).partition(TP).isr == (1, 2), 5000)


def test_delayed_produce_times_out(tmp_path):
    c = Cluster(tmp_path, 2)
    c.elect(1, 0, (1, 2))
    c.net.run_for(10)
    c.net.cut(1, 2)
    cid = c.produce(1, [b"a"], acks=-1, timeout_ms=300)
    c.net.run_for(200)
    assert c.answer(cid) is None
    c.net.run_for(200)
    assert c.answer(cid).error_code == RequestTimedOutError.code
    assert c.client.responses[cid][0] == 312  # sent at 10, 1 ms hop, timer 300 ms, 1 ms back


def test_not_leader_or_follower_at_follower(c3):
    cid = c3.produce(2, [b"a"], acks=1)
    f = c3.client.request(2, FetchRequest(max_wait_ms=0, partitions=(FetchPartition(tp=TP, fetch_offset=0),)))
    c3.net.run_for(5)
    assert c3.answer(cid).error_code == NotLeaderOrFollowerError.code
    assert c3.client.responses[f][1].partitions[0].error_code == NotLeaderOrFollowerError.code


def test_fenced_leader_epoch(c3):
    old = FetchPartition(tp=TP, fetch_offset=0, current_leader_epoch=0)
    c3.elect(1, 1, (1, 2, 3))
    f = c3.client.request(1, FetchRequest(max_wait_ms=0, partitions=(old,)))
    g = c3.client.request(
        1,
        FetchRequest(
            max_wait_ms=0, partitions=(FetchPartition(tp=TP, fetch_offset=0, current_leader_epoch=5),)
        ),
    )
    c3.net.run_for(5)
    assert c3.client.responses[f][1].partitions[0].error_code == 74  # FENCED_LEADER_EPOCH
    assert c3.client.responses[g][1].partitions[0].error_code == 75  # UNKNOWN_LEADER_EPOCH


def test_leader_epoch_cache_rules(tmp_path):
    c = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    c.assign(0, 0)
    c.assign(2, 5)
    c.assign(2, 7)  # same epoch: ignored
    assert c.entries == [(0, 0), (2, 5)]
    assert c.end_offset_for(0, 10) == (0, 5)
    assert c.end_offset_for(1, 10) == (0, 5)
    assert c.end_offset_for(2, 10) == (2, 10)
    assert c.end_offset_for(3, 10) == (-1, -1)
    c.truncate_from_end(5)
    assert c.entries == [(0, 0)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"


def kip101(tmp_path: Path, by_epoch: bool):
    """KIP-101 scenario: m2 is acknowledged (acks=all) with A as leader, the follower B restarts before it
    learns HW=2, then A dies, B leads (epoch 1) and takes m3, then A returns as a follower."""
    c = Cluster(tmp_path, 2, kafkalite_truncate_by_leader_epoch=str(by_epoch).lower())
    A, B = 1, 2
    c.elect(A, 0, (A, B))
    cid = c.produce(A, [b"m1"])
    assert c.run_until(lambda: c.answer(cid) is not None and c.rm(B).partition(TP).high_watermark == 1)
    c.rm(B).checkpoint_high_watermarks()
    cid2 = c.produce(A, [b"m2"])
    assert c.run_until(lambda: c.rm(A).partition(TP).high_watermark == 2)
    assert c.rm(B).partition(TP).high_watermark == 1 and c.rm(B).partition(TP).log_end_offset == 2
    c.rm(A).checkpoint_high_watermarks()
    c.net.crash(B)  # B restarts: in memory it knew HW=1 only
    c.net.run_for(2)
    assert c.answer(cid2).error_code == 0  # m2 was acknowledged to the producer
    c.net.restart(B)
    c.elect(A, 0, (A, B), brokers=[B])  # same epoch, B follows A again
    c.net.run_for(1)  # A dies before B has fetched m2 again
    c.net.crash(A)
    c.elect(B, 1, (B,), brokers=[B])
    cid3 = c.produce(B, [b"m3"], acks=1)
    c.net.run_for(5)
    assert c.answer(cid3).error_code == 0
    c.net.restart(A)
    c.elect(B, 1, (B,), brokers=[A])
    c.net.run_for(2000)
    return c


def test_kip101_truncation_by_leader_epoch_keeps_acknowledged_record(tmp_path):
    c = kip101(tmp_path, by_epoch=True)
    assert c.values(2) == [b"m1", b"m2", b"m3"]
    assert c.values(1) == [b"m1", b"m2", b"m3"]
    assert c.rm(2).partition(TP).log.leader_epoch_entries == [(0, 0), (1, 2)]
    assert c.rm(1).partition(TP).log.leader_epoch_entries == [(0, 0), (1, 2)]
    assert not [e for e in c.net.events("truncate") if e.fields["to_offset"] < e.fields["from_offset"]]


def test_kip101_truncation_to_hw_loses_acknowledged_record_and_diverges(tmp_path):
    c = kip101(tmp_path, by_epoch=False)
    assert c.values(2) == [b"m1", b"m3"]  # the new leader lost m2, which had been acknowledged
    assert c.values(1) == [b"m1", b"m2"]  # and the old leader kept m2 at offset 1: the replicas diverged
    truncs = c.net.events("truncate", node=2)
    assert truncs and truncs[0].fields["reason"] == "high_watermark" and truncs[0].fields["to_offset"] == 1


def test_replication_offset_checkpoint_format(c3):
    cid = c3.produce(1, [b"a", b"b", b"c"])
    assert c3.run_until(lambda: c3.answer(cid) is not None)
    c3.net.run_for(6000)  # replica.high.watermark.checkpoint.interval.ms = 5000
    text = (c3.rm(1).log_dir / HIGH_WATERMARK_CHECKPOINT).read_text()
    assert text == "0\n1\nt 0 3\n"
    assert (c3.rm(2).log_dir / HIGH_WATERMARK_CHECKPOINT).read_text() == "0\n1\nt 0 3\n"


def test_crash_loses_unflushed_bytes(tmp_path):
    c = Cluster(tmp_path, 1)
    c.elect(1, 0, (1,))
    cid = c.produce(1, [b"a"], acks=1)
    c.net.run_for(5)
    assert c.answer(cid).error_code == 0
    c.rm(1).partition(TP).log.flush()
    c.produce(1, [b"b"], acks=1)
    c.net.run_for(5)
    assert c.rm(1).partition(TP).log_end_offset == 2
    c.brokers[1].lose_unflushed = True
    c.net.crash(1)
    assert c.net.events("replica_manager_crash")[0].fields["lost_offsets"] == {"t-0": 1}
    c.net.restart(1)
    c.elect(1, 1, (1,))
    assert c.values(1) == [b"a"]


def _tamper_fetch_data(c: Cluster, leader: int, follower: int, change) -> list[int]:
    """Rewrite the record bytes of fetch answers on the ``leader -> follower`` link with ``change``
    (until it returns None); returns one entry per answer it changed."""
    touched = []

    def tamper(msg):
        resp = getattr(msg, "response", None)
        if not isinstance(resp, FetchResponse):
            return msg
        parts = []
        for p in resp.partitions:
            data = p.records if isinstance(p.records, bytes | bytearray) else b""
            new = change(bytearray(data)) if data else None
            if new is not None:
                touched.append(1)
                p = dataclasses.replace(p, records=bytes(new))
            parts.append(p)
        return dataclasses.replace(msg, response=dataclasses.replace(resp, partitions=tuple(parts)))

    c.net.tamper(leader, follower, tamper)
    return touched


def test_corrupt_fetch_data_is_refetched_not_fatal(c3):
    budget = [1]

    def flip_a_byte(data: bytearray):
        if not budget[0]:
            return None
        budget[0] -= 1
        data[-1] ^= 0xFF  # inside the CRC-covered records
        return data

    touched = _tamper_fetch_data(c3, 1, 2, flip_a_byte)
    cid = c3.produce(1, [b"a", b"b"], acks=1)
    assert c3.run_until(lambda: c3.answer(cid) is not None)
    assert c3.run_until(lambda: c3.values(2) == [b"a", b"b"], 10_000)
    assert touched == [1]
    assert [e.fields["tp"] for e in c3.net.events("fetch_corrupt", node=2)] == [str(TP)]


def test_fetched_data_that_does_not_fit_fails_only_that_partition(c3):
    budget = [1]

    def shift_base_offset(data: bytearray):
        if not budget[0]:
            return None
        budget[0] -= 1
        data[0:8] = (5).to_bytes(8, "big")  # a base offset the follower's log end cannot take
        return data

    _tamper_fetch_data(c3, 1, 2, shift_base_offset)
    cid = c3.produce(1, [b"a"], acks=1)
    assert c3.run_until(lambda: c3.answer(cid) is not None)
    assert c3.run_until(lambda: bool(c3.net.events("partition_failed", node=2)), 5_000)
    c3.net.run_for(2_000)  # the simulation keeps running; the failed partition stays put
    assert c3.values(2) == [] and c3.values(3) == [b"a"]
    c3.elect(1, 1, (1, 3))  # the next LeaderAndIsr restarts replication of the partition
    assert c3.run_until(lambda: c3.values(2) == [b"a"], 5_000)


# ----- out-of-range followers, unclean elections, log start and ISR (Kafka's rules) ---------------------
def _count_requests(c: Cluster, broker: int, handler: str) -> list[int]:
    calls = [0]
    rm = c.rm(broker)
    orig = getattr(rm, handler)

    def counted(env, src):
        calls[0] += 1
        return orig(env, src)

    setattr(rm, handler, counted)
    return calls


def test_follower_behind_leader_log_start_restarts_there_and_catches_up(tmp_path):
    """B (LEO 3) returns after A took 3 more records alone and deleted records below 5 (inside a batch):
    B must restart empty at A's log start and fetch from there, not loop on OFFSET_OUT_OF_RANGE."""
    c = Cluster(tmp_path, 2)
    A, B = 1, 2
    c.elect(A, 0, (A, B))
    cid = c.produce(A, [b"m1", b"m2", b"m3"])
    assert c.run_until(lambda: c.answer(cid) is not None and c.rm(B).partition(TP).log_end_offset == 3)
    c.net.crash(B)
    c.elect(A, 1, (A,), brokers=[A])
    cid = c.produce(A, [b"m4", b"m5", b"m6"], acks=1)
    c.net.run_for(20)
    pa = c.rm(A).partition(TP)
    assert pa.log.delete_records(5) == 5
    c.net.restart(B)
    c.elect(A, 1, (A,), brokers=[B])
    pb = c.rm(B).partition(TP)
    assert c.run_until(lambda: pb.log_end_offset == 6, 5_000)
    assert pb.log.log_start_offset == 5 and c.values(B) == [b"m6"]
    assert pb.log.leader_epoch_entries == [(1, 5)]
    list_offsets = _count_requests(c, A, "handle_list_offsets")
    c.net.run_for(5_000)
    assert list_offsets == [0] and pb.log_end_offset == 6
    reasons = [e.fields["reason"] for e in c.net.events("truncate", node=B)]
    assert reasons == ["offset_out_of_range_reset", "first_batch_below_log_start"]


def _unclean_election(c, a_values: list[bytes], b_values: list[bytes]) -> None:
    """Broker 1 leads epoch 0 alone and takes ``a_values``; then it is down and broker 2, which never
    had them, is elected alone at epoch 1 and takes ``b_values``."""
    A, B = 1, 2
    c.net.crash(B)
    c.elect(A, 0, (A,), brokers=[A])
    c.produce(A, a_values, acks=1)
    c.net.run_for(20)
    c.rm(A).checkpoint_high_watermarks()
    c.net.crash(A)
    c.net.restart(B)
    c.elect(B, 1, (B,), brokers=[B])
    c.produce(B, b_values, acks=1)
    c.net.run_for(20)


def test_out_of_range_follower_keeps_its_log_when_the_leader_has_grown_past_it(tmp_path):
    """Unclean election without epochs: the old leader A (LEO 5) fetches at 5 from B (LEO 2): out of
    range. By the time A asks for B's LEO, B has more than A, so A keeps its log and fetches on from 5
    (Kafka leaves that divergence in place) instead of starting over from offset 0."""
    c = Cluster(tmp_path, 2, kafkalite_truncate_by_leader_epoch="false")
    A, B = 1, 2
    _unclean_election(c, [b"a1", b"a2", b"a3", b"a4", b"a5"], [b"b1", b"b2"])
    rm_b = c.rm(B)
    orig = rm_b.handle_list_offsets

    def grow_first(env, src):
        log = rm_b.partition(TP).log
        if log.log_end_offset == 2:  # more produce lands before the ListOffsets
            for i in (3, 4, 5, 6):  # one batch each, so that offset 5 starts one
                log.append(build_batch([(None, b"b%d" % i)]), leader_epoch=1)
        return orig(env, src)

    rm_b.handle_list_offsets = grow_first
    c.net.restart(A)
    c.elect(B, 1, (B,), brokers=[A])
    pa = c.rm(A).partition(TP)
    assert c.run_until(lambda: pa.log_end_offset == 6, 5_000)
    assert c.values(A) == [b"a1", b"a2", b"a3", b"a4", b"a5", b"b6"]
    assert not c.net.events("truncate", node=A)


def test_old_leader_truncates_after_unclean_election_and_catches_up(tmp_path):
    """A led epoch 0 alone (3 records); B, which never had them, is elected uncleanly (epoch 1) and
    takes 2. B knows no epoch 0, so it answers epoch 0 with the start of its first epoch (0): A
    truncates to 0 and replicates B's log instead of fetching forever."""
    c = Cluster(tmp_path, 2)
    A, B = 1, 2
    _unclean_election(c, [b"a1", b"a2", b"a3"], [b"b1", b"b2"])
    c.net.restart(A)
    c.elect(B, 1, (B,), brokers=[A])
    assert c.run_until(lambda: c.values(A) == [b"b1", b"b2"], 5_000)
    pa = c.rm(A).partition(TP)
    assert pa.log.leader_epoch_entries == [(1, 0)]
    truncs = [(e.fields["reason"], e.fields["to_offset"]) for e in c.net.events("truncate", node=A)]
    assert truncs == [("leader_epoch", 0)]
    fetches = _count_requests(c, B, "handle_fetch")
    c.net.run_for(5_000)
    assert fetches[0] <= 12  # long polls only (replica.fetch.wait.max.ms = 500), no busy loop


def test_follower_truncates_to_its_own_end_of_an_epoch_below_its_first_entry(tmp_path):
    """Follower cache [(3, 50)], LEO 80, HW 40; the leader answers epoch 2 ending at 60. The follower's
    epoch 2 ends where its first entry starts (50): truncate to min(50, 60, 80) = 50, not to the HW."""
    c = Cluster(tmp_path, 2)
    c.elect(1, 4, (1, 2))  # the network never runs: B's fetcher is driven by hand
    p = c.rm(2).partition(TP)
    p.log.append(build_batch([(None, b"old")] * 50, timestamp=1000))  # written before epochs were kept
    p.log.append(build_batch([(None, b"new")] * 30, timestamp=1000), leader_epoch=3)
    p.high_watermark = 40
    assert p.log.leader_epoch_entries == [(3, 50)] and p.log_end_offset == 80
    fetcher = c.rm(2)._fetchers[1]
    st = fetcher.partitions[TP]
    fetcher._truncate_to_epoch_end(st, 2, 60)
    assert p.log_end_offset == 50 and st.state == "fetching" and st.fetch_offset == 50
    assert p.log.leader_epoch_entries == []


def test_offset_for_leader_epoch_after_delete_records_answers_the_new_log_start(tmp_path):
    c = Cluster(tmp_path, 1)
    c.elect(1, 0, (1,))
    c.produce(1, [b"a", b"b", b"c"], acks=1)
    c.net.run_for(5)
    c.elect(1, 1, (1,))
    c.produce(1, [b"d", b"e", b"f"], acks=1)
    c.net.run_for(5)
    log = c.rm(1).partition(TP).log
    assert log.leader_epoch_entries == [(0, 0), (1, 3)]
    log.delete_records(5)
    assert log.leader_epoch_entries == [(1, 5)]
    req = OffsetForLeaderEpochRequest(
        replica_id=-1,
        partitions=(OffsetForLeaderEpochPartition(tp=TP, leader_epoch=0, current_leader_epoch=1),),
    )
    cid = c.client.request(1, req)
    c.net.run_for(5)
    ans = c.client.responses[cid][1].partitions[0]
    assert (ans.error_code, ans.leader_epoch, ans.end_offset) == (0, 0, 5)


def test_idle_follower_at_the_leader_log_end_stays_in_isr(tmp_path):
    """Kafka's isCaughtUp: a follower whose LEO equals the leader's is in sync however long ago it
    fetched; one that is behind leaves after replica.lag.time.max.ms."""
    c = Cluster(tmp_path, 3, replica_lag_time_max_ms=500)
    c.elect(1, 0, (1, 2, 3))
    cid = c.produce(1, [b"a"])
    assert c.run_until(lambda: c.answer(cid) is not None)
    c.net.run_for(100)
    c.net.pause(2, 3_000)
    c.net.run_for(2_000)
    p1 = c.rm(1).partition(TP)
    assert p1.isr == (1, 2, 3) and not c.net.events("isr_lagging")
    c.produce(1, [b"b"], acks=1)  # now 2 is behind and still silent
    assert c.run_until(lambda: p1.isr == (1, 3), 2_000)
    assert [e.fields["replica"] for e in c.net.events("isr_lagging")] == [2]
