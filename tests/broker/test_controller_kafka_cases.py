"""Controller answers checked against Kafka's ZooKeeper-mode controller and admin code, for requests
the main controller tests do not send: ElectLeaders over every partition, reassignments that keep a
dead replica, CreatePartitions during a reassignment, CreateTopics with explicit assignments."""

from __future__ import annotations

from kafkalite.errors import (
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    ReassignmentInProgressError,
)
from kafkalite.protocol import (
    AlterPartitionReassignmentsRequest,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    ElectLeadersRequest,
    Reassignment,
)
from kafkalite.protocol.metadata import ReplicaAssignment
from tests.broker.test_controller import TP, Harness, create


def _reassign(h: Harness, tp, replicas) -> int:
    req = AlterPartitionReassignmentsRequest(reassignments=(Reassignment(tp=tp, replicas=replicas),))
    return h.ask(req).results[0].error_code


def test_elect_leaders_over_every_partition_lists_only_real_elections() -> None:
    h = Harness()
    create(h, "t", 3, 3)
    resp = h.ask(ElectLeadersRequest(election_type=0))  # every leader is already the preferred one
    assert resp.results == ()
    named = h.ask(ElectLeadersRequest(election_type=0, partitions=(TP("t", 0),)))
    assert [r.error_code for r in named.results] == [84]  # ELECTION_NOT_NEEDED when asked by name


def test_a_reassignment_may_keep_a_dead_replica_but_not_add_one() -> None:
    h = Harness(n=4)
    create(h, "t", 1, 2)
    old = h.assignment("t").partitions[0]
    spare = [b for b in (1, 2, 3, 4) if b not in old]
    h.net.crash(old[1])
    h.net.run_for(7_000)
    # Keep the dead old[1], add a live broker: Kafka checks only the added replicas.
    assert _reassign(h, TP("t", 0), (old[1], spare[0])) == 0
    h.net.crash(spare[1])
    h.net.run_for(7_000)
    code = _reassign(h, TP("t", 0), (old[0], spare[1]))
    assert code == InvalidReplicaAssignmentError.code


def test_no_new_partitions_while_a_reassignment_runs() -> None:
    h = Harness(n=4)
    create(h, "t", 1, 2)
    old = h.assignment("t").partitions[0]
    target = tuple(b for b in (1, 2, 3, 4) if b not in old)
    assert _reassign(h, TP("t", 0), target) == 0
    resp = h.ask(CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t", count=2),)))
    assert resp.results[0].error_code == ReassignmentInProgressError.code
    assert len(h.assignment("t").partitions) == 1


def _create_with(h: Harness, plan: dict[int, tuple[int, ...]], **counts) -> int:
    assignments = tuple(ReplicaAssignment(partition=p, broker_ids=b) for p, b in plan.items())
    req = CreateTopicsRequest(topics=(CreatableTopic(name="u", assignments=assignments, **counts),))
    return h.ask(req).topics[0].error_code


def test_create_topics_with_explicit_assignments_answers_as_kafka() -> None:
    h = Harness()
    assert _create_with(h, {0: (1, 2), 1: (2, 3)}, num_partitions=2) == InvalidRequestError.code
    assert _create_with(h, {0: (1, 2), 2: (2, 3)}) == InvalidReplicaAssignmentError.code  # a gap
    assert _create_with(h, {0: (1, 2), 1: (2,)}) == InvalidReplicaAssignmentError.code  # unequal sizes
    assert _create_with(h, {0: (1, 1), 1: (2, 3)}) == InvalidReplicaAssignmentError.code  # a duplicate
    assert _create_with(h, {0: (1, 2), 1: (2, 3)}) == 0
    assert h.assignment("u").partitions == {0: (1, 2), 1: (2, 3)}
