"""A three-voter quorum plus an observer on the simulator, and the checker of Raft's safety rules."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field

from kafkalite.net.sim import FaultSchedule, SimNetwork
from kafkalite.raft import Batch, LeaderState, QuorumConfig, RaftNode

VOTERS = (1, 2, 3)
OBSERVER = 4
# Kafka's defaults divided by about seven, so one run covers many elections in a few simulated seconds.
FAST = dict(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    election_backoff_max_ms=150,
    request_timeout_ms=200,
    retry_backoff_ms=10,
    fetch_max_wait_ms=50,
)


def scratch_dir() -> str:
    """A directory on tmpfs when there is one: thousands of runs fsync their logs."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    return tempfile.mkdtemp(prefix="kafkalite-raft-", dir=base)


@dataclass
class Checker:
    """Collects what every node did and the violations of Raft's safety rules it saw."""

    leaders: dict[int, set[int]] = field(default_factory=dict)
    committed: dict[int, bytes | None] = field(default_factory=dict)
    state_at: dict[int, str] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def on_transition(self, node: int, state) -> None:
        if isinstance(state, LeaderState):
            self.leaders.setdefault(state.epoch, set()).add(node)
            if len(self.leaders[state.epoch]) > 1:
                self.violations.append(
                    f"two leaders in epoch {state.epoch}: {sorted(self.leaders[state.epoch])}"
                )


class StateMachine:
    """The replicated state: every record in order, and a digest of the whole state after each one."""

    def __init__(self, node: int, checker: Checker) -> None:
        self.node = node
        self.checker = checker
        self.items: list[tuple[int, bytes | None]] = []
        self.digest = hashlib.sha256()

    def handle_commit(self, batch: Batch) -> None:
        c = self.checker
        last = self.items[-1][0] if self.items else -1
        if batch.base_offset <= last:
            c.violations.append(f"node {self.node}: batch at {batch.base_offset} after offset {last}")
        for i, value in enumerate(batch.records):
            offset = batch.base_offset + i
            self.items.append((offset, value))
            self.digest.update(offset.to_bytes(8, "big") + (value or b""))
            state = self.digest.hexdigest()
            if c.committed.setdefault(offset, value) != value:
                c.violations.append(
                    f"node {self.node}: offset {offset} committed as {value!r}, elsewhere {c.committed[offset]!r}"
                )
            if c.state_at.setdefault(offset, state) != state:
                c.violations.append(f"node {self.node}: replayed state at offset {offset} differs")


class Quorum:
    """Three voters and one observer, each a ``RaftNode`` over its own log directory."""

    def __init__(self, seed: int, root: str, *, jitter_ms: int = 3, **overrides) -> None:
        self.net = SimNetwork(seed=seed, latency_ms=1, jitter_ms=jitter_ms, log_messages="none")
        self.checker = Checker()
        self.root = root
        cfg = QuorumConfig(voters=VOTERS, **{**FAST, **overrides})
        self.nodes: dict[int, RaftNode] = {}
        for n in (*VOTERS, OBSERVER):
            node = RaftNode(
                cfg,
                os.path.join(root, f"node-{n}"),
                make_listener=lambda n=n: StateMachine(n, self.checker),
                on_transition=self.checker.on_transition,
            )
            self.nodes[n] = self.net.add_node(n, node)
        self.appended = 0

    def leader(self) -> RaftNode | None:
        live = [n for n in self.nodes.values() if n.client is not None and n.client.quorum.is_leader()]
        return max(live, key=lambda n: n.client.epoch) if live else None

    def try_append(self, value: bytes) -> int | None:
        leader = self.leader()
        if leader is None or self.net.is_paused(leader.node_id):
            return None
        self.appended += 1
        return leader.client.append([value], self.net.now_ms())

    def committed_everywhere(self, offset: int) -> bool:
        return all(n.client is not None and n.client.high_watermark > offset for n in self.nodes.values())

    def close(self) -> None:
        for n in self.nodes.values():
            if n.client is not None:
                n.client.close()
        shutil.rmtree(self.root, ignore_errors=True)


def run_schedule(seed: int, *, duration_ms: int = 2000, liveness_ms: int = 4000) -> tuple[Quorum, list[str]]:
    """One seeded run: faults (crashes with lost page cache, pauses, cuts, lossy and slow links) for
    ``duration_ms`` while a client appends every 50 ms, then everything heals; returns the quorum and
    the violations found (safety during the run, liveness and agreement after it)."""
    q = Quorum(seed, scratch_dir())
    net, rng = q.net, random.Random(f"faults/{seed}")
    nodes = [*VOTERS, OBSERVER]
    FaultSchedule.random(
        seed,
        nodes,
        duration_ms,
        max_crashed=1,
        max_paused=1,
        max_cuts=2,
        gap_ms=(50, 400),
        fault_ms=(50, 700),
    ).apply(net)
    for _ in range(rng.randint(0, 3)):  # lossy or slow links, all healed at the end
        a, b = rng.sample(nodes, 2)
        at = rng.randrange(duration_ms)
        if rng.random() < 0.5:
            p = rng.choice((0.1, 0.3, 0.6))
            net.at(at, lambda a=a, b=b, p=p: net.drop(a, b, p))
        else:
            d = rng.randint(20, 400)
            net.at(at, lambda a=a, b=b, d=d: net.delay(a, b, d))
    for i, t in enumerate(range(0, duration_ms, 50)):
        net.at(t, lambda i=i: q.try_append(b"v%d" % i))
    try:
        return q, _run(q, nodes, duration_ms, liveness_ms)
    except Exception as e:  # a node refusing a transition that breaks a rule: report it with the seed
        return q, [*q.checker.violations, f"{type(e).__name__}: {e}"]


def _run(q: Quorum, nodes: list[int], duration_ms: int, liveness_ms: int) -> list[str]:
    net = q.net
    net.run_for(duration_ms)
    net.heal_all()
    for n in nodes:  # the schedule ends every fault by duration_ms; make sure
        net.restart(n)
        net.resume(n)
    problems = list(q.checker.violations)
    # Liveness: once the faults heal, a leader is elected and commits a new record on every node. A
    # leader deposed before it commits loses the record (Raft promises nothing for it): append again.
    if not net.run_until(lambda: q.leader() is not None, liveness_ms):
        problems.append(f"no leader within {liveness_ms} ms after the faults healed")
    else:
        pending: dict = {}

        def healed() -> bool:
            leader = q.leader()
            if leader is not None and pending.get("epoch") != leader.client.epoch:
                pending["epoch"], pending["offset"] = leader.client.epoch, q.try_append(b"after-heal")
            offset = pending.get("offset")
            return offset is not None and q.committed_everywhere(offset)

        if not net.run_until(healed, liveness_ms):
            problems.append(
                f"nothing appended after healing was committed everywhere within {liveness_ms} ms"
            )
    problems += [v for v in q.checker.violations if v not in problems]
    # Agreement: every node's state machine holds exactly the committed prefix, nothing lost or changed.
    committed = sorted(q.checker.committed.items())
    for n, node in q.nodes.items():
        sm = node.listener
        if sm is not None and sm.items != committed[: len(sm.items)]:
            problems.append(f"node {n}'s replayed records differ from the committed log")
        if sm is not None and len(sm.items) < len(committed):
            problems.append(f"node {n} lost committed records ({len(sm.items)} of {len(committed)})")
    return sorted(set(problems), key=problems.index)
