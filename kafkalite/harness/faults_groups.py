"""Consumer groups under faults: a driver that runs several group members in virtual time, and seeded runs
judged by the consumer-side checker (``kafkalite.harness.checker.check_consumption``).

``GroupRun`` plays the application around each member: it polls every live member in turn, "processes"
what ``poll`` returned (recording each record in a ``ConsumptionHistory``), commits per the chosen order,
and samples who owns what in which generation. Faults hit members (crash, pause) or the group's
coordinator (the broker leading the group's ``__consumer_offsets`` partition).

``run_group_faults(seed, fault)`` is the unit of the group fault tests: a 3-broker cluster, a 6-partition
topic, three members committing after processing (at-least-once), one seeded fault, then the checks:
every committed offset at or below what was processed, no partition owned by two live members in one
generation, and every record processed at least once by the end.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.client.consumer_coordinator import CommitFailedError
from kafkalite.errors import KafkaError, RequestTimedOutError
from kafkalite.harness.checker import ConsumptionHistory, ConsumptionReport
from kafkalite.host.cluster import Cluster
from kafkalite.protocol import TopicPartition

COMMIT_ORDERS = ("after", "before", "none")
FAULTS = ("crash", "pause", "coordinator", "none")
TOPIC = "group-faults"

# Short timeouts so that a few virtual seconds hold a failure and the rebalance after it.
MEMBER_CONFIG: dict[str, Any] = {
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 500,
    "max.poll.interval.ms": 10_000,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "max.poll.records": 20,
    "request.timeout.ms": 3000,
    "default.api.timeout.ms": 6000,
}
BROKER_CONFIG: dict[str, Any] = {
    "offsets.topic.num.partitions": 5,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,  # Kafka's 6000 would refuse the members' 3000
    "zookeeper.session.timeout.ms": 1500,
    "replica.lag.time.max.ms": 1000,
    "auto.leader.rebalance.enable": False,
}


class _Crashed(Exception):
    pass


@dataclass
class _Member:
    name: str
    consumer: Any
    alive: bool = True
    batches: int = 0
    last_poll: int = -(10**9)
    processed: int = 0
    commit_failures: int = 0
    pending: dict[TopicPartition, int] = field(default_factory=dict)
    """Processed but not committed (the commit failed, e.g. during a rebalance): retried next round."""


class GroupRun:
    """Drive the members of one group on ``cluster`` and keep their history.

    ``commit``: ``"after"`` processing (at-least-once), ``"before"`` (at-most-once), or ``"none"`` (the
    application does not commit; auto-commit may). ``crash_between[name] = k`` crashes that member between
    processing and committing (either order) its k-th non-empty batch (counting from 1).
    ``poll_every[name] = ms`` makes a slow member that polls only that often.
    """

    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        topics: Iterable[str],
        *,
        commit: str = "after",
        config: Mapping[str, Any] | None = None,
        crash_between: Mapping[str, int] | None = None,
        poll_every: Mapping[str, int] | None = None,
        on_record: Callable[[str, TopicPartition, Any], None] | None = None,
    ) -> None:
        if commit not in COMMIT_ORDERS:
            raise ValueError(f"commit must be one of {COMMIT_ORDERS}, got {commit!r}")
        self.cluster = cluster
        self.group_id = group_id
        self.topics = list(topics)
        self.commit = commit
        self.config = {**MEMBER_CONFIG, **(config or {})}
        self.crash_between = dict(crash_between or {})
        self.poll_every = dict(poll_every or {})
        self.on_record = on_record
        self.members: dict[str, _Member] = {}
        self.history = ConsumptionHistory()
        self.samples: list[tuple[int, dict[str, list[TopicPartition]]]] = []
        self.marks: list[tuple[int, str]] = []
        self.committed: dict[TopicPartition, int] = {}  # the last successful commit per partition
        self._snapshots: list[dict[str, tuple[int, list[TopicPartition]]]] = []

    # ------------------------------------------------------------------------------- membership

    def join(self, name: str, **config: Any) -> Any:
        """Start a member called ``name`` (also its node id and client id) and subscribe it."""
        if name in self.members:
            raise ValueError(f"member {name!r} already exists")
        cfg = {
            **self.config,
            **{k.replace("_", "."): v for k, v in config.items()},
            "group.id": self.group_id,
        }
        consumer = self.cluster.consumer(name, config=cfg)
        consumer.subscribe(self.topics)
        self.members[name] = _Member(name, consumer)
        self.mark(f"{name} joins")
        return consumer

    def crash(self, name: str) -> None:
        """The member's process dies: no LeaveGroup, the coordinator notices by the session timeout."""
        m = self.members[name]
        if m.alive:
            m.alive = False
            self.cluster.net.crash(name)
            self.mark(f"{name} crashes")

    def close(self, name: str) -> None:
        """A clean shutdown: the member leaves the group at once (LeaveGroup)."""
        m = self.members[name]
        if m.alive:
            m.consumer.close()
            m.alive = False
            self.mark(f"{name} leaves")

    def pause(self, name: str, ms: int) -> None:
        """Freeze the member's node for ``ms`` virtual ms (a long GC pause): no heartbeats, no polls."""
        self.cluster.pause(name, ms)
        self.mark(f"{name} paused")

    def mark(self, label: str) -> None:
        self.marks.append((self.cluster.net.now_ms(), label))

    def live(self) -> list[str]:
        return [n for n, m in self.members.items() if m.alive]

    def assignment(self) -> dict[str, list[TopicPartition]]:
        return {n: sorted(self.members[n].consumer.assignment()) for n in self.live()}

    # ------------------------------------------------------------------------------------ driving

    def step(self, ms: int = 50) -> None:
        """Poll every live, running member once (processing and committing what it got), then let
        ``ms`` of virtual time pass and sample ownership."""
        net = self.cluster.net
        for name, m in list(self.members.items()):
            if not m.alive or net.is_paused(name) or not net.is_up(name):
                continue
            every = self.poll_every.get(name)
            if every is not None and net.now_ms() - m.last_poll < every:
                continue
            m.last_poll = net.now_ms()
            try:
                self._poll_one(m)
            except _Crashed:
                self.crash(name)
        net.run_for(ms)
        self._sample()

    def run_for(self, ms: int, step_ms: int = 50) -> None:
        end = self.cluster.net.now_ms() + ms
        while self.cluster.net.now_ms() < end:
            self.step(min(step_ms, end - self.cluster.net.now_ms()))

    def run_until(self, predicate: Callable[[], bool], timeout_ms: int, step_ms: int = 50) -> bool:
        end = self.cluster.net.now_ms() + timeout_ms
        while not predicate():
            if self.cluster.net.now_ms() >= end:
                return False
            self.step(step_ms)
        return True

    def stable(self, samples: int = 3) -> bool:
        """Every live member is in the same generation, together they own every partition once, no
        member is about to rejoin, and the assignment has not changed over the last ``samples`` samples
        (a cooperative member may still hold a partition it is about to give up)."""
        live = [self.members[n].consumer for n in self.live() if not self.cluster.net.is_paused(n)]
        if not live or len({c.generation_id for c in live}) != 1 or live[0].generation_id < 0:
            return False
        if any(getattr(getattr(c, "_coord", None), "rejoin_needed", False) for c in live):
            return False
        owned = [tp for c in live for tp in c.assignment()]
        if not len(owned) == len(set(owned)) == self._partition_count():
            return False
        now = {n: (self.members[n].consumer.generation_id, sorted(self.members[n].consumer.assignment()))
               for n in self.live()}  # fmt: skip
        recent = self._snapshots[-samples:]
        return len(recent) == samples and all(then == now for then in recent)

    def _partition_count(self) -> int:
        n = 0
        for t in self.topics:
            n += len(self.cluster.read_all(t))
        return n

    def _poll_one(self, m: _Member) -> None:
        c = m.consumer
        batch = c.poll(0)
        if not batch:
            if m.pending:
                self._commit(m, {})  # an application retries a failed commit on its next round
            return
        m.batches += 1
        nxt = {tp: recs[-1].offset + 1 for tp, recs in batch.items()}
        crash_here = self.crash_between.get(m.name) == m.batches
        if self.commit == "before":
            self._commit(m, nxt)
            if crash_here:
                raise _Crashed
        for tp, recs in batch.items():
            for r in recs:
                self.history.processed(m.name, tp, r.offset, r.value)
                m.processed += 1
                if self.on_record is not None:
                    self.on_record(m.name, tp, r)
        if self.commit == "after":
            if crash_here:
                raise _Crashed
            self._commit(m, nxt)

    def _commit(self, m: _Member, offsets: dict[TopicPartition, int]) -> None:
        if self.commit == "after":
            # Only what the member still owns: a partition given away is the new owner's to commit.
            owned = m.consumer.assignment()
            offsets = {tp: o for tp, o in {**m.pending, **offsets}.items() if tp in owned}
            m.pending = {}
            if not offsets:
                return
        try:
            m.consumer.commit_sync(offsets)
        except (CommitFailedError, KafkaError, RequestTimedOutError):
            m.commit_failures += 1
            if self.commit == "after":
                m.pending.update(offsets)
            return
        self.history.committed(m.name, offsets)
        self.committed.update(offsets)

    def _sample(self) -> None:
        t = self.cluster.net.now_ms()
        owned: dict[str, list[TopicPartition]] = {}
        snap = {}
        for name in self.live():
            if not self.cluster.net.is_up(name):
                continue
            c = self.members[name].consumer
            tps = sorted(c.assignment())
            owned[name] = tps
            snap[name] = (c.generation_id, tps)
            self.history.owners(t, name, c.generation_id, tps)
        self.samples.append((t, owned))
        self._snapshots.append(snap)

    # ------------------------------------------------------------------------------------ checking

    def check(self) -> ConsumptionReport:
        """The consumer-side checker on this run: the topics' committed records and the group's offsets."""
        log = {}
        for t in self.topics:
            for p, recs in self.cluster.read_all(t).items():
                log[(t, p)] = recs
        return self.history.check(log, self.cluster.group_offsets(self.group_id))


@dataclass
class GroupFaultResult:
    seed: int
    fault: str
    report: ConsumptionReport
    finished: bool
    virtual_ms: int
    schedule: list[str] = field(default_factory=list)
    commit_failures: int = 0

    @property
    def ok(self) -> bool:
        return self.finished and self.report.ok

    def __str__(self) -> str:
        state = "ok" if self.ok else ("NOT FINISHED " if not self.finished else "") + "VIOLATION"
        lines = [f"seed {self.seed} fault {self.fault}: {state}; {self.report.summary()}"]
        lines += [f"  {f}" for f in self.report.violations[:20]]
        lines += [f"  t={s}" for s in self.schedule]
        return "\n".join(lines)


def run_group_faults(
    seed: int,
    fault: str = "crash",
    *,
    records: int = 600,
    partitions: int = 6,
    members: int = 3,
    commit: str = "after",
    protocol: str = "range",
    timeout_ms: int = 120_000,
) -> GroupFaultResult:
    """One seeded run: fill a topic, start ``members`` members, apply ``fault`` at a seeded time to a
    seeded member (or to the coordinator), then run until the group has committed every record.
    ``protocol``: a ``partition.assignment.strategy`` of the classic protocol, or ``consumer`` for KIP-848's."""
    if fault not in FAULTS:
        raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
    rng = random.Random(seed)
    group = f"group-{seed}"
    broker_config = dict(BROKER_CONFIG)
    member_config: dict[str, Any] = {"partition.assignment.strategy": [protocol], "max.poll.records": 5}
    if protocol == "consumer":
        # KIP-848: the broker, not the member, sets the session and the heartbeat (the members' values).
        broker_config["group.consumer.session.timeout.ms"] = MEMBER_CONFIG["session.timeout.ms"]
        broker_config["group.consumer.heartbeat.interval.ms"] = MEMBER_CONFIG["heartbeat.interval.ms"]
        member_config = {"group.protocol": "consumer", "max.poll.records": 5}
    cluster = Cluster(brokers=3, seed=seed, config=broker_config)
    try:
        cluster.create_topic(TOPIC, partitions, 3)
        producer = cluster.producer(acks="all", linger_ms=1)
        for i in range(records):
            producer.send(TOPIC, f"r{i}".encode(), partition=i % partitions)
        producer.flush()
        if not cluster.run_until(producer.idle, 60_000):
            raise RuntimeError("the producer did not finish")
        names = [f"m{i}" for i in range(members)]
        victim = rng.choice(names)
        # Members poll every 100 ms for 5 records: the topic takes seconds to drain, so faults land mid-way.
        run = GroupRun(
            cluster, group, [TOPIC], commit=commit,
            config=member_config,
            poll_every=dict.fromkeys(names, 100),
            crash_between={victim: rng.randrange(2, 8)} if fault == "crash" else None,
        )  # fmt: skip
        for n in names:
            run.join(n)
        if not run.run_until(run.stable, 30_000):
            raise RuntimeError("the group never became stable")
        schedule: list[str] = []
        run.run_for(rng.randrange(0, 1000, 50))
        if fault == "crash":
            # Between processing a batch and committing it (crash_between above).
            run.run_until(lambda: not run.members[victim].alive, timeout_ms)
            victim = f"{victim} between processing and commit of batch {run.crash_between[victim]}"
        elif fault == "pause":
            ms = MEMBER_CONFIG["session.timeout.ms"] + rng.randrange(500, 3000, 100)
            run.pause(victim, ms)
            victim = f"{victim} for {ms} ms"
        elif fault == "coordinator":
            broker = cluster.coordinator(group)
            cluster.crash(broker)
            run.mark(f"broker {broker} (coordinator) crashes")
            victim = f"broker {broker}"
        if fault != "none":
            schedule.append(f"{cluster.net.now_ms()} {fault} {victim}")
        end_offsets = {TopicPartition(TOPIC, p): records // partitions + (p < records % partitions)
                       for p in range(partitions)}  # fmt: skip

        def done() -> bool:
            return run.stable() and all(run.committed.get(tp, 0) >= o for tp, o in end_offsets.items())

        finished = run.run_until(done, timeout_ms)
        report = run.check()
        failures = sum(m.commit_failures for m in run.members.values())
        return GroupFaultResult(seed, fault, report, finished, cluster.net.now_ms(), schedule, failures)
    finally:
        cluster.close()
