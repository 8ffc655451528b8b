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

Resets follow Kafka's rules: dry run unless ``execute``; with ``execute`` the group must have no active
members (state Empty or Dead); new offsets are clamped to ``[log start, high watermark]``.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner

from kafkalite.client.consumer_protocol import ConsumerAssignment
from kafkalite.errors import GroupIdNotFoundError, KafkaError
from kafkalite.host.admin_client import AdminClient
from kafkalite.protocol import LATEST_TIMESTAMP, TopicPartition
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
    "list_groups",
    "parse_datetime",
    "plan_reset",
    "reset_offsets",
    "run",
]

OFFSETS_TOPIC = "__consumer_offsets"
RESET_MODES = ("to_earliest", "to_latest", "to_datetime", "shift_by")


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
    """New offsets for ``mode`` (``to_earliest``, ``to_latest``, ``to_datetime``, ``shift_by``), clamped to each
    partition's ``(log start, high watermark)``. ``by_time`` holds the offsets found for a datetime."""
    if mode not in RESET_MODES:
        raise ValueError(f"reset mode must be one of {RESET_MODES}, got {mode!r}")
    rows = []
    for tp in sorted(bounds):
        start, end = bounds[tp]
        cur = current.get(tp)
        if mode == "to_earliest":
            new = start
        elif mode == "to_latest":
            new = end
        elif mode == "to_datetime":
            found = (by_time or {}).get(tp)
            new = end if found is None else found  # no record that late: the end, as Kafka does
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"shift_by needs an integer, got {value!r}")
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


def _topic_partitions(cluster: Any, topics: Sequence[str]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in topics for p in cluster.partitions_for(t)]


def reset_offsets(
    cluster: Any,
    group: str,
    topics: Sequence[str] | None,
    mode: str,
    value: Any = None,
    *,
    execute: bool = False,
) -> list[ResetRow]:
    """Plan (and with ``execute`` commit) new offsets for ``group`` on ``topics`` (default: the topics it
    has committed). ``value``: the shift for ``shift_by``, a datetime string or epoch ms for ``to_datetime``."""

    committed = cluster.group_offsets(group)
    tps = _topic_partitions(cluster, topics) if topics else sorted(committed)
    if not tps:
        raise ValueError(f"group {group!r} has no committed offsets: name the topics with --topic")
    bounds = cluster.offset_bounds(tps)
    by_time = None
    if mode == "to_datetime":
        ts = parse_datetime(value) if isinstance(value, str) else int(value)
        by_time = cluster.list_offsets(tps, ts)
    rows = plan_reset(group, {tp: committed.get(tp) for tp in tps}, bounds, mode, value, by_time)
    if execute:
        state = cluster.describe_group(group).group_state
        if state not in ("Empty", "Dead"):
            raise GroupNotEmptyError(
                f"Assignments can only be reset if the group '{group}' is inactive, but the current state is "
                f"{state}."
            )
        cluster.commit_offsets(group, {TopicPartition(r.topic, r.partition): r.new_offset for r in rows})
    return rows


def run(cluster: Any, args: str | Sequence[str]) -> str:
    """Run ``kafkalite consumer-groups ARGS`` against the live ``cluster`` (no ``--cluster-dir``) and return
    what it prints; a usage or Kafka error raises ``click.ClickException`` with the tool's message."""
    argv = shlex.split(args) if isinstance(args, str) else list(args)
    result = CliRunner().invoke(command, argv, obj=cluster, catch_exceptions=False, standalone_mode=False)
    return result.output


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
        committed = self.offsets.get(group, {})
        if topics:
            tps = [TopicPartition(t, p) for (t, p) in self.partitions if t in set(topics)]
        else:
            tps = sorted(committed)
        if not tps:
            raise ValueError(f"group {group!r} has no committed offsets here: name the topics with --topic")
        bounds = {tp: self.bounds(tp) for tp in tps}
        by_time = None
        if mode == "to_datetime":
            ts = parse_datetime(value) if isinstance(value, str) else int(value)
            by_time = {}
            for tp in tps:
                log = Log.open(self.partitions[(tp.topic, tp.partition)].dir, read_only=True)
                try:
                    hit = log.offset_for_timestamp(ts)
                finally:
                    log.close()
                by_time[tp] = None if hit is None or hit[0] >= bounds[tp][1] else hit[0]
        return plan_reset(group, {tp: committed.get(tp) for tp in tps}, bounds, mode, value, by_time)


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
    help="Plan new committed offsets (a dry run from a directory).",
)
@click.option("--delete", is_flag=True, help="Delete an Empty group and its committed offsets.")
@click.option("--group", help="The group to describe, reset or delete.")
@click.option(
    "--topic", "topics", multiple=True, help="Topics to reset (default: those the group committed)."
)
@click.option("--to-earliest", is_flag=True, help="Reset to the log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the high watermark.")
@click.option("--to-datetime", help="Reset to the first offset at or after YYYY-MM-DDTHH:mm:SS.sss (UTC).")
@click.option("--shift-by", type=int, help="Move the committed offset by N (may be negative).")
@click.option("--execute", is_flag=True, help="Apply the reset (needs a live cluster; see below).")
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
    topics: tuple[str, ...],
    to_earliest: bool,
    to_latest: bool,
    to_datetime: str | None,
    shift_by: int | None,
    execute: bool,
) -> None:
    """Kafka's kafka-consumer-groups: --list, --describe, --reset-offsets, --delete.

    With --bootstrap-server it talks to running brokers over Kafka's protocol. With --cluster-dir it reads
    what a stopped simulated cluster left on disk (__consumer_offsets replayed, high watermarks from the
    checkpoints); resets are dry runs there. The same command line runs against a live in-process Cluster,
    --execute included, with
    kafkalite.tools.consumer_groups.run(cluster, "--reset-offsets --group G --to-earliest --execute").
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
    if (describe or do_reset or delete) and not group:
        raise click.UsageError("--describe, --reset-offsets and --delete need --group")
    if delete and cluster_dir is not None:
        raise click.UsageError("--delete needs a running cluster (--bootstrap-server)")
    if (group_types is not None or group_states is not None) and not do_list:
        raise click.UsageError("--type and --state go with --list only")
    if (group_types is not None or group_states is not None) and cluster_dir is not None:
        raise click.UsageError(
            "--type and --state need a running cluster: a directory keeps offsets, not groups"
        )
    modes = {"to_earliest": to_earliest, "to_latest": to_latest, "to_datetime": to_datetime is not None,
             "shift_by": shift_by is not None}  # fmt: skip
    chosen = [m for m, on in modes.items() if on]
    if do_reset and len(chosen) != 1:
        raise click.UsageError(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-datetime, --shift-by"
        )
    if not do_reset and (chosen or execute):
        raise click.UsageError("--to-*, --shift-by and --execute only go with --reset-offsets")
    if execute and cluster_dir is not None:
        raise click.UsageError(
            "--execute needs a running cluster's group coordinator; a directory can only be read. In Python: "
            'kafkalite.tools.consumer_groups.run(cluster, "--reset-offsets ... --execute")'
        )
    try:
        mode = chosen[0] if chosen else ""
        value = {"to_datetime": to_datetime, "shift_by": shift_by}.get(mode)
        if bootstrap_server is not None:
            live = AdminClient(bootstrap_server)
        if live is not None:
            if do_list and (group_types is not None or group_states is not None):
                click.echo(format_list(live, _split(group_types), _split(group_states)))
            elif do_list:
                click.echo("\n".join(list_groups(live)))
            elif delete:
                live.delete_group(group)
                click.echo(f"Deletion of requested consumer groups ('{group}') was successful.")
            elif describe:
                click.echo(format_describe(*describe_group(live, group)))  # type: ignore[arg-type]
            else:
                rows = reset_offsets(live, group, list(topics) or None, mode, value, execute=execute)  # type: ignore[arg-type]
                click.echo(format_reset(rows, executed=execute))
            return
        found = OffsetsDirectory(cluster_dir)  # type: ignore[arg-type]
        if do_list:
            for g in found.groups():
                click.echo(g)
        elif describe:
            state, rows = found.describe(group)  # type: ignore[arg-type]
            click.echo(format_describe(state, rows))
        else:
            rows = found.plan_reset(group, list(topics) or None, mode, value)  # type: ignore[arg-type]
            click.echo(format_reset(rows, executed=False))
    except (KafkaError, ValueError, OSError, GroupNotEmptyError) as e:
        raise click.ClickException(str(e) or type(e).__name__) from e
    finally:
        if bootstrap_server is not None and live is not None:
            live.close()
