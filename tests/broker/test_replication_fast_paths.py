"""The replication path's shortcuts (``kafkalite bench produce``, acks=all) change no behaviour."""

from __future__ import annotations

import gc
import weakref

import pytest

from kafkalite.errors import CorruptRecordError, InvalidRecordError
from kafkalite.net.sim import BaseNode, SimNetwork
from kafkalite.protocol import TopicPartition
from kafkalite.records import build_batch, iter_batches
from kafkalite.storage import Log
from kafkalite.storage.log import LogAppendInfo

T0 = 1_700_000_000_000


def batch(n: int = 3, ts: int = T0) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * 50) for i in range(n)], timestamp=ts)


def leader_log(path, batches: int = 6) -> Log:
    log = Log.open(path)
    for i in range(batches):
        log.append(batch(2 + i % 3, T0 + i), leader_epoch=i // 3)
    return log


# ----- sim timers ------------------------------------------------------------------------------------------
class _Sink(BaseNode):
    def on_message(self, src, msg, now_ms):  # pragma: no cover - no messages here
        pass


class _Callback:
    def __init__(self, fired: list) -> None:
        self.fired = fired

    def __call__(self, now_ms: int) -> None:
        self.fired.append(now_ms)


def test_cancelled_timer_frees_its_callback_at_once():
    net = SimNetwork(seed=1)
    net.add_node("n", _Sink())
    fired: list[int] = []
    cb = _Callback(fired)
    ref = weakref.ref(cb)
    tid = net.set_timer("n", 1000, cb)
    del cb
    assert net.cancel_timer(tid) and not net.cancel_timer(tid)
    gc.collect()
    assert ref() is None  # not kept until its heap entry surfaces
    net.run_for(2000)
    assert fired == [] and net.pending() == 0


def test_timers_fire_in_order_and_held_ones_after_resume():
    net = SimNetwork(seed=1)
    node = net.add_node("n", _Sink())
    fired: list[tuple[str, int]] = []
    node.set_timer(5, lambda t: fired.append(("a", t)))
    tid = node.set_timer(5, lambda t: fired.append(("x", t)))
    node.set_timer(5, lambda t: fired.append(("b", t)))
    node.set_timer(20, lambda t: fired.append(("c", t)))
    node.cancel_timer(tid)
    net.pause("n")
    net.run_for(10)
    assert fired == []
    net.resume("n")
    assert fired == [("a", 10), ("b", 10)]
    net.run_for(20)
    assert fired[-1] == ("c", 20) and net.pending() == 0


# ----- follower append ------------------------------------------------------------------------------------
def test_append_as_follower_copies_the_leader_byte_for_byte(tmp_path):
    leader = leader_log(tmp_path / "l-0")
    follower = Log.open(tmp_path / "f-0")
    data = leader.read(0, 1 << 20).records.read()
    infos = follower.append_as_follower(data)
    expected = [(i.first_offset, i.last_offset, i.num_records) for i in infos]
    assert expected == [(0, 1, 2), (2, 4, 3), (5, 8, 4), (9, 10, 2), (11, 13, 3), (14, 17, 4)]
    assert all(isinstance(i, LogAppendInfo) and i.max_timestamp >= T0 for i in infos)
    assert follower.log_end_offset == leader.log_end_offset == 18
    assert follower.read(0, 1 << 20).records.read() == data
    assert follower.leader_epoch_cache.epoch_for_offset(10) == 1


def test_append_as_follower_validates_before_writing(tmp_path):
    leader = leader_log(tmp_path / "l-0")
    follower = Log.open(tmp_path / "f-0")
    data = bytearray(leader.read(0, 1 << 20).records.read())
    data[-1] ^= 0xFF  # the last batch's CRC no longer matches
    with pytest.raises(CorruptRecordError, match="CRC"):
        follower.append_as_follower(bytes(data))
    assert follower.log_end_offset == 0 and follower.read(0).records.size == 0
    with pytest.raises(InvalidRecordError, match="log end offset is 0"):
        follower.append_as_follower(leader.read(5).records.read())
    assert follower.log_end_offset == 0


def test_validate_all_tuples_match_headers(tmp_path):
    leader = leader_log(tmp_path / "l-0")
    data = leader.read(0, 1 << 20).records.read()
    items = leader._validate_all(data)
    headers = list(iter_batches(data))
    assert [bytes(d) for d, _ in items] == [bytes(data[p : p + h.size]) for p, h in headers]
    assert [f for _, f in items] == [h.as_tuple() for _, h in headers]


# ----- read hints -------------------------------------------------------------------------------------------
def test_readers_at_different_offsets_each_continue_where_they_stopped(tmp_path):
    log = leader_log(tmp_path / "l-0", batches=12)
    one = len(log.read(0, 1).records)
    # Two followers and a consumer, interleaved, each reading one batch at a time.
    offsets = {"f1": 0, "f2": 0, "c": 0}
    seen: dict[str, list[int]] = {k: [] for k in offsets}
    for step in range(40):
        who = ("f1", "f2", "f1", "c", "f2")[step % 5]
        if offsets[who] >= log.log_end_offset:
            continue
        fs = log.read(offsets[who], one).records
        base = [h.base_offset for h in fs.headers()]
        assert len(base) == 1 and base[0] == offsets[who]
        seen[who] += base
        offsets[who] = next(iter(fs.batches())).header.last_offset + 1
    starts = [h.base_offset for h in log.read(0, 1 << 20).records.headers()]
    assert seen["f1"] == seen["f2"] == starts and seen["c"] == starts[: len(seen["c"])]


def test_read_after_truncation_finds_the_new_batches(tmp_path):
    log = leader_log(tmp_path / "l-0")
    log.read(0, 1)  # leaves a hint for offset 2
    log.read(5, 1)  # and for 9
    log.truncate_to(2)
    log.append(batch(5), leader_epoch=3)  # offsets 2..6: offset 5 is now inside a batch
    fs = log.read(5).records
    assert [h.base_offset for h in fs.headers()] == [2]
    log.append(batch(3), leader_epoch=3)  # 7..9
    assert [h.base_offset for h in log.read(9).records.headers()] == [7]


# ----- delayed produce -------------------------------------------------------------------------------------
def test_acks_all_answers_in_order_once_the_isr_has_the_batches():
    from kafkalite.host.cluster import Cluster

    with Cluster(brokers=3, seed=4) as cluster:
        cluster.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        producer = cluster.producer(acks="all", linger_ms=0)
        futures = [producer.send("t", b"v%d" % i) for i in range(50)]
        assert cluster.run_until(lambda: all(f.done() for f in futures), 10_000)
        assert [f.result().offset for f in futures] == list(range(50))
        leader = cluster.brokers[cluster.leader("t", 0)].rm
        assert leader._delayed_produce.get(TopicPartition("t", 0), []) == []
        assert set(cluster.log_end_offsets("t", 0).values()) == {50}
