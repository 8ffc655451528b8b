"""A fetch at the end of what it may read is answered without reading the log (the end-to-end latency
path: every follower fetch names every partition it follows from that leader), with the same answer."""

from __future__ import annotations

import pytest

from kafkalite.host.cluster import Cluster
from kafkalite.protocol import FetchPartition, FetchRequest, IsolationLevel, TopicPartition
from kafkalite.storage.log import Log

TP = TopicPartition("t", 0)


@pytest.fixture
def cluster():
    with Cluster(brokers=3, seed=1) as c:
        c.create_topic("t", 1, 3, config={"min.insync.replicas": 2})
        p = c.producer(config={"acks": "all"})
        for i in range(3):
            p.send("t", b"v%d" % i)
        p.flush()
        assert c.run_until(p.idle, 30_000), "the records were acknowledged"
        yield c


def _leader_partition(c: Cluster):
    return c.brokers[c.leader("t", 0)].rm.partition(TP)


def test_caught_up_fetches_do_not_read_the_log(cluster, monkeypatch) -> None:
    reads: list[int] = []
    inner = Log.read

    def counted(self, offset, *args, **kwargs):
        reads.append(offset)
        return inner(self, offset, *args, **kwargs)

    monkeypatch.setattr(Log, "read", counted)
    cluster.net.run_for(5_000)  # idle: the followers' fetches wait and expire, again and again
    assert reads == [], f"caught-up fetches read the log at {reads}"


@pytest.mark.parametrize("follower", [True, False])
def test_caught_up_answer_is_empty_with_the_marks(cluster, follower: bool) -> None:
    p = _leader_partition(cluster)
    end = p.log_end_offset if follower else p.high_watermark
    fp = FetchPartition(
        tp=TP,
        fetch_offset=end,
        current_leader_epoch=-1,
        last_fetched_epoch=p.log.leader_epoch_cache.latest_epoch if follower else -1,
    )
    req = FetchRequest(replica_id=2 if follower else -1, partitions=(fp,))
    answer, size = p.read_records(req, fp)
    assert size == 0 and answer.records == b"", "nothing to send"
    assert answer.error_code == 0, "no error"
    assert (answer.high_watermark, answer.log_start_offset) == (p.high_watermark, 0), "marks"
    assert answer.last_stable_offset == p.high_watermark, "no open transaction"


def test_a_follower_on_an_older_epoch_still_learns_it_diverged(cluster) -> None:
    p = _leader_partition(cluster)
    epoch = p.log.leader_epoch_cache.latest_epoch
    follower = cluster.leader("t", 0) % 3 + 1
    fp = FetchPartition(
        tp=TP, fetch_offset=p.log_end_offset, current_leader_epoch=-1, last_fetched_epoch=epoch + 7
    )
    answer, _ = p.read_records(FetchRequest(replica_id=follower, partitions=(fp,)), fp)
    assert answer.diverging_epoch is not None, "an epoch the leader never had is a divergence"


def test_read_committed_at_the_high_watermark_takes_the_full_path(cluster) -> None:
    p = _leader_partition(cluster)
    fp = FetchPartition(tp=TP, fetch_offset=p.high_watermark, current_leader_epoch=-1)
    req = FetchRequest(isolation_level=IsolationLevel.READ_COMMITTED, partitions=(fp,))
    answer, size = p.read_records(req, fp)
    assert size == 0 and answer.aborted_transactions == (), "read_committed lists aborted ones"
