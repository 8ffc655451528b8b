"""Kafka's ``kafka-reassign-partitions``: move partitions between brokers (and replicas between the log
dirs of a broker) from a reassignment JSON, and watch the moves.

* ``generate``: a proposed assignment of some topics over a broker list, by Kafka's replica placement
  (a random start, as Kafka's tool draws it), beside the current one; nothing is changed.
* ``execute``: AlterPartitionReassignments for every partition of the JSON (refused while another
  reassignment runs, unless ``additional``), then AlterReplicaLogDirs for each replica whose ``log_dirs``
  entry names a dir, retried until the replica exists on its new broker.
* ``verify``: each partition's and each named replica's state, in Kafka's words.
* ``cancel``: cancels the JSON's partitions that are still moving, and puts replicas still being copied
  to another dir back in their current one.
* ``list``: every reassignment in progress.

The lines printed are Kafka's, so scripts that read the tool's output read kafkalite's. kafkalite keeps
no replication throttles, so ``--verify`` and ``--cancel`` print no "Clearing ... throttles" lines.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalite.errors import KafkaError, error_for_code
from kafkalite.metadata.placement import assign_replicas
from kafkalite.protocol import TopicPartition
from kafkalite.tools.log_dirs import ANY_LOG_DIR, parse_log_dir_moves

REPLICA_NOT_AVAILABLE = 9
CANNOT_EXECUTE_WITH_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override "
    "this and create a new partition assignment in addition to the existing one. The --additional flag "
    "can also be used to change the throttle by resubmitting the current reassignment."
)

Replica = tuple[int, TopicPartition]  # (broker, partition): Kafka's TopicPartitionReplica


class ReassignmentError(Exception):
    """A refusal the tool prints as it is (Kafka's terse errors)."""


@dataclass(frozen=True)
class ReassignmentPlan:
    """A reassignment JSON: each partition's target replicas, and the dir named for some replicas."""

    partitions: dict[TopicPartition, list[int]]
    log_dirs: dict[Replica, str]


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def _replica_name(replica: Replica) -> str:
    broker, tp = replica
    return f"{tp}-{broker}"  # TopicPartitionReplica's toString


def _replica_order(replica: Replica) -> tuple[int, str, int]:
    broker, tp = replica
    return broker, tp.topic, tp.partition


def _load(text: str, what: str) -> dict:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"the {what} JSON does not parse: {e}") from e
    if not isinstance(doc, dict):
        raise ValueError(f"the {what} JSON is not an object")
    version = doc.get("version", 1)
    if version != 1:
        raise ValueError(f"Not supported version field value {version}")
    return doc


def parse_plan(text: str) -> ReassignmentPlan:
    """A reassignment JSON, checked as Kafka's tool checks it before it asks the cluster anything."""
    doc = _load(text, "reassignment")
    entries = doc.get("partitions") or []
    if not isinstance(entries, list):
        raise ValueError('the reassignment JSON\'s "partitions" is not a list')
    seen: list[TopicPartition] = []
    parts: dict[TopicPartition, list[int]] = {}
    for i, entry in enumerate(entries):
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"partitions[{i}] needs topic, partition and replicas: {e}") from e
        seen.append(tp)
        parts[tp] = replicas
    if not parts:
        raise ReassignmentError("Partition reassignment list cannot be empty")
    if any(not r for r in parts.values()):
        raise ReassignmentError("Partition replica list cannot be empty")
    dup_parts = sorted({tp for tp in seen if seen.count(tp) > 1})
    if dup_parts:
        names = ",".join(map(str, dup_parts))
        raise ReassignmentError(f"Partition reassignment contains duplicate topic partitions: {names}")
    dup_replicas = [
        f"{tp} contains multiple entries for {','.join(str(b) for b in sorted({b for b in r if r.count(b) > 1}))}"
        for tp, r in parts.items()
        if len(set(r)) != len(r)
    ]
    if dup_replicas:
        joined = ". ".join(dup_replicas)
        raise ReassignmentError(f"Partition replica lists may not contain duplicate entries: {joined}")
    return ReassignmentPlan(parts, parse_log_dir_moves(text))


def parse_topics_to_move(text: str) -> list[str]:
    """``{"version":1,"topics":[{"topic":"foo"},...]}``: the topic names, duplicates refused."""
    doc = _load(text, "topics-to-move")
    try:
        topics = [str(t["topic"]) for t in doc.get("topics") or []]
    except (KeyError, TypeError) as e:
        raise ValueError(f'each entry of "topics" needs a "topic": {e}') from e
    dups = sorted({t for t in topics if topics.count(t) > 1})
    if dups:
        raise ReassignmentError(f"List of topics to reassign contains duplicate entries: {dups}")
    return topics


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError as e:
        raise ValueError(f"--broker-list takes broker ids, 1,2,3: {e}") from e
    dups = sorted({b for b in brokers if brokers.count(b) > 1})
    if dups:
        raise ReassignmentError(f"Broker list contains duplicate entries: {dups}")
    return brokers


def reassignment_json(
    assignment: Mapping[TopicPartition, Sequence[int]], log_dirs: Mapping[Replica, str] | None = None
) -> str:
    """Kafka's compact reassignment JSON, partitions by topic then number, ``"any"`` where no dir is named."""
    dirs = log_dirs or {}
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": list(assignment[tp]),
                    "log_dirs": [dirs.get((b, tp), ANY_LOG_DIR) for b in assignment[tp]],
                }
                for tp in sorted(assignment)
            ],
        },
        separators=(",", ":"),
    )


def _current(admin: Any, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
    """Each partition of ``topics`` -> its replicas; a topic the cluster lacks is an error."""
    out: dict[TopicPartition, list[int]] = {}
    for t in admin.metadata(sorted(set(topics)))["topics"]:
        if t["error_code"]:
            raise ReassignmentError(f"Topic {t['name']} not found.")
        for p in t["partitions"]:
            out[TopicPartition(t["name"], p["partition_index"])] = list(p["replica_nodes"])
    return out


def generate(
    admin: Any,
    topics: Sequence[str],
    brokers: Sequence[int],
    *,
    rack_aware: bool = True,
    rng: random.Random | None = None,
) -> tuple[dict[TopicPartition, list[int]], dict[TopicPartition, list[int]], str]:
    """(current, proposed, the text Kafka prints). Brokers of the list the cluster lacks are left out."""
    current = _current(admin, topics)
    meta = admin.metadata([])
    racks = {b["node_id"]: b.get("rack") for b in meta["brokers"] if b["node_id"] in set(brokers)}
    if rack_aware:
        rackless = [b for b, r in racks.items() if r is None]
        if rackless and len(rackless) != len(racks):
            raise ReassignmentError(
                "Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                "replica assignment without rack information."
            )
    broker_racks = racks if rack_aware else None
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in sorted({tp.topic for tp in current}):
        parts = sorted(tp for tp in current if tp.topic == topic)
        rf = len(current[parts[0]])
        try:
            placed = assign_replicas(list(racks), len(parts), rf, rng=rng, broker_racks=broker_racks)
        except KafkaError as e:
            raise ReassignmentError(str(e)) from e
        for p, replicas in placed.items():
            proposed[TopicPartition(topic, p)] = replicas
    text = (
        f"Current partition replica assignment\n{reassignment_json(current)}\n\n"
        f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}"
    )
    return current, proposed, text


def _refused(errors: Mapping[TopicPartition, tuple[int, str | None]]) -> list[str]:
    out = []
    for tp in sorted(errors):
        code, message = errors[tp]
        cls = error_for_code(code) or KafkaError
        out.append(f"{tp}: {message or getattr(cls, 'name', None) or cls.__name__}")
    return out


def _start_moves(
    admin: Any,
    moves: Mapping[Replica, str],
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """AlterReplicaLogDirs until every replica's move has started; a replica not yet on its broker
    (REPLICA_NOT_AVAILABLE) is asked again, as Kafka's tool does, until ``timeout_s``."""
    pending = dict(moves)
    lines: list[str] = []
    deadline = clock() + timeout_s
    while pending:
        started = []
        for broker in sorted({b for b, _tp in pending}):
            targets = {tp: d for (b, tp), d in pending.items() if b == broker}
            for tp, code in admin.alter_replica_log_dirs(broker, targets).items():
                if code == 0:
                    started.append((broker, tp))
                elif code != REPLICA_NOT_AVAILABLE:
                    cls = error_for_code(code) or KafkaError
                    raise ReassignmentError(
                        f"moving replica {_replica_name((broker, tp))} to {targets[tp]}: "
                        f"{getattr(cls, 'name', None) or code}"
                    )
        for replica in sorted(started, key=_replica_order):
            _b, tp = replica
            lines.append(
                f"Successfully started moving log directory to {pending.pop(replica)} for replica "
                f"{tp.topic}-{tp.partition} with broker {replica[0]} "
            )
        if pending and clock() >= deadline:
            names = ",".join(_replica_name(r) for r in sorted(pending, key=_replica_order))
            raise ReassignmentError(
                f"Timed out before log directory move{_plural(len(pending))} could be started for: {names}"
            )
        if pending:
            sleep(0.1)
    return lines


def execute(
    admin: Any, plan: ReassignmentPlan, *, additional: bool = False, timeout_s: float = 10.0
) -> list[str]:
    """Start the plan's reassignments, then its log dir moves; the lines Kafka's tool prints."""
    if not additional and admin.list_partition_reassignments():
        raise ReassignmentError(CANNOT_EXECUTE_WITH_EXISTING)
    admin.metadata()
    for b in sorted({b for r in plan.partitions.values() for b in r}):
        if b not in admin.brokers:
            raise ReassignmentError(f"Unknown broker id {b}")
    current = _current(admin, {tp.topic for tp in plan.partitions})
    missing = [tp for tp in plan.partitions if tp not in current]
    if missing:
        raise ReassignmentError(f"Unable to find partition: {', '.join(map(str, missing))}")
    lines = [
        "Current partition replica assignment",
        "",
        reassignment_json({tp: current[tp] for tp in plan.partitions}),
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
    ]
    answers = admin.alter_partition_reassignments(plan.partitions)
    errors = {tp: a for tp, a in answers.items() if a[0]}
    if errors:
        raise ReassignmentError(
            "\n".join(["\n".join(lines), "Error reassigning partition(s):", *_refused(errors)])
        )
    parts = sorted(plan.partitions)
    lines.append(
        f"Successfully started partition reassignment{_plural(len(parts))} for {','.join(map(str, parts))}"
    )
    if plan.log_dirs:
        lines += _start_moves(admin, plan.log_dirs, timeout_s)
    return lines


def _replica_dirs(admin: Any, replicas: Iterable[Replica]) -> dict[Replica, tuple[str | None, str | None]]:
    """Each replica -> (its current dir, the dir it is being copied to), from DescribeLogDirs at its
    broker; a replica whose broker does not answer is left out."""
    out: dict[Replica, tuple[str | None, str | None]] = {}
    by_broker: dict[int, list[TopicPartition]] = {}
    for b, tp in replicas:
        by_broker.setdefault(b, []).append(tp)
    for b, tps in by_broker.items():
        try:
            resp = admin.describe_log_dirs(b, tps)
        except (KafkaError, OSError, KeyError):
            continue
        found: dict[TopicPartition, list[str | None]] = {tp: [None, None] for tp in tps}
        for d in resp["results"]:
            if d["error_code"]:
                continue
            for t in d["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    if tp in found:
                        found[tp][1 if p["is_future_key"] else 0] = d["log_dir"]
        for tp, (cur, fut) in found.items():
            out[(b, tp)] = (cur, fut)
    return out


def _move_line(replica: Replica, target: str, dirs: tuple[str | None, str | None] | None) -> str:
    broker, tp = replica
    where = f"Partition {tp.topic}-{tp.partition}"
    if dirs is None:
        return f"{where} cannot be found in any live log directory on broker {broker}."
    current, future = dirs
    if current is None:
        return (
            f"{where} is not found in any live log dir on broker {broker}. There is likely an offline "
            "log directory on the broker."
        )
    if future is not None:
        if future == target:
            return f"Reassignment of replica {_replica_name(replica)} is still in progress."
        return f"{where} on broker {broker} is being moved to log dir {future} instead of {target}."
    if current == target:
        return f"Reassignment of replica {_replica_name(replica)} completed successfully."
    return f"{where} on broker {broker} is not being moved from log dir {current} to {target}."


def verify(admin: Any, plan: ReassignmentPlan) -> tuple[bool, list[str]]:
    """(whether anything still moves, Kafka's status lines) for the plan's partitions and replicas."""
    ongoing = admin.list_partition_reassignments()
    current = _current(admin, {tp.topic for tp in plan.partitions if tp not in ongoing})
    lines = ["Status of partition reassignment:"]
    for tp in sorted(plan.partitions):
        target = plan.partitions[tp]
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif current.get(tp, []) == target:
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            now = ",".join(map(str, current.get(tp, [])))
            lines.append(
                f"There is no active reassignment of partition {tp}, but replica set is {now} rather "
                f"than {','.join(map(str, target))}."
            )
    dirs = _replica_dirs(admin, plan.log_dirs)
    moving = False
    move_lines = []
    for replica in sorted(plan.log_dirs, key=_replica_order):
        line = _move_line(replica, plan.log_dirs[replica], dirs.get(replica))
        moving = moving or not line.endswith("completed successfully.")
        move_lines.append(line)
    lines.append("\n".join(move_lines))  # Kafka prints the (maybe empty) block of replica lines
    return bool(ongoing) or moving, lines


def cancel(admin: Any, plan: ReassignmentPlan, *, timeout_s: float = 10.0) -> list[str]:
    """Cancel the plan's partitions that still move; put replicas being copied back in their dir."""
    moving = sorted(
        tp
        for tp, (_r, adding, removing) in admin.list_partition_reassignments(plan.partitions).items()
        if adding or removing
    )
    lines = []
    if moving:
        answers = admin.alter_partition_reassignments(dict.fromkeys(moving))
        errors = {tp: a for tp, a in answers.items() if a[0]}
        if errors:
            raise ReassignmentError(
                "\n".join(
                    [f"Error cancelling partition reassignment{_plural(len(errors))} for:", *_refused(errors)]
                )
            )
        lines.append(
            f"Successfully cancelled partition reassignment{_plural(len(moving))} for: "
            + ",".join(map(str, moving))
        )
    else:
        lines.append("None of the specified partition reassignments are active.")
    dirs = _replica_dirs(admin, plan.log_dirs)
    back = {r: d[0] for r, d in dirs.items() if d[0] is not None and d[1] is not None}
    if back:
        lines += _start_moves(admin, back, timeout_s)  # type: ignore[arg-type]
    else:
        lines.append("None of the specified partition moves are active.")
    return lines


def list_reassignments(admin: Any) -> str:
    """Every reassignment in progress, as ``--list`` prints it."""
    ongoing = admin.list_partition_reassignments()
    if not ongoing:
        return "No partition reassignments found."
    rows = []
    for tp in sorted(ongoing):
        replicas, adding, removing = ongoing[tp]
        row = f"{tp}: replicas: {','.join(map(str, replicas))}."
        if adding:
            row += f" adding: {','.join(map(str, adding))}."
        if removing:
            row += f" removing: {','.join(map(str, removing))}."
        rows.append(row)
    return "Current partition reassignments:\n" + "\n".join(rows)
