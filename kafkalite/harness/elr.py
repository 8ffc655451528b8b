"""KIP-966's two cases on a KRaft cluster, with the ``eligible.leader.replicas.version`` feature on or off.

Both use one partition, three replicas and ``min.insync.replicas=2``, write acks=all records while the
ISR is full, then fail replicas. While the ISR is below min ISR the high watermark stands still, so every
replica that left the ISR then still holds every acknowledged record: that is why KIP-966 may elect it.

* ``leader_crash_after_isr_shrink``: the leader is cut from both followers (they stay up and in touch
  with the controller), shrinks the ISR to itself, then crashes and loses its page cache. Without ELR it
  is the last ISR member, so the partition waits for it and it leads again with the records it lost:
  the followers truncate to it and acknowledged records are gone. With ELR the followers are eligible:
  one is elected as soon as the leader is fenced, no unclean election and nothing lost.
* ``every_replica_stops``: the three replicas stop cleanly one by one (followers first), then only the
  second to stop comes back. Without ELR the partition stays offline until the last ISR member returns;
  with ELR the returning replica is eligible and leads at once.

Each returns an ``ElrRun``: the acknowledged and lost records and the partition's state at each step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkalite.host.kraft_cluster import CONTROLLER_BASE, KRaftCluster
from kafkalite.metadata.controller.replication_control import ELR_FEATURE
from kafkalite.metadata.image import MetadataImage, PartitionRegistration

TOPIC = "elr"
CONFIG: dict[str, Any] = {
    "min.insync.replicas": 2,
    "replica.lag.time.max.ms": 1000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 100,
    "replica.socket.timeout.ms": 3000,
    "auto.leader.rebalance.enable": False,
}
"""Short timeouts, so a run is a few seconds of virtual time."""


@dataclass
class ElrRun:
    elr: bool
    seed: int
    replicas: tuple[int, ...] = ()
    acked: list[bytes] = field(default_factory=list)
    lost: list[bytes] = field(default_factory=list)
    steps: list[tuple[str, PartitionRegistration]] = field(default_factory=list)
    """(what just happened, the partition as the active controller then has it)."""
    order: tuple[int, ...] = ()
    """The brokers in the order they failed (``every_replica_stops``)."""
    unclean_elections: int = 0
    """Leaders the controller gave to a replica in neither the ISR nor the ELR before."""

    def state(self, step: str) -> PartitionRegistration:
        return dict(self.steps)[step]


def _cluster(elr: bool, seed: int, run: ElrRun) -> KRaftCluster:
    prev: list[PartitionRegistration | None] = [None]

    def watch(node: int, image: MetadataImage) -> None:
        if node != CONTROLLER_BASE + 1:  # the only controller
            return
        part = image.partition(TOPIC, 0)
        old = prev[0]
        moved = part is not None and old is not None and part.leader not in (old.leader, -1)
        if moved and part.leader not in (*old.isr, *old.elr):  # type: ignore[union-attr]
            run.unclean_elections += 1
        prev[0] = part

    return KRaftCluster(
        brokers=3,
        controllers=1,
        seed=seed,
        config=CONFIG,
        heartbeat_interval_ms=500,
        session_timeout_ms=2000,
        on_image=watch,
        features={ELR_FEATURE: 1 if elr else 0},
    )


def _produce(c: KRaftCluster, run: ElrRun, count: int) -> Any:
    producer = c.producer(
        acks="all", linger_ms=0, retries=0, request_timeout_ms=1500, delivery_timeout_ms=3000
    )
    sent = [(f"r{i}".encode(), producer.send(TOPIC, f"r{i}".encode(), partition=0)) for i in range(count)]
    c.run_until(lambda: all(f.done() for _, f in sent), 10_000)
    run.acked = [v for v, f in sent if f.exception() is None]
    return producer


def _finish(c: KRaftCluster, run: ElrRun) -> ElrRun:
    for b in run.replicas:
        if not c.net.is_up(b):
            c.restart(b)
    c.run_until(lambda: len(c.isr(TOPIC, 0)) == 3, 20_000)
    run.steps.append(("all back", c.partition_state(TOPIC, 0)))
    kept = {r.value for r in c.read_all(TOPIC)[0]}
    run.lost = [v for v in run.acked if v not in kept]
    c.close()
    return run


def leader_crash_after_isr_shrink(elr: bool, seed: int = 0, records: int = 20) -> ElrRun:
    """The case KIP-966 fixes: the leader, alone in the ISR, crashes and loses its unflushed records."""
    run = ElrRun(elr, seed)
    c = _cluster(elr, seed, run)
    run.replicas = c.create_topic(TOPIC, 1, 3)[0]
    leader = c.leader(TOPIC, 0)
    assert leader is not None
    producer = _produce(c, run, records)
    run.steps.append(("acked", c.partition_state(TOPIC, 0)))
    followers = [b for b in run.replicas if b != leader]
    for f in followers:
        c.cut(leader, f)
    # Records the followers never get: the ISR shrinks to the leader and they are never acknowledged.
    for i in range(3):
        producer.send(TOPIC, f"late{i}".encode(), partition=0)
    c.run_until(lambda: c.isr(TOPIC, 0) == (leader,), 10_000)
    run.steps.append(("isr shrank to the leader", c.partition_state(TOPIC, 0)))
    c.crash(leader, lose_unflushed=True)
    c.run_until(lambda: c.image().brokers[leader].fenced, 10_000)
    run.steps.append(("leader crashed", c.partition_state(TOPIC, 0)))
    for f in followers:
        c.heal(leader, f)
    c.restart(leader)
    c.run_until(lambda: not c.image().brokers[leader].fenced and c.leader(TOPIC, 0) is not None, 20_000)
    run.steps.append(("leader back", c.partition_state(TOPIC, 0)))
    return _finish(c, run)


def every_replica_stops(elr: bool, seed: int = 0, records: int = 20) -> ElrRun:
    """Every replica stops cleanly, followers first; then only the second to stop comes back."""
    run = ElrRun(elr, seed)
    c = _cluster(elr, seed, run)
    run.replicas = c.create_topic(TOPIC, 1, 3)[0]
    leader = c.leader(TOPIC, 0)
    assert leader is not None
    _produce(c, run, records)
    order = run.order = (*(b for b in run.replicas if b != leader), leader)
    for b in order:
        c.shutdown(b, controlled=False)
        c.run_until(lambda b=b: c.image().brokers[b].fenced, 10_000)
        run.steps.append((f"{b} stopped", c.partition_state(TOPIC, 0)))
    c.restart(order[1])
    c.run_until(lambda: not c.image().brokers[order[1]].fenced, 10_000)
    c.run_for(500)
    run.steps.append((f"{order[1]} back", c.partition_state(TOPIC, 0)))
    return _finish(c, run)


__all__ = ["ElrRun", "every_replica_stops", "leader_crash_after_isr_shrink"]
