"""DeleteRecords as Kafka's brokers answer it: the leader moves its log start offset, the answer waits for
the live followers to follow, and the errors Kafka gives for a bad offset, a compacted topic or a follower."""

from __future__ import annotations

import pytest

from kafkalite.errors import (
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RequestTimedOutError,
)
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import DeleteRecordsPartition, DeleteRecordsRequest, TopicPartition


@pytest.fixture
def cluster(make_cluster):
    c = make_cluster(brokers=3, seed=3)
    c.create_topic("t", partitions=2, replication_factor=3)
    producer = c.producer(acks=-1, linger_ms=0)
    sent = [producer.send("t", f"v{i}".encode(), partition=i % 2) for i in range(50)]
    producer.flush()
    assert c.run_until(lambda: all(f.done() for f in sent), 10_000)
    assert c.run_until(lambda: all(c.high_watermark("t", p) == 25 for p in (0, 1)), 10_000)
    return c


def test_log_start_moves_on_every_replica_and_consumers_start_there(cluster: Cluster) -> None:
    answer = cluster.delete_records("t", {0: 10})[0]
    assert (answer.error_code, answer.low_watermark) == (0, 10)
    # The answer came once the followers had moved too: every replica now starts at 10.
    assert {b: cluster.replica(b, "t", 0).log.log_start_offset for b in (1, 2, 3)} == {1: 10, 2: 10, 3: 10}
    assert [r.offset for r in cluster.read_all("t")[0]][:1] == [10]
    assert cluster.events("records_deleted")


def test_minus_one_means_the_high_watermark(cluster: Cluster) -> None:
    answer = cluster.delete_records("t", {1: -1})[1]
    assert (answer.error_code, answer.low_watermark) == (0, 25)
    assert cluster.read_all("t")[1] == []


def test_kafka_errors_for_bad_offsets_followers_and_compacted_topics(cluster: Cluster) -> None:
    assert cluster.delete_records("t", {0: 26})[0].error_code == OffsetOutOfRangeError.code  # above the HW
    assert cluster.delete_records("t", {0: -2})[0].error_code == OffsetOutOfRangeError.code
    follower = next(b for b in cluster.replicas("t", 0) if b != cluster.leader("t", 0))
    req = DeleteRecordsRequest(partitions=(DeleteRecordsPartition(tp=TopicPartition("t", 0), offset=5),))
    assert cluster.request(follower, req).partitions[0].error_code == NotLeaderOrFollowerError.code
    cluster.create_topic("c", partitions=1, replication_factor=1, config={"cleanup.policy": "compact"})
    assert cluster.delete_records("c", {0: 0})[0].error_code == PolicyViolationError.code
    assert cluster.replica(cluster.leader("t", 0), "t", 0).log.log_start_offset == 0  # nothing moved


def test_a_follower_that_cannot_fetch_holds_the_answer_until_the_timeout(cluster: Cluster) -> None:
    leader = cluster.leader("t", 0)
    follower = next(b for b in cluster.replicas("t", 0) if b != leader)
    cluster.cut(leader, follower)  # alive for the controller, but it cannot follow the leader
    answer = cluster.delete_records("t", {0: 20}, timeout_ms=2000)[0]
    assert answer.error_code == RequestTimedOutError.code
    assert answer.low_watermark == 0  # the cut follower still starts at 0
    assert cluster.replica(leader, "t", 0).log.log_start_offset == 20  # the leader moved regardless
