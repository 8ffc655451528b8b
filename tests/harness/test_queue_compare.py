"""The queues chapter's workloads (kafkalite/harness/queue_compare.py): a Kafka log keeps what was read and
keeps each key on one consumer; a RabbitMQ queue deletes on ack, copies per queue and interleaves keys."""

import pytest

from kafkalite.harness import queue_compare as qc
from kafkalite.harness import rabbitmq
from kafkalite.host.server import BackgroundServer


@pytest.fixture(scope="module")
def kafka():
    with BackgroundServer(1) as server:
        for name, partitions in qc.TOPICS.items():
            server.create_topic(name, partitions, 1)
        yield server.bootstrap_servers


@pytest.fixture(scope="module")
def node():
    if not rabbitmq.available():
        pytest.skip(rabbitmq.missing_reason())
    with rabbitmq.RabbitMQNode() as n:
        yield n


def test_kafka_keeps_what_was_read(kafka):
    r = qc.kafka_retention(kafka, 300)
    assert r == {
        "first_reader": 300,
        "first_reader_again": 0,
        "second_reader": 300,
        "replay_from_offset_0": 300,
        "stored_after_reads": 300,
    }


def test_kafka_fanout_stores_once_and_pull_hands_out_what_was_asked(kafka):
    assert qc.kafka_fanout(kafka, 200) == {"reads": {"group-a": 200, "group-b": 200}, "stored": 200}
    pull = qc.kafka_pull(kafka, 200, 7)
    assert (pull["received"], pull["committed_offset"], pull["log_end_offset"]) == (7, 7, 200)


def test_kafka_keeps_each_key_on_one_consumer_in_order(kafka):
    r = qc.kafka_ordering(kafka, 120, 6, 2.0)
    assert r["processed"] == 120 and r["keys_on_one_consumer"] == 6 and r["keys_out_of_order"] == 0
    assert all(r["per_consumer"]), f"murmur2 spreads k0..k5 over both partitions: {r['per_consumer']}"


def test_inversions_counts_late_messages_per_key():
    assert qc._inversions([("a", 0), ("b", 1), ("a", 2), ("a", 1), ("b", 0)]) == {"a": 1, "b": 1}
    assert qc._inversions([("a", 0), ("a", 1)]) == {"a": 0}


def test_rabbitmq_deletes_on_ack_copies_per_queue_and_pushes_up_to_prefetch(node):
    r = qc.rabbitmq_retention(node, 200)
    assert (r["first_reader"], r["stored_after_acks"], r["second_reader"]) == (200, 0, 0)
    f = qc.rabbitmq_fanout(node, 150)
    assert (
        f["stored"] == 300
        and f["rabbitmqctl_messages"] == 300
        and f["reads"] == {"queue-a": 150, "queue-b": 150}
    )
    p = qc.rabbitmq_push(node, 100, 8)
    assert (p["pushed_before_any_ack"], p["ready_in_queue"], p["unacked_tracked_by_broker"]) == (8, 92, 8)
    assert p["pushed_after_one_ack"] == 8


def test_rabbitmq_competing_consumers_reorder_a_key(node):
    r = qc.rabbitmq_ordering(node, 120, 6, 10.0)
    assert r["processed"] == 120 and r["keys_out_of_order"] >= 1, r


def test_rabbitmq_memory_alarm_blocks_the_publisher_until_a_consumer_drains():
    if not rabbitmq.available():
        pytest.skip(rabbitmq.missing_reason())
    with rabbitmq.RabbitMQNode() as own:  # its own node: the test lowers the memory watermark
        r = qc.rabbitmq_memory_alarm(own, headroom_bytes=20_000_000)
    assert r["blocked"] and r["alarms"] == ["memory"] and r["unblocked_after_drain"], r
    assert r["published_before_block_bytes"] >= 20_000_000, r
    # The alarm is named from the Connection.Blocked frame, not only from a later status (which may miss an
    # alarm the node has already cleared by paging the queue out).
    assert "memory" in r["blocked_reason"], r
