"""Consumer groups under seeded faults (member crash, pause longer than the session timeout, coordinator
failover), judged by the consumer-side checker; and the checker itself on hand-written histories."""

from __future__ import annotations

import pytest

from kafkalite.harness.checker import (
    COMMIT_AHEAD,
    REPROCESSED,
    SHARED_OWNERSHIP,
    SKIPPED,
    UNPROCESSED,
    ConsumptionHistory,
)
from kafkalite.harness.faults_groups import BROKER_CONFIG, GroupRun, run_group_faults
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition

TP = TopicPartition("t", 0)
LOG = {("t", 0): [(o, f"v{o}") for o in range(4)]}


def test_checker_accepts_a_clean_history() -> None:
    h = ConsumptionHistory()
    for o in range(4):
        h.processed("a", TP, o)
    h.committed("a", {TP: 4})
    h.owners(10, "a", 1, [TP])
    h.owners(10, "b", 1, [])
    r = h.check(LOG, {TP: 4})
    assert r.ok and r.records == 4 and r.processed == 4 and r.commits == 1
    assert all(n == 0 for n in r.counts.values())


def test_checker_flags_commit_ahead_and_skipped() -> None:
    h = ConsumptionHistory()
    h.committed("a", {TP: 2})  # at-most-once: committed before processing
    h.processed("a", TP, 0)
    r = h.check(LOG, {TP: 2})
    assert [f.kind for f in r.findings] == [SKIPPED, UNPROCESSED, UNPROCESSED, COMMIT_AHEAD]
    assert r.of_kind(SKIPPED)[0].offset == 1 and not r.ok
    assert r.of_kind(COMMIT_AHEAD)[0].member == "a"


def test_commit_may_repeat_the_groups_previous_commit() -> None:
    h = ConsumptionHistory()
    h.processed("a", TP, 0)
    h.committed("a", {TP: 1})
    h.committed("b", {TP: 1})  # b took over and commits the position it started from
    r = h.check({("t", 0): [(0, "x")]}, {TP: 1})
    assert r.ok


def test_checker_flags_reprocessing_and_shared_ownership() -> None:
    h = ConsumptionHistory()
    for m in ("a", "b"):
        h.processed(m, TP, 0)
    h.owners(5, "a", 3, [TP])
    h.owners(5, "b", 3, [TP])
    h.owners(6, "a", 3, [TP])
    h.owners(6, "b", 4, [TP])  # another generation: a zombie, not a double owner
    r = h.check({("t", 0): [(0, "x")]}, {TP: 1})
    assert r.counts[REPROCESSED] == 1 and r.counts[SHARED_OWNERSHIP] == 1
    assert r.of_kind(SHARED_OWNERSHIP)[0].member == "a,b" and not r.ok
    with pytest.raises(ValueError, match="unknown"):
        r.of_kind("nope")


@pytest.mark.parametrize("fault", ["crash", "pause", "coordinator"])
@pytest.mark.parametrize("seed", [1, 2])
def test_group_survives_fault_at_least_once(seed: int, fault: str) -> None:
    r = run_group_faults(seed, fault)
    assert r.finished, str(r)
    assert r.report.ok, str(r)
    counts = r.report.counts
    assert counts[SKIPPED] == counts[UNPROCESSED] == counts[COMMIT_AHEAD] == counts[SHARED_OWNERSHIP] == 0
    assert r.report.records == 600 and r.report.processed >= 600
    assert r.schedule and fault in r.schedule[0]


def test_crash_between_processing_and_commit_reprocesses_the_batch() -> None:
    r = run_group_faults(3, "crash")
    assert r.ok and r.report.counts[REPROCESSED] == 5  # one batch of max.poll.records=5, processed twice


def test_at_most_once_loses_the_batch_in_flight() -> None:
    r = run_group_faults(3, "crash", commit="before")
    assert r.finished
    assert r.report.counts[SKIPPED] == 5 and r.report.counts[REPROCESSED] == 0
    assert r.report.counts[COMMIT_AHEAD] > 0 and not r.report.ok


@pytest.mark.parametrize("fault", ["crash", "pause", "coordinator"])
def test_cooperative_group_survives_faults(fault: str) -> None:
    # Seed 2's pause makes commits fail mid-rebalance while the partitions stay put: the application's
    # retry of the failed commit on its next round is what lets the group commit everything.
    r = run_group_faults(2 if fault == "pause" else 4, fault, protocol="cooperative-sticky")
    assert r.ok, str(r)
    if fault == "pause":
        assert r.commit_failures > 0


@pytest.mark.parametrize("fault", ["crash", "pause", "coordinator"])
@pytest.mark.parametrize("seed", [1, 2])
def test_consumer_protocol_group_survives_faults(seed: int, fault: str) -> None:
    # group.protocol=consumer (KIP-848): a crash or a pause fences the member after the broker's session
    # timeout; a coordinator failover makes the members find the new one and rejoin with epoch 0.
    r = run_group_faults(seed, fault, protocol="consumer")
    assert r.finished and r.report.ok, str(r)
    assert r.report.counts[SHARED_OWNERSHIP] == r.report.counts[SKIPPED] == 0


def test_coordinator_failover_moves_the_group_and_keeps_offsets() -> None:
    with Cluster(brokers=3, seed=5, config=BROKER_CONFIG) as cluster:
        cluster.create_topic("t", 2, 3)
        producer = cluster.producer(acks="all")
        for i in range(40):
            producer.send("t", b"x%d" % i, partition=i % 2)
        producer.flush()
        assert cluster.run_until(producer.idle, 30_000)
        run = GroupRun(cluster, "g", ["t"])
        run.join("a")
        assert run.run_until(lambda: run.committed == {TopicPartition("t", 0): 20, TopicPartition("t", 1): 20},
                             30_000)  # fmt: skip
        old = cluster.coordinator("g")
        cluster.crash(old)
        assert run.run_until(lambda: cluster.coordinator("g", 100) not in (None, old), 30_000)
        assert cluster.group_offsets("g") == {TopicPartition("t", 0): 20, TopicPartition("t", 1): 20}
        assert run.check().ok


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="fault"):
        run_group_faults(0, "meteor")
    with Cluster(brokers=1, seed=0) as cluster, pytest.raises(ValueError, match="commit"):
        GroupRun(cluster, "g", ["t"], commit="sometimes")
