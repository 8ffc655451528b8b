"""``kafkalite consumer-groups``: Kafka's ``kafka-consumer-groups`` tool (list, describe, reset offsets).

How the tool reaches a cluster. A kafkalite cluster is a simulation living inside one Python process; there
is no server to connect to from a shell. So the tool has two entry points over the same code:

* **in-process**, a ``Cluster`` object: ``list_groups(cluster)``, ``describe_group(cluster, group)`` and
  ``reset_offsets(cluster, group, ...)`` talk to the brokers with Kafka's requests (ListGroups,
  DescribeGroups, OffsetFetch, OffsetCommit through the group's coordinator), exactly as the real tool does.
  This is the full tool, ``--execute`` included, for notebooks and tests; ``run(cluster, "--describe
  --group G")`` takes the shell command's own arguments and prints what it prints.
* **a cluster directory** (``Cluster.dir``, or any directory of ``broker-<id>`` log directories), from the
  shell: ``kafkalite consumer-groups --cluster-dir DIR ...``. Nothing runs there, so the tool reads what the
  brokers left on disk: each ``__consumer_offsets`` partition replayed like a loading coordinator (last
  record per key wins, tombstones delete), and each partition's high watermark from the brokers'
  ``replication-offset-checkpoint`` (``Cluster.checkpoint_high_watermarks()`` writes it). Listing,
  describing and dry-run resets work; ``--execute`` is refused, because a commit needs a live coordinator
  to append it (writing replicas behind a stopped cluster's back would make them diverge).

Resets follow Kafka's rules: only a group without members (Empty or Dead) is reset, even in a dry run;
one reset spec (``--to-earliest``, ``--to-latest``, ``--to-offset``,
``--to-current``, ``--to-datetime``, ``--by-duration``, ``--shift-by``, ``--from-file``); one scope
(``--all-topics``, or ``--topic T`` / ``--topic T:0,2``, repeatable) unless the plan comes from a file; a
dry run unless ``--execute`` (with a warning when neither ``--dry-run`` nor ``--execute`` is given);
``--export`` prints the plan as the CSV ``--from-file`` reads back; offsets a spec asks for are clamped to
``[log start, high watermark]``.
"""

from __future__ import annotations

import datetime as _dt
import re
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner

from kafkalite.errors import GroupIdNotFoundError, KafkaError
from kafkalite.host.admin_client import AdminClient
from kafkalite.protocol import LATEST_TIMESTAMP, TopicPartition
from kafkalite.protocol.consumer_protocol import ConsumerAssignment
from kafkalite.protocol.offsets_schema import GroupMetadataKey, OffsetCommitKey, decode_key, decode_value
from kafkalite.storage.log import Log
from kafkalite.storage.log_dirs import locate_partitions

__all__ = [
    "GroupNotEmptyError",
    "command",
    "OffsetsDirectory",
    "PartitionRow",
    "ResetRow",
    "describe_group",
    "format_describe",
    "format_list",
    "format_reset",
    "format_export",
    "list_groups",
    "parse_datetime",
    "parse_duration",
    "parse_reset_plan",
    "parse_topic_scope",
    "plan_reset",
    "reset_offsets",
    "run",
]

OFFSETS_TOPIC = "__consumer_offsets"
# The reset specs, and their names on the command line; --reset-offsets takes exactly one.
RESET_SPECS = {
    "to_earliest": "--to-earliest", "to_latest": "--to-latest", "to_offset": "--to-offset",
    "to_current": "--to-current", "to_datetime": "--to-datetime", "by_duration": "--by-duration",
    "shift_by": "--shift-by", "from_file": "--from-file",
}  # fmt: skip
RESET_MODES = tuple(RESET_SPECS)
NO_DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. Add --dry-run to say a dry run is "
    "what you mean, or --execute to commit the new offsets."
)


class GroupNotEmptyError(Exception):
    """``--execute`` on a group that still has members (Kafka refuses the same)."""


@dataclass(frozen=True)
class PartitionRow:
    """One line of ``--describe``."""

    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str = "-"
    host: str = "-"
    client_id: str = "-"

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return max(0, self.log_end_offset - self.current_offset)


@dataclass(frozen=True)
class ResetRow:
    group: str
    topic: str
    partition: int
    current_offset: int | None
    new_offset: int


# ------------------------------------------------------------------------------------------ in-process


def list_groups(cluster: Any) -> list[str]:
    """Group ids known to the live coordinators (ListGroups to every broker), sorted."""
    return [g.group_id for g in cluster.list_groups()]


def format_list(cluster: Any, types: Sequence[str] | None = None, states: Sequence[str] | None = None) -> str:
    """``--list --type [T,...] --state [S,...]``: GROUP, then TYPE (Classic or Consumer) and/or STATE columns,
    as Kafka's tool prints them; a given list also filters (None: no column, empty: every group)."""
    groups = cluster.list_groups(states=tuple(states or ()), types=tuple(types or ()))
    width = max([15, *(len(g.group_id) for g in groups)]) + 10
    header = ["GROUP".ljust(width)]
    if types is not None:
        header.append("TYPE".ljust(20))
    if states is not None:
        header.append("STATE".ljust(20))
    lines = [" ".join(header).rstrip()]
    for g in groups:
        row = [g.group_id.ljust(width)]
        if types is not None:
            row.append((g.group_type.capitalize() or "Unknown").ljust(20))
        if states is not None:
            row.append((g.group_state or "Unknown").ljust(20))
        lines.append(" ".join(row).rstrip())
    return "\n".join(lines)


def _split(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def _members(described: Any) -> dict[TopicPartition, tuple[str, str, str]]:
    out = {}
    for m in described.members:
        if not m.member_assignment:
            continue
        for tp in ConsumerAssignment.decode(m.member_assignment).partitions:
            out[TopicPartition(*tp)] = (m.member_id, m.client_host or "-", m.client_id or "-")
    return out


def _end_offsets(cluster: Any, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
    tps = list(tps)
    return cluster.list_offsets(tps, LATEST_TIMESTAMP) if tps else {}


def describe_group(cluster: Any, group: str) -> tuple[str, list[PartitionRow]]:
    """The group's state and one row per partition it has committed or is assigned."""
    described = cluster.describe_group(group)
    if described.error_code:
        raise GroupIdNotFoundError(f"describe of group {group!r} failed with error {described.error_code}")
    committed = cluster.group_offsets(group)
    if described.group_state == "Dead" and not committed:
        raise GroupIdNotFoundError(f"Consumer group '{group}' does not exist.")
    owners = _members(described)
    tps = sorted(set(committed) | set(owners))
    ends = _end_offsets(cluster, tps)
    rows = [
        PartitionRow(
            group, tp.topic, tp.partition, committed.get(tp), ends[tp], *owners.get(tp, ("-", "-", "-"))
        )
        for tp in tps
    ]
    return described.group_state, rows


def plan_reset(
    group: str,
    current: Mapping[TopicPartition, int | None],
    bounds: Mapping[TopicPartition, tuple[int, int]],
    mode: str,
    value: Any = None,
    by_time: Mapping[TopicPartition, int | None] | None = None,
) -> list[ResetRow]:
    """New offsets for ``mode`` (one of ``RESET_MODES``), clamped to each partition's ``(log start, high
    watermark)``. ``value``: the offset for ``to_offset``, the shift for ``shift_by``, ``{tp: offset}`` for
    ``from_file``. ``by_time`` holds the offsets found for ``to_datetime`` / ``by_duration``."""
    if mode not in RESET_MODES:
        raise ValueError(f"reset mode must be one of {RESET_MODES}, got {mode!r}")
    if mode in ("to_offset", "shift_by") and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{mode} needs an integer, got {value!r}")
    rows = []
    for tp in sorted(bounds):
        start, end = bounds[tp]
        cur = current.get(tp)
        if mode == "to_earliest":
            new = start
        elif mode == "to_latest":
            new = end
        elif mode == "to_offset":
            new = value
        elif mode == "to_current":
            new = end if cur is None else cur  # nothing committed: the log end, as Kafka does
        elif mode in ("to_datetime", "by_duration"):
            found = (by_time or {}).get(tp)
            new = end if found is None else found  # no record that late: the end, as Kafka does
        elif mode == "from_file":
            new = value[tp]
        else:
            new = (start if cur is None else cur) + value
        rows.append(ResetRow(group, tp.topic, tp.partition, cur, min(max(new, start), end)))
    return rows


def parse_datetime(text: str) -> int:
    """Kafka's ``--to-datetime`` format ``YYYY-MM-DDTHH:mm:SS.sss`` (optionally with a zone; UTC when none)
    to epoch milliseconds."""
    try:
        t = _dt.datetime.fromisoformat(text)
    except ValueError as e:
        raise ValueError(f"--to-datetime must look like 2024-01-31T12:00:00.000, got {text!r}") from e
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return int(t.timestamp() * 1000)


# ISO-8601 durations as java.time.Duration reads them (Kafka's --by-duration): days, hours, minutes and
# (fractional) seconds, each part optionally signed, the whole optionally negated; no years or months.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?=[-+]?\d)(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{1,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> int:
    """Kafka's ``--by-duration`` format ``PnDTnHnMn.nS`` (ISO-8601, as ``java.time.Duration.parse``) to
    milliseconds, e.g. ``P1DT2H`` -> 93_600_000."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or not any(m.group(i) for i in range(2, 6)):
        raise ValueError(f"--by-duration must be an ISO-8601 duration like PT1H30M or P2DT3H, got {text!r}")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    secs = int(seconds or 0)
    ms = (int(days or 0) * 86_400 + int(hours or 0) * 3_600 + int(minutes or 0) * 60 + secs) * 1000
    if fraction:
        frac_ms = int(fraction.ljust(9, "0")) // 1_000_000
        ms += -frac_ms if seconds.startswith("-") else frac_ms  # "-1.5S" is minus 1.5 s, as Java reads it
    return -ms if sign == "-" else ms


def parse_reset_plan(text: str, groups: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
    """A ``--from-file`` CSV: ``topic,partition,offset`` lines for a single ``--group``, or
    ``group,topic,partition,offset`` lines (what ``--export`` prints for several groups)."""
    plan: dict[str, dict[TopicPartition, int]] = {}
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    with_group = not (len(groups) == 1 and lines and len(lines[0][1].split(",")) == 3)
    for n, line in lines:
        fields = [f.strip() for f in line.split(",")]
        want = 4 if with_group else 3
        try:
            if len(fields) != want:
                raise ValueError
            group = fields[0] if with_group else groups[0]
            topic, partition, offset = fields[-3], int(fields[-2]), int(fields[-1])
            if not topic or partition < 0:
                raise ValueError
        except ValueError:
            shape = "group,topic,partition,offset" if with_group else "topic,partition,offset"
            raise ValueError(f"--from-file line {n}: expected {shape}, got {line!r}") from None
        plan.setdefault(group, {})[TopicPartition(topic, partition)] = offset
    return plan


def parse_topic_scope(args: Sequence[str], partitions_for: Any) -> list[TopicPartition]:
    """``--topic`` values: ``T`` (every partition of T, from ``partitions_for(T)``) or ``T:0,2`` (those)."""
    out: list[TopicPartition] = []
    for arg in args:
        if ":" not in arg:
            out.extend(TopicPartition(arg, p) for p in partitions_for(arg))
            continue
        topic, _, parts = arg.partition(":")
        if not topic or not parts or ":" in parts:
            raise ValueError(
                f"Invalid topic arg '{arg}' for --topic, expected topic name and partitions (t:0,1)"
            )
        existing = set(partitions_for(topic))
        for p in parts.split(","):
            if not p.strip().isdigit():
                raise ValueError(f"Invalid partition '{p}' in --topic '{arg}'")
            if int(p) not in existing:
                raise ValueError(f"--topic '{arg}': topic {topic!r} has no partition {int(p)}")
            out.append(TopicPartition(topic, int(p)))
    return sorted(set(out))


def _reset_scope(
    mode: str, value: Any, topics: Sequence[str] | None, partitions_for: Any, committed: dict
) -> list[TopicPartition]:
    """The partitions a reset covers: a plan file's, ``--topic``'s, else those the group has committed."""
    if mode == "from_file":
        return sorted(value)
    return parse_topic_scope(topics, partitions_for) if topics else sorted(committed)


def _reset_timestamp(mode: str, value: Any, now_ms: int) -> int:
    """The timestamp ``to_datetime`` or ``by_duration`` looks offsets up at."""
    if mode == "by_duration":
        return max(0, now_ms - parse_duration(value))  # -1, -2 would mean latest, earliest
    return parse_datetime(value) if isinstance(value, str) else int(value)


def _now_ms(cluster: Any) -> int:
    """The cluster's clock (a simulated cluster's is virtual), else the wall clock."""
    net = getattr(cluster, "net", None)
    return net.now_ms() if net is not None else int(time.time() * 1000)


def reset_offsets(
    cluster: Any,
    group: str,
    topics: Sequence[str] | None,
    mode: str,
    value: Any = None,
    *,
    execute: bool = False,
) -> list[ResetRow]:
    """Plan (and with ``execute`` commit) new offsets for ``group`` on ``topics`` (``T`` or ``T:0,1``;
    None: the partitions it has committed, Kafka's ``--all-topics``). ``value``: the offset for
    ``to_offset``, the shift for ``shift_by``, a datetime string or epoch ms for ``to_datetime``, an ISO
    duration for ``by_duration``, ``{tp: offset}`` for ``from_file`` (whose keys are then the scope).

    A group with members is refused before anything is planned, dry run or not, as Kafka's tool does: the
    members' positions would overwrite the new offsets at their next commit, so no plan is meaningful."""
    state = cluster.describe_group(group).group_state
    if state not in ("Empty", "Dead"):
        raise GroupNotEmptyError(
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is "
            f"{state}."
        )
    committed = cluster.group_offsets(group)
    tps = _reset_scope(mode, value, topics, cluster.partitions_for, committed)
    if not tps:
        raise ValueError(f"group {group!r} has no committed offsets: name the topics with --topic")
    bounds = cluster.offset_bounds(tps)
    by_time = None
    if mode in ("to_datetime", "by_duration"):
        by_time = cluster.list_offsets(tps, _reset_timestamp(mode, value, _now_ms(cluster)))
    rows = plan_reset(group, {tp: committed.get(tp) for tp in tps}, bounds, mode, value, by_time)
    if execute:
        cluster.commit_offsets(group, {TopicPartition(r.topic, r.partition): r.new_offset for r in rows})
    return rows


def run(cluster: Any, args: str | Sequence[str]) -> str:
    """Run ``kafkalite consumer-groups ARGS`` against the live ``cluster`` (no ``--cluster-dir``) and return
    what it prints; a usage or Kafka error raises ``click.ClickException`` with the tool's message."""
    argv = shlex.split(args) if isinstance(args, str) else list(args)
    result = CliRunner().invoke(command, argv, obj=cluster, catch_exceptions=False, standalone_mode=False)
    return result.stdout  # warnings go to stderr, as the tool's do; --export's CSV stays clean


# ----------------------------------------------------------------------------------- text output


def _cell(v: Any) -> str:
    return "-" if v is None else str(v)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(header), *[[_cell(v) for v in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def format_describe(state: str, rows: Sequence[PartitionRow]) -> str:
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID")  # fmt: skip
    body = [(r.group, r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id, r.host,
             r.client_id) for r in rows]  # fmt: skip
    lines = []
    if state in ("Empty", "Dead"):
        group = rows[0].group if rows else "?"
        lines.append(f"Consumer group '{group}' has no active members.\n")
    elif state in ("PreparingRebalance", "CompletingRebalance"):
        lines.append(f"Consumer group is rebalancing ({state}).\n")
    return "\n".join([*lines, _table(header, body)])


def format_export(rows: Sequence[ResetRow], with_group: bool = False) -> str:
    """``--export``: the plan as the CSV ``--from-file`` reads (``group,`` first when several groups)."""
    return "".join(
        (f"{r.group}," if with_group else "") + f"{r.topic},{r.partition},{r.new_offset}\n" for r in rows
    )


def format_reset(rows: Sequence[ResetRow], executed: bool) -> str:
    text = _table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), [(r.group, r.topic, r.partition, r.new_offset)
                                                                  for r in rows])  # fmt: skip
    if not executed:
        text = "Dry run: nothing changed (add --execute to commit these offsets).\n\n" + text
    return text


# ------------------------------------------------------------------------------------- directory mode


class OffsetsDirectory:
    """A stopped cluster's directory, read like a coordinator loading ``__consumer_offsets``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise FileNotFoundError(f"no such cluster directory: {self.path}")
        self.partitions = locate_partitions(self.path)  # (topic, p) -> replica with the highest HW
        self.offsets: dict[str, dict[TopicPartition, int]] = {}
        self.metadata: dict[str, Any] = {}
        self._load()

    def _load(self) -> None:
        for (topic, _p), loc in self.partitions.items():
            if topic != OFFSETS_TOPIC:
                continue
            log = Log.open(loc.dir, read_only=True)
            try:
                for rec in log.iter_records(None, loc.high_watermark):
                    if rec.key is None:
                        continue
                    key = decode_key(rec.key)
                    value = decode_value(key, rec.value)
                    if isinstance(key, OffsetCommitKey):
                        offsets = self.offsets.setdefault(key.group, {})
                        tp = TopicPartition(key.topic, key.partition)
                        if value is None:
                            offsets.pop(tp, None)
                        else:
                            offsets[tp] = value.offset  # type: ignore[union-attr]
                    elif isinstance(key, GroupMetadataKey):
                        if value is None:
                            self.metadata.pop(key.group, None)
                        else:
                            self.metadata[key.group] = value
            finally:
                log.close()

    def groups(self) -> list[str]:
        return sorted({g for g, o in self.offsets.items() if o} | set(self.metadata))

    def end_offset(self, tp: TopicPartition) -> int | None:
        loc = self.partitions.get((tp.topic, tp.partition))
        return None if loc is None else loc.high_watermark

    def bounds(self, tp: TopicPartition) -> tuple[int, int]:
        loc = self.partitions.get((tp.topic, tp.partition))
        if loc is None:
            raise ValueError(f"no partition {tp.topic}-{tp.partition} under {self.path}")
        log = Log.open(loc.dir, read_only=True)
        try:
            end = log.log_end_offset if loc.high_watermark is None else loc.high_watermark
            return log.log_start_offset, end
        finally:
            log.close()

    def describe(self, group: str) -> tuple[str, list[PartitionRow]]:
        if group not in self.groups():
            raise GroupIdNotFoundError(f"Consumer group '{group}' does not exist.")
        meta = self.metadata.get(group)
        owners: dict[TopicPartition, tuple[str, str, str]] = {}
        # The last group metadata on disk; a stopped cluster has no live members, so the state is Empty
        # unless the record names members (a cluster stopped while the group was running).
        state = "Empty"
        if meta is not None and meta.members:
            state = "Stable"
            for m in meta.members:
                if m.assignment:
                    for tp in ConsumerAssignment.decode(m.assignment).partitions:
                        owners[TopicPartition(*tp)] = (m.member_id, m.client_host or "-", m.client_id or "-")
        committed = self.offsets.get(group, {})
        tps = sorted(set(committed) | set(owners))
        rows = [
            PartitionRow(group, tp.topic, tp.partition, committed.get(tp), self.end_offset(tp),
                         *owners.get(tp, ("-", "-", "-")))
            for tp in tps
        ]  # fmt: skip
        return state, rows

    def plan_reset(
        self, group: str, topics: Sequence[str] | None, mode: str, value: Any = None
    ) -> list[ResetRow]:
        """The live ``reset_offsets`` plan, read from disk (``by_duration`` counts back from the wall clock)."""
        committed = self.offsets.get(group, {})
        tps = _reset_scope(mode, value, topics, self.partitions_for, committed)
        if not tps:
            raise ValueError(f"group {group!r} has no committed offsets here: name the topics with --topic")
        bounds = {tp: self.bounds(tp) for tp in tps}
        by_time = None
        if mode in ("to_datetime", "by_duration"):
            ts = _reset_timestamp(mode, value, int(time.time() * 1000))
            by_time = {}
            for tp in tps:
                log = Log.open(self.partitions[(tp.topic, tp.partition)].dir, read_only=True)
                try:
                    hit = log.offset_for_timestamp(ts)
                finally:
                    log.close()
                by_time[tp] = None if hit is None or hit[0] >= bounds[tp][1] else hit[0]
        return plan_reset(group, {tp: committed.get(tp) for tp in tps}, bounds, mode, value, by_time)

    def partitions_for(self, topic: str) -> list[int]:
        parts = sorted(p for (t, p) in self.partitions if t == topic)
        if not parts:
            raise ValueError(f"topic {topic!r} does not exist under {self.path}")
        return parts


# ----------------------------------------------------------------------------------- the command line


@click.command("consumer-groups")
@click.option(
    "--cluster-dir", type=click.Path(exists=True, file_okay=False),
    help="A stopped cluster's directory (Cluster.dir: broker-<id> log directories).",
)  # fmt: skip
@click.option("--bootstrap-server", help="HOST:PORT of a running kafkalite (or Kafka) cluster.")
@click.option("--list", "do_list", is_flag=True, help="List the groups.")
@click.option(
    "--type", "group_types", is_flag=False, flag_value="", default=None,
    help="With --list: a TYPE column (Classic, Consumer); a list such as classic,consumer also filters.",
)  # fmt: skip
@click.option(
    "--state", "group_states", is_flag=False, flag_value="", default=None,
    help="With --list: a STATE column; a list such as stable,empty also filters.",
)  # fmt: skip
@click.option(
    "--describe", is_flag=True, help="Per partition: current offset, log end offset, lag, member, host."
)
@click.option(
    "--reset-offsets",
    "do_reset",
    is_flag=True,
    help="Plan (with --execute, commit) new offsets for an inactive group: one reset spec and one scope.",
)
@click.option("--delete", is_flag=True, help="Delete an Empty group and its committed offsets.")
@click.option("--group", help="The group to describe, reset or delete.")
@click.option("--all-groups", is_flag=True, help="With --reset-offsets: every group.")
@click.option(
    "--topic", "topics", multiple=True,
    help="Reset scope: a topic (all its partitions) or topic:0,1,2 (those partitions); repeatable.",
)  # fmt: skip
@click.option("--all-topics", is_flag=True, help="Reset scope: every partition the group has committed.")
@click.option("--to-earliest", is_flag=True, help="Reset to the log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the high watermark.")
@click.option("--to-offset", type=int, help="Reset to offset N (clamped to [log start, high watermark]).")
@click.option("--to-current", is_flag=True, help="Reset to the committed offset (the log end if none).")
@click.option("--to-datetime", help="Reset to the first offset at or after YYYY-MM-DDTHH:mm:SS.sss (UTC).")
@click.option("--by-duration", help="Reset to the first offset at or after now minus PnDTnHnMnS (ISO-8601).")
@click.option("--shift-by", type=int, help="Move the committed offset by N (may be negative).")
@click.option(
    "--from-file", type=click.Path(exists=True, dir_okay=False),
    help="Reset to the offsets in a CSV of topic,partition,offset lines (as --export prints).",
)  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets (needs a live cluster).")
@click.option("--export", "do_export", is_flag=True, help="Print the plan as CSV for --from-file.")
@click.pass_context
def command(
    ctx: click.Context,
    cluster_dir: str | None,
    bootstrap_server: str | None,
    do_list: bool,
    group_types: str | None,
    group_states: str | None,
    describe: bool,
    do_reset: bool,
    delete: bool,
    group: str | None,
    all_groups: bool,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_current: bool,
    to_datetime: str | None,
    by_duration: str | None,
    shift_by: int | None,
    from_file: str | None,
    dry_run: bool,
    execute: bool,
    do_export: bool,
) -> None:
    """Kafka's kafka-consumer-groups: --list, --describe, --reset-offsets, --delete.

    With --bootstrap-server it talks to running brokers over Kafka's protocol. With --cluster-dir it reads
    what a stopped simulated cluster left on disk (__consumer_offsets replayed, high watermarks from the
    checkpoints); resets are dry runs there. The same command line runs against a live in-process Cluster,
    --execute included, with
    kafkalite.tools.consumer_groups.run(cluster, "--reset-offsets --group G --all-topics --to-earliest
    --execute").
    """
    live = ctx.obj  # a running Cluster when called through run()
    if sum(x is not None for x in (live, cluster_dir, bootstrap_server)) != 1:
        raise click.UsageError(
            "give one of --bootstrap-server, --cluster-dir (or call kafkalite.tools.consumer_groups.run on a "
            "Cluster)"
        )

    actions = [do_list, describe, do_reset, delete]
    if sum(actions) != 1:
        raise click.UsageError("give exactly one of --list, --describe, --reset-offsets, --delete")
    if group and all_groups:
        raise click.UsageError("--group can't be used with --all-groups")
    if all_groups and not do_reset:
        raise click.UsageError("--all-groups goes with --reset-offsets only")
    if (describe or do_reset or delete) and not (group or all_groups):
        raise click.UsageError(
            "--reset-offsets takes one of --group, --all-groups" if do_reset
            else "--describe, --reset-offsets and --delete need --group"
        )  # fmt: skip
    if delete and cluster_dir is not None:
        raise click.UsageError("--delete needs a running cluster (--bootstrap-server)")
    if (group_types is not None or group_states is not None) and not do_list:
        raise click.UsageError("--type and --state go with --list only")
    if (group_types is not None or group_states is not None) and cluster_dir is not None:
        raise click.UsageError(
            "--type and --state need a running cluster: a directory keeps offsets, not groups"
        )
    given = {"to_earliest": to_earliest, "to_latest": to_latest, "to_offset": to_offset is not None,
             "to_current": to_current, "to_datetime": to_datetime is not None,
             "by_duration": by_duration is not None, "shift_by": shift_by is not None,
             "from_file": from_file is not None}  # fmt: skip
    chosen = [m for m, on in given.items() if on]
    every_spec = ", ".join(RESET_SPECS.values())
    if do_reset and not chosen:
        raise click.UsageError(f"--reset-offsets needs one of these reset specs: {every_spec}")
    if do_reset and len(chosen) > 1:
        first, second = (RESET_SPECS[m] for m in chosen[:2])
        raise click.UsageError(
            f"{first} can't be used with {second}: --reset-offsets takes exactly one of {every_spec}"
        )
    reset_only = chosen or execute or dry_run or do_export or all_topics
    if not do_reset and reset_only:
        raise click.UsageError(
            "--to-*, --by-duration, --shift-by, --from-file, --all-topics, --dry-run, --execute and --export "
            "only go with --reset-offsets"
        )
    if execute and dry_run:
        raise click.UsageError("--reset-offsets only accepts one of --execute and --dry-run")
    if do_reset and from_file is None and not (all_topics or topics):
        raise click.UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    if all_topics and topics:
        raise click.UsageError("--all-topics can't be used with --topic")
    if execute and cluster_dir is not None:
        raise click.UsageError(
            "--execute needs a running cluster's group coordinator; a directory can only be read. In Python: "
            'kafkalite.tools.consumer_groups.run(cluster, "--reset-offsets ... --execute")'
        )
    if do_reset and not (execute or dry_run):
        click.echo(NO_DRY_RUN_WARNING, err=True)
    try:
        if bootstrap_server is not None:
            live = AdminClient(bootstrap_server)
        found = OffsetsDirectory(cluster_dir) if live is None else None  # type: ignore[arg-type]
        if do_reset:
            _reset(live, found, group, all_groups, list(topics), chosen[0], execute, do_export,
                   {"to_offset": to_offset, "to_datetime": to_datetime, "by_duration": by_duration,
                    "shift_by": shift_by, "from_file": from_file}.get(chosen[0]))  # fmt: skip
        elif live is not None:
            if do_list and (group_types is not None or group_states is not None):
                click.echo(format_list(live, _split(group_types), _split(group_states)))
            elif do_list:
                click.echo("\n".join(list_groups(live)))
            elif delete:
                live.delete_group(group)
                click.echo(f"Deletion of requested consumer groups ('{group}') was successful.")
            else:
                click.echo(format_describe(*describe_group(live, group)))  # type: ignore[arg-type]
        elif do_list:
            for g in found.groups():  # type: ignore[union-attr]
                click.echo(g)
        else:
            state, rows = found.describe(group)  # type: ignore[union-attr, arg-type]
            click.echo(format_describe(state, rows))
    except (KafkaError, ValueError, OSError, GroupNotEmptyError) as e:
        raise click.ClickException(str(e) or type(e).__name__) from e
    finally:
        if bootstrap_server is not None and live is not None:
            live.close()


def _reset(
    live: Any,
    found: OffsetsDirectory | None,
    group: str | None,
    all_groups: bool,
    topics: list[str],
    mode: str,
    execute: bool,
    export: bool,
    value: Any,
) -> None:
    """--reset-offsets for one group or all of them; an active group is refused (its error on stderr)
    while the others go on, as Kafka's tool does, and the command then fails."""
    groups = [group] if not all_groups else list_groups(live) if live is not None else found.groups()  # type: ignore[union-attr, list-item]
    plan = None
    if mode == "from_file":
        plan = parse_reset_plan(Path(value).read_text(encoding="utf-8"), groups)
    rows: list[ResetRow] = []
    refused: list[str] = []
    for g in groups:
        if plan is not None:
            if g not in plan:
                raise ValueError(f"No reset plan for group {g} found in --from-file {value}")
            value = plan[g]
        try:
            if live is not None:
                rows += reset_offsets(live, g, topics or None, mode, value, execute=execute)
            else:
                rows += found.plan_reset(g, topics or None, mode, value)  # type: ignore[union-attr]
        except GroupNotEmptyError as e:
            refused.append(str(e))
            click.echo(f"Error: {e}", err=True)
    if export:
        click.echo(format_export(rows, with_group=len(groups) > 1), nl=False)
    elif rows:
        click.echo(format_reset(rows, executed=execute))
    if refused:
        raise GroupNotEmptyError(refused[0] if len(refused) == 1 else f"{len(refused)} groups are active")
