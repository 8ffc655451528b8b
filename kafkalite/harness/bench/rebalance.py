"""How long does a rebalance leave partitions without a consumer? Classic eager vs classic
cooperative-sticky (KIP-429) vs the consumer group protocol (KIP-848), in the simulator.

One in-process ``Cluster`` (1 broker, virtual time, seeded: every number is deterministic) holds a topic of
``partitions`` partitions. A group of consumers is started and left to settle; then one of two changes:

* ``scale-out``: 3 members become 6 (three new members subscribe at once);
* ``rolling-restart``: each of 3 members in turn closes (revoking its partitions, leaving the group) and a
  new member takes its place; the next restart waits until the group is stable again, as an operator would.

Every member has a rebalance listener that notes, at the virtual time its application sees it, each
partition it is given and each it gives up (revoked or lost). From those notes each partition's owners are
known at every instant, so the bench measures what the application of a consumer group experiences:

* ``unowned ms (mean / max)``: per partition, the total time it had no owner during the change;
* ``longest gap ms``: the longest single stretch any partition had no owner;
* ``paused``: how many partitions were without an owner at some point;
* ``max owners``: the most members that ever held one partition at once (1: never two);
* ``settled ms``: from the change until every partition has exactly one owner and every member is stable;
* ``revocations``: listener calls that took partitions from a member (revoked or lost).

Members are polled in turn, ``poll_ms`` of virtual time each (the application's loop), with the same
heartbeat interval under both protocols (``heartbeat_ms``: the classic ``heartbeat.interval.ms`` and the
broker's ``group.consumer.heartbeat.interval.ms``), so the protocols differ only in how they move partitions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kafkalite.client.consumer import Consumer, ConsumerRebalanceListener
from kafkalite.client.consumer_coordinator import MemberState as ClassicMemberState
from kafkalite.client.consumer_membership_manager import ConsumerMembershipManager
from kafkalite.client.consumer_membership_manager import MemberState as NewMemberState
from kafkalite.harness.bench._report import JsonResult
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition

TOPIC = "bench-rebalance"
GROUP_ID = "bench-rebalance"
PROTOCOLS = ("eager", "cooperative", "consumer")
"""Classic with ``range`` (eager), classic with ``cooperative-sticky``, ``group.protocol=consumer``."""
SCENARIOS = ("scale-out", "rolling-restart")
SETTLE_LIMIT_MS = 600_000


@dataclass
class RebalanceCase:
    """One protocol, one partition count, one scenario."""

    protocol: str
    partitions: int
    scenario: str
    settled_ms: int
    unowned_mean_ms: float
    unowned_max_ms: int
    longest_gap_ms: int
    paused: int
    max_owners: int
    revocations: int
    """Listener calls that took partitions away (revoked or lost): how many times a member stopped some."""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RebalanceBenchResult(JsonResult):
    heartbeat_ms: int
    poll_ms: int
    seed: int
    cases: list[RebalanceCase] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "heartbeat_ms": self.heartbeat_ms,
            "poll_ms": self.poll_ms,
            "seed": self.seed,
            "cases": [c.to_dict() for c in self.cases],
        }

    def table(self) -> str:
        head = (
            f"{'scenario':<16} {'partitions':>10} {'protocol':<12} {'settled ms':>10} {'unowned mean':>12} "
            f"{'unowned max':>11} {'longest gap':>11} {'paused':>7} {'max owners':>10} {'revocations':>11}"
        )
        lines = [
            f"time without an owner, per partition (virtual ms; heartbeat {self.heartbeat_ms} ms, each member "
            f"polls {self.poll_ms} ms in turn, seed {self.seed})",
            head,
            "-" * len(head),
        ]
        for c in self.cases:
            lines.append(
                f"{c.scenario:<16} {c.partitions:>10} {c.protocol:<12} {c.settled_ms:>10} "
                f"{c.unowned_mean_ms:>12.1f} {c.unowned_max_ms:>11} {c.longest_gap_ms:>11} "
                f"{c.paused:>7} {c.max_owners:>10} {c.revocations:>11}"
            )
        return "\n".join(lines)


class Ownership(ConsumerRebalanceListener):
    """Shared by every member of one run: who owns each partition, and since when nobody does."""

    def __init__(self, cluster: Cluster, partitions: int) -> None:
        self.cluster = cluster
        self.owners: dict[TopicPartition, set[str]] = {
            TopicPartition(TOPIC, p): set() for p in range(partitions)
        }
        self.unowned_since: dict[TopicPartition, int] = dict.fromkeys(self.owners, 0)
        self.measuring = False
        self.unowned: dict[TopicPartition, int] = dict.fromkeys(self.owners, 0)
        self.longest_gap = 0
        self.max_owners = 0
        self.stops = 0

    def start(self) -> None:
        """Begin measuring: partitions unowned right now count from now."""
        now = self.cluster.net._now
        self.measuring = True
        for tp, owners in self.owners.items():
            if not owners:
                self.unowned_since[tp] = now

    def listener(self, member: str) -> ConsumerRebalanceListener:
        book = self

        class _Member(ConsumerRebalanceListener):
            def on_partitions_assigned(self, partitions: set) -> None:
                book.take(member, partitions)

            def on_partitions_revoked(self, partitions: set) -> None:
                book.give(member, partitions)

            def on_partitions_lost(self, partitions: set) -> None:
                book.give(member, partitions)

        return _Member()

    def take(self, member: str, partitions: set) -> None:
        now = self.cluster.net._now
        for tp in partitions:
            owners = self.owners[tp]
            if not owners and self.measuring:
                gap = now - self.unowned_since[tp]
                self.unowned[tp] += gap
                self.longest_gap = max(self.longest_gap, gap)
            owners.add(member)
            self.max_owners = max(self.max_owners, len(owners))

    def give(self, member: str, partitions: set) -> None:
        now = self.cluster.net._now
        if partitions and self.measuring:
            self.stops += 1
        for tp in partitions:
            owners = self.owners[tp]
            owners.discard(member)
            if not owners:
                self.unowned_since[tp] = now

    def settled(self) -> bool:
        return all(len(o) == 1 for o in self.owners.values())


def _config(protocol: str, heartbeat_ms: int) -> dict[str, Any]:
    base = {"group.id": GROUP_ID, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if protocol == "consumer":
        return {**base, "group.protocol": "consumer"}
    strategy = ["range"] if protocol == "eager" else ["cooperative-sticky"]
    return {
        **base,
        "partition.assignment.strategy": strategy,
        "heartbeat.interval.ms": heartbeat_ms,
        "session.timeout.ms": max(10 * heartbeat_ms, 10_000),
    }


def _quiet(c: Consumer) -> bool:
    coord = c._coord
    assert coord is not None
    if isinstance(coord, ConsumerMembershipManager):
        return coord.state is NewMemberState.STABLE and coord._target is None
    return (
        coord.state is ClassicMemberState.STABLE
        and not coord.rejoin_needed
        and coord._pending_assignment is None
        and not coord._prepared
    )


class _Run:
    def __init__(self, protocol: str, partitions: int, heartbeat_ms: int, poll_ms: int, seed: int) -> None:
        config = {
            "offsets.topic.num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "group.consumer.heartbeat.interval.ms": heartbeat_ms,
            "group.consumer.session.timeout.ms": max(10 * heartbeat_ms, 10_000),
        }
        self.cluster = Cluster(brokers=1, seed=seed, config=config)
        self.cluster.create_topic(TOPIC, partitions=partitions, replication_factor=1)
        self.protocol, self.partitions, self.heartbeat_ms, self.poll_ms = (
            protocol,
            partitions,
            heartbeat_ms,
            poll_ms,
        )
        self.book = Ownership(self.cluster, partitions)
        self.members: list[Consumer] = []
        self._made = 0

    def add(self) -> Consumer:
        self._made += 1
        name = f"m{self._made}"
        c = self.cluster.consumer(name, config=_config(self.protocol, self.heartbeat_ms))
        c.subscribe([TOPIC], listener=self.book.listener(name))
        self.members.append(c)
        return c

    def settle(self) -> int:
        """Poll the members in turn until the group is stable; the virtual ms it took."""
        net = self.cluster.net
        start = net._now
        while net._now - start < SETTLE_LIMIT_MS:
            for c in self.members:
                c.poll(self.poll_ms)
            if self.book.settled() and all(_quiet(c) for c in self.members) and self._balanced():
                return net._now - start
        raise RuntimeError(
            f"{self.protocol}, {self.partitions} partitions: the group did not settle within {SETTLE_LIMIT_MS} ms"
        )

    def _balanced(self) -> bool:
        sizes = [len(c.assignment()) for c in self.members]
        return max(sizes) - min(sizes) <= 1

    def close(self) -> None:
        self.cluster.close()


def measure(
    protocol: str,
    partitions: int,
    scenario: str,
    *,
    heartbeat_ms: int = 3_000,
    poll_ms: int = 50,
    seed: int = 0,
) -> RebalanceCase:
    """One case; see the module docstring."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
    if partitions < 6:
        raise ValueError(
            f"partitions must be at least 6 (one per member after the scale-out), got {partitions}"
        )
    run = _Run(protocol, partitions, heartbeat_ms, poll_ms, seed)
    try:
        for _ in range(3):
            run.add()
        run.settle()
        book = run.book
        book.start()
        net = run.cluster.net
        start = net._now
        if scenario == "scale-out":
            for _ in range(3):
                run.add()
            run.settle()
        else:
            for _ in range(3):
                old = run.members.pop(0)
                old.close()
                run.add()
                run.settle()
        settled = net._now - start
        unowned = list(book.unowned.values())
        return RebalanceCase(
            protocol=protocol,
            partitions=partitions,
            scenario=scenario,
            settled_ms=settled,
            unowned_mean_ms=sum(unowned) / len(unowned),
            unowned_max_ms=max(unowned),
            longest_gap_ms=book.longest_gap,
            paused=sum(1 for u in unowned if u > 0),
            max_owners=book.max_owners,
            revocations=book.stops,
        )
    finally:
        run.close()


def run_rebalance_bench(
    partitions: tuple[int, ...] = (100, 1000),
    protocols: tuple[str, ...] = PROTOCOLS,
    scenarios: tuple[str, ...] = SCENARIOS,
    *,
    heartbeat_ms: int = 3_000,
    poll_ms: int = 50,
    seed: int = 0,
) -> RebalanceBenchResult:
    """Every scenario x partition count x protocol, in that order."""
    if heartbeat_ms <= 0 or poll_ms <= 0:
        raise ValueError(f"heartbeat_ms and poll_ms must be positive, got {heartbeat_ms} and {poll_ms}")
    result = RebalanceBenchResult(heartbeat_ms, poll_ms, seed)
    for scenario in scenarios:
        for n in partitions:
            for protocol in protocols:
                result.cases.append(
                    measure(protocol, n, scenario, heartbeat_ms=heartbeat_ms, poll_ms=poll_ms, seed=seed)
                )
    return result


__all__ = [
    "PROTOCOLS",
    "SCENARIOS",
    "RebalanceBenchResult",
    "RebalanceCase",
    "measure",
    "run_rebalance_bench",
]
