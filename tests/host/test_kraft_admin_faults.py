"""Seeded runs of KRaft reassignments, cancellations and elections under broker crashes while an acks=all
producer writes: every committed image on every node keeps Kafka's partition rules, no acknowledged record
is lost, and once the brokers are back every move has finished with each broker holding exactly the
replicas the metadata gives it."""

from __future__ import annotations

import random

import pytest

from kafkalite.harness.checker import check_history
from kafkalite.host.kraft_cluster import KRaftCluster
from kafkalite.protocol import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    TopicPartition,
)
from kafkalite.protocol.controller import Reassignment
from tests.metadata.kraft_harness import image_invariants

BROKERS = (1, 2, 3, 4)
PARTITIONS = 3


@pytest.mark.parametrize("seed", range(6))
def test_moves_and_elections_under_crashes_keep_the_rules_and_the_data(seed: int) -> None:
    violations: list[str] = []

    def on_image(node: int, image) -> None:  # noqa: ANN001 - the cluster's callback
        violations.extend(f"node {node} offset {image.offset}: {v}" for v in image_invariants(image))

    c = KRaftCluster(
        brokers=len(BROKERS),
        controllers=3,
        seed=seed,
        on_image=on_image,
        config={"leader.imbalance.check.interval.seconds": 3},
    )
    try:
        rng = random.Random(seed)
        c.create_topic("t", partitions=PARTITIONS, replication_factor=2)
        producer = c.producer(acks="all", linger_ms=0, retries=1_000_000, delivery_timeout_ms=600_000)
        sent = []
        down: int | None = None
        moves = 0
        for step in range(30):
            sent += [producer.send("t", f"s{step}-{i}".encode(), partition=i % PARTITIONS) for i in range(3)]
            action = rng.choice(["move", "move", "cancel", "elect", "crash", "restart"])
            tp = TopicPartition("t", rng.randrange(PARTITIONS))
            up = [b for b in BROKERS if b != down]
            if action == "move":
                target = tuple(rng.sample(BROKERS, 2))
                req = AlterPartitionReassignmentsRequest(
                    reassignments=(Reassignment(tp=tp, replicas=target),)
                )
                moves += c.request(rng.choice(up), req, 30_000).results[0].error_code == 0
            elif action == "cancel":
                req = AlterPartitionReassignmentsRequest(reassignments=(Reassignment(tp=tp, replicas=None),))
                c.request(rng.choice(up), req, 30_000)
            elif action == "elect":
                c.request(rng.choice(up), ElectLeadersRequest(election_type=0, partitions=None), 30_000)
            elif action == "crash" and down is None:
                down = rng.choice(BROKERS)
                c.crash(down)
            elif action == "restart" and down is not None:
                c.restart(down)
                down = None
            c.run_for(rng.randrange(200, 3000))
        if down is not None:
            c.restart(down)
        assert moves, "no reassignment was accepted"

        def settled() -> bool:
            """No move left, every replica in sync and holding what its leader acknowledged, every send
            answered. The request runs the network, so the
            rest is checked after it: nothing moves between this and the reads below."""
            moving = c.request(1, ListPartitionReassignmentsRequest(), 30_000).reassignments
            return (
                not moving
                and all(f.done() for f in sent)
                and all(
                    set(c.isr("t", p)) == set(c.replicas("t", p))
                    and set(c.log_end_offsets("t", p).values()) == {c.high_watermark("t", p)}
                    for p in range(PARTITIONS)
                )
            )

        for _ in range(240):  # ListPartitionReassignments between the steps: run_until cannot nest a request
            if settled():
                break
            c.run_for(500)
        else:
            raise AssertionError({p: c.partition_state("t", p) for p in range(PARTITIONS)})
        report = check_history(
            producer.history,
            {("t", p): recs for p, recs in c.read_all("t").items()},
            replicas={("t", p): c.replica_logs("t", p) for p in range(PARTITIONS)},
            high_watermarks={("t", p): c.high_watermark("t", p) for p in range(PARTITIONS)},
        )
        assert report.ok, report
        assert c.run_until(lambda: all(i == c.image() for i in c.broker_images().values()), 20_000)
        for b, server in c.brokers.items():
            hosted = sorted(p.tp.partition for p in server.rm.partitions() if p.tp.topic == "t")
            want = [p for p in range(PARTITIONS) if b in c.replicas("t", p)]
            assert hosted == want, (b, hosted, want)
        assert not violations, violations[:5]
    finally:
        c.close()
