"""KIP-966's eligible leader replicas in ``partition_change`` and the quorum controller: the ELR grows
when the ISR shrinks below min ISR and clears when it grows back, an empty ISR elects from the ELR, an
unclean shutdown leaves the ELR, the last known leader is the last resort, and with the feature off
(Kafka 4.0's default) nothing of it happens."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.metadata.controller.partition_change import partition_change
from kafkalite.metadata.image import PartitionRegistration
from kafkalite.metadata.records import NO_LEADER, PartitionChangeRecord, PartitionRecord
from kafkalite.metadata.serde import deserialize, serialize
from kafkalite.protocol.metadata import CreatableTopic, CreateTopicsRequest
from tests.metadata.kraft_harness import SESSION_MS, KRaftQuorum

TID = uuid.UUID(int=9)
ELR = {"elr_enabled": True, "min_isr": 2}


def _up(*down: int):
    return lambda b: b not in down


def _after(part: PartitionRegistration, rec: PartitionChangeRecord | None) -> PartitionRegistration:
    return part if rec is None else part.merge(rec)


def test_isr_shrinking_below_min_isr_puts_the_leaving_replicas_in_the_elr() -> None:
    full = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
    at_min = _after(full, partition_change(TID, 0, full, _up(3), (1, 2), **ELR))
    assert (at_min.isr, at_min.elr) == ((1, 2), ()), "at min ISR nobody is eligible outside the ISR"
    below = _after(at_min, partition_change(TID, 0, at_min, _up(2, 3), (1,), **ELR))
    assert (below.isr, below.elr, below.leader) == ((1,), (2,), 1), below
    off = _after(at_min, partition_change(TID, 0, at_min, _up(2, 3), (1,)))
    assert (off.isr, off.elr) == ((1,), ()), "the feature off: no ELR"


def test_isr_growth_takes_the_rejoining_replica_out_and_clears_the_elr_at_min_isr() -> None:
    part = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1, elr=(2, 3))
    strict = {"elr_enabled": True, "min_isr": 3}
    grown = _after(part, partition_change(TID, 0, part, _up(), (1, 2), **strict))
    assert (grown.isr, grown.elr) == ((1, 2), (3,)), "still below min ISR: only the rejoined one leaves"
    back = _after(part, partition_change(TID, 0, part, _up(), (1, 2), **ELR))
    assert (back.isr, back.elr) == ((1, 2), ()), "at min ISR again the ELR is cleared"


def test_an_empty_isr_elects_from_the_elr_and_the_elected_replica_becomes_the_isr() -> None:
    part = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1, elr=(2,))
    rec = partition_change(TID, 0, part, _up(1), (), **ELR)
    after = _after(part, rec)
    assert (after.leader, after.isr, after.elr) == (2, (2,), (1,)), after
    assert after.leader_epoch == part.leader_epoch + 1, "a new leader, a new epoch"
    nobody = _after(part, partition_change(TID, 0, part, _up(1, 2), (), **ELR))
    assert (nobody.leader, nobody.isr, nobody.elr) == (NO_LEADER, (), (1, 2)), nobody
    assert nobody.last_known_elr == (1,), "the last leader is remembered once the ISR empties"
    back = _after(nobody, partition_change(TID, 0, nobody, _up(1), **ELR))
    assert (back.leader, back.isr, back.elr, back.last_known_elr) == (2, (2,), (1,), ()), back


def test_without_elr_the_last_isr_member_stays_and_nobody_else_may_lead() -> None:
    part = PartitionRegistration(replicas=(1, 2, 3), isr=(1,), leader=1)
    after = _after(part, partition_change(TID, 0, part, _up(1), ()))
    assert (after.leader, after.isr, after.elr) == (NO_LEADER, (1,), ()), after


def test_an_unclean_shutdown_leaves_the_elr_and_the_last_known_leader_is_the_last_resort() -> None:
    part = PartitionRegistration(
        replicas=(1, 2, 3), isr=(), leader=NO_LEADER, elr=(1, 2), last_known_elr=(1,)
    )
    rec = partition_change(TID, 0, part, _up(1, 2), (), unclean_shutdown=(1,), **ELR)
    assert rec is not None and rec.eligible_leader_replicas == (2,), rec
    gone = PartitionRegistration(replicas=(1, 2, 3), isr=(), leader=NO_LEADER, last_known_elr=(1,))
    again = _after(gone, partition_change(TID, 0, gone, _up(2, 3), **ELR))
    assert (again.leader, again.isr, again.last_known_elr) == (1, (1,), ()), again
    still = partition_change(TID, 0, gone, _up(1), **ELR)
    assert still is None, "only the last known leader may lead then, not any replica"


def test_an_unclean_election_clears_the_elr() -> None:
    part = PartitionRegistration(replicas=(1, 2, 3), isr=(), leader=NO_LEADER, elr=(1,), last_known_elr=(1,))
    after = _after(part, partition_change(TID, 0, part, _up(1), unclean=True, **ELR))
    assert (after.leader, after.isr, after.elr) == (2, (2,), ()), after


def test_elr_fields_are_written_in_version_2_and_read_back() -> None:
    rec = PartitionChangeRecord(topic_id=TID, partition_id=0, isr=(), eligible_leader_replicas=(1, 2))
    data = serialize(rec)
    assert deserialize(data) == (rec, 2), "the ELR fields exist from version 2 on"
    plain = PartitionRecord(topic_id=TID, partition_id=0, replicas=(1,), isr=(1,), leader=1)
    assert deserialize(serialize(plain))[1] == 1, "without them: version 1, which has Directories"
    dirs = (uuid.UUID(int=21), uuid.UUID(int=22))
    full = PartitionRecord(
        topic_id=TID, partition_id=0, replicas=(1, 2), isr=(), eligible_leader_replicas=(2,),
        last_known_elr=(1,), directories=dirs,
    )  # fmt: skip
    assert deserialize(serialize(full)) == (full, 2), "version 2 has Directories (KIP-858) and the ELR"
    reg = PartitionRegistration.from_record(full)
    assert (reg.elr, reg.last_known_elr, reg.directories) == ((2,), (1,), dirs), reg
    change = PartitionChangeRecord(
        topic_id=TID, partition_id=0, isr=(2,), directories=dirs, last_known_elr=(1,)
    )
    assert deserialize(serialize(change)) == (change, 2), "a change with dirs and the ELR keeps both"
    after = reg.merge(change)
    assert (after.isr, after.directories, after.last_known_elr) == ((2,), dirs, (1,)), after


def test_elr_and_log_dirs_together() -> None:
    """KIP-966 and KIP-858 in one partition: a change keeps the replicas' dirs, an ELR replica whose
    dir is offline may not lead, and a change of dirs alone is still a change."""
    d = {1: uuid.UUID(int=31), 2: uuid.UUID(int=32), 3: uuid.UUID(int=33)}
    part = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, directories=(d[1], d[2], d[3]))
    below = _after(part, partition_change(TID, 0, part, _up(2, 3), (1,), **ELR))
    assert (below.isr, below.elr, below.directories) == ((1,), (2, 3), part.directories), below

    def online(b: int, dir_id: uuid.UUID) -> bool:
        return dir_id != d[2]  # broker 2 reported its dir offline

    rec = partition_change(TID, 0, below, _up(1), (), dir_online=online, **ELR)
    after = _after(below, rec)
    assert (after.leader, after.isr, after.elr) == (3, (3,), (1, 2)), "2's dir is offline: 3 leads"
    assert rec is not None and deserialize(serialize(rec))[1] == 2, "ELR fields: version 2"
    moved = uuid.UUID(int=34)
    rec = partition_change(TID, 0, after, _up(), target_dirs={3: moved}, **ELR)
    assert rec is not None and rec.directories == (d[1], d[2], moved), rec
    assert rec.eligible_leader_replicas is None, "the ELR did not change"
    assert partition_change(TID, 0, _after(after, rec), _up(), **ELR) is None, "nothing changes"


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["fence", "unfence", "shrink", "grow", "crash"]), st.integers(1, 3)),
        max_size=25,
    )
)
def test_elr_rules_hold_through_any_sequence_of_failures(steps) -> None:
    """Whatever fails: the ELR and ISR are disjoint replicas, a leader is a live ISR member, and the
    ISR is empty only while nobody leads."""
    part = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
    down: set[int] = set()
    for kind, b in steps:
        usable = _up(*down)
        if kind in ("fence", "crash"):
            down.add(b)
            usable = _up(*down)
            isr = tuple(r for r in part.isr if r != b)
            crash = (b,) if kind == "crash" else ()
            rec = partition_change(TID, 0, part, usable, isr, unclean_shutdown=crash, **ELR)
        elif kind == "unfence":
            down.discard(b)
            rec = partition_change(TID, 0, part, _up(*down), **ELR)
        elif kind == "shrink" and part.leader != NO_LEADER and b != part.leader:
            rec = partition_change(TID, 0, part, usable, tuple(r for r in part.isr if r != b), **ELR)
        elif kind == "grow" and part.leader != NO_LEADER and b not in down and b not in part.isr:
            rec = partition_change(TID, 0, part, usable, (*part.isr, b), **ELR)
        else:
            continue
        part = _after(part, rec)
        assert not set(part.elr) & set(part.isr) and set(part.elr) <= {1, 2, 3}, part
        assert part.leader == NO_LEADER or (part.leader in part.isr and part.leader not in down), part
        assert part.isr or part.leader == NO_LEADER, part
        if len(part.isr) >= 2:
            assert part.elr == (), f"ISR at min ISR keeps no ELR: {part}"


def _every_replica_fails(level: int) -> tuple[tuple[int, ...], PartitionRegistration, list[str]]:
    """A quorum formatted with ``eligible.leader.replicas.version=level`` and min ISR 2: the replicas of
    an RF=3 partition crash one after the other; its replicas, its state then, the checker's findings."""
    features = (("eligible.leader.replicas.version", level),)
    q = KRaftQuorum(seed=5, settings={"bootstrap_features": features, "min_insync_replicas": 2})
    try:

        def ready() -> bool:
            return q.active() is not None and len(q.image().unfenced_brokers()) == 3

        assert q.net.run_until(ready, 10_000), "the quorum did not start"
        assert q.image().features.get("eligible.leader.replicas.version", 0) == level
        topic = CreatableTopic(name="t", num_partitions=1, replication_factor=3)
        q.request(CreateTopicsRequest(topics=(topic,)))
        replicas = q.image().partition("t", 0).replicas
        for b in replicas:
            q.net.crash(b)
            assert q.net.run_until(lambda b=b: q.image().brokers[b].fenced, SESSION_MS * 4), b
        return replicas, q.image().partition("t", 0), list(q.checker.violations)
    finally:
        q.close()


def test_the_controller_keeps_an_elr_only_with_the_feature_on() -> None:
    replicas, part, violations = _every_replica_fails(1)
    # the first to fail left at min ISR; the two after it left below it
    assert part.isr == () and part.elr == tuple(sorted(replicas[1:])), part
    assert part.last_known_elr == (replicas[2],), part
    assert not violations, violations
    replicas, part, violations = _every_replica_fails(0)
    assert part.isr == (replicas[2],) and part.elr == () and part.last_known_elr == (), part
    assert not violations, violations
