"""Kafka's controlled shutdown: a broker stopping cleanly first hands its leaderships to other ISR members
and leaves the ISRs it follows in, so clients never find a partition without a leader."""

from __future__ import annotations

import pytest

from kafkalite.host.cluster import Cluster
from kafkalite.protocol import ControlledShutdownRequest

CONFIG = {"zookeeper.session.timeout.ms": 6000, "offsets.topic.num.partitions": 3}


@pytest.fixture
def cluster(make_cluster):
    c = make_cluster(brokers=3, seed=21, config=CONFIG)
    c.create_topic("t", partitions=6, replication_factor=3)
    c.create_topic("solo", partitions=3, replication_factor=1)
    return c


def test_leaderships_move_before_the_broker_stops(cluster: Cluster) -> None:
    victim = 2
    led = [p for p in range(6) if cluster.leader("t", p) == victim]
    assert led, "the placement gives every broker some leaderships"
    producer = cluster.producer(acks="all", linger_ms=0)
    cluster.shutdown(victim, controlled=True)
    for p in range(6):
        assert cluster.leader("t", p) not in (None, -1, victim)
        assert victim not in cluster.isr("t", p)
    moved = [e for e in cluster.events("leader_elected") if e.fields.get("election") == "controlled_shutdown"]
    assert (
        sorted(int(e.fields["tp"].rsplit("-", 1)[1]) for e in moved if e.fields["tp"].startswith("t-")) == led
    )
    done = cluster.events("controlled_shutdown_complete", node=victim)
    assert done and done[-1].fields["outcome"] == "done"
    # Writes keep working at once: nobody waited for a session to expire.
    sent = [producer.send("t", b"x", partition=p) for p in range(6)]
    assert cluster.run_until(lambda: all(f.done() for f in sent), 5_000)
    assert all(f.exception() is None for f in sent)
    cluster.restart(victim)
    assert cluster.run_until(lambda: all(victim in cluster.isr("t", p) for p in range(6)), 30_000)


def test_unreplicated_partitions_do_not_hold_the_shutdown(cluster: Cluster) -> None:
    victim = next(b for b in (1, 2, 3) if any(cluster.leader("solo", p) == b for p in range(3)))
    cluster.shutdown(victim, controlled=True)
    done = cluster.events("controlled_shutdown_complete", node=victim)[-1]
    assert done.fields["outcome"] == "done" and done.fields["attempts"] == 1
    # Its session closed with it: the controller takes its unreplicated partitions offline at once.
    assert cluster.run_until(lambda: any(cluster.leader("solo", p) in (None, -1) for p in range(3)), 1_000)


def test_the_controller_can_shut_down_in_a_controlled_way_too(cluster: Cluster) -> None:
    ctl = cluster.controller()
    assert ctl is not None
    cluster.shutdown(ctl, controlled=True)
    assert cluster.run_until(lambda: cluster.controller() not in (None, ctl), 30_000)
    assert all(cluster.leader("t", p) not in (None, -1, ctl) for p in range(6))


def test_a_stale_or_unknown_broker_is_refused(cluster: Cluster) -> None:
    ctl = cluster.controller()
    assert (
        cluster.request(ctl, ControlledShutdownRequest(broker_id=9)).error_code == 8
    )  # BROKER_NOT_AVAILABLE
    stale = ControlledShutdownRequest(broker_id=1, broker_epoch=0)
    assert cluster.request(ctl, stale).error_code == 77  # STALE_BROKER_EPOCH
