"""History checker: judge a replicated log after faults from what producers saw and what consumers read.

The checker works on plain data (ids, offsets, outcomes) so it can be fed from the simulator, a real
cluster or a hand-written table. It is deterministic and does no I/O: the same history always gives
the same report, byte for byte, so reports can be diffed across seeds and pasted into chapters.

Inputs:

* sends: what each producer attempt ended with, as ``SendRecord`` (acknowledged with an offset and an
  acks level, failed with an error name, or unknown when no answer came back);
* reads: one final full read per topic-partition, ``(offset, id)`` pairs, ``ReadRecord`` or ``Record``;
* replicas (optional): the final log of each replica of each partition, to find divergence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.client.send_history import ACKED, FAILED, UNKNOWN, SendRecord
from kafkalite.records import Record

# Anomaly kinds. The strings are stable: benches print and aggregate counts keyed by them.
LOST = "lost"
LOST_ACKS0 = "lost-acks0"
DUPLICATE = "duplicate"
OFFSET_REUSED = "offset-reused"
DIVERGENT = "divergent"
UNEXPECTED = "unexpected"
REORDERED = "reordered"
AMBIGUOUS = "ambiguous"

ANOMALY_KINDS: tuple[str, ...] = (
    LOST,
    LOST_ACKS0,
    DUPLICATE,
    OFFSET_REUSED,
    DIVERGENT,
    UNEXPECTED,
    REORDERED,
    AMBIGUOUS,
)
# Only these break Kafka's guarantees; the other kinds are legal outcomes worth showing.
VIOLATIONS: frozenset[str] = frozenset({LOST, DUPLICATE, OFFSET_REUSED, DIVERGENT})

TopicPartition = tuple[str, int]

_KIND_ORDER = {kind: i for i, kind in enumerate(ANOMALY_KINDS)}


@dataclass(frozen=True)
class ReadRecord:
    """One record seen by the final read: its offset and the id it carries."""

    offset: int
    id: Hashable


@dataclass(frozen=True)
class Anomaly:
    """One finding. ``id`` and ``offset`` are ``None`` when the finding is not about one record/offset."""

    kind: str
    topic: str
    partition: int
    offset: int | None
    id: Hashable | None
    detail: str = ""
    acks: int | None = None

    @property
    def violation(self) -> bool:
        return self.kind in VIOLATIONS

    def row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "id": None if self.id is None else show_id(self.id),
            "acks": self.acks,
            "violation": self.violation,
            "detail": self.detail,
        }

    def __str__(self) -> str:
        return _finding_line(self, 13, None if self.id is None else show_id(self.id))


def _finding_line(f: Anomaly | ConsumerFinding, width: int, who: str | None) -> str:
    """``kind topic-partition[@offset][ who][: detail]``, the kind padded to ``width``."""
    where = f"{f.topic}-{f.partition}" + ("" if f.offset is None else f"@{f.offset}")
    what = "" if who is None else f" {who}"
    return f"{f.kind:<{width}} {where}{what}" + (f": {f.detail}" if f.detail else "")


def show_id(value: Hashable) -> str:
    """Short, deterministic text for an id; printable bytes are shown as text."""
    if isinstance(value, bytes):
        try:
            text = value.decode("ascii")
        except UnicodeDecodeError:
            return value.hex()
        return text if text.isprintable() else repr(value)
    return str(value)


def _id_key(value: Hashable | None) -> tuple:
    # Ids may mix types across sources; group by type so sorting never compares bytes with ints.
    if isinstance(value, int | str | bytes | float):
        return (type(value).__name__, value)
    return (type(value).__name__, repr(value))


def _anomaly_key(a: Anomaly) -> tuple:
    return (
        _KIND_ORDER[a.kind],
        a.topic,
        a.partition,
        -1 if a.offset is None else a.offset,
        _id_key(a.id),
        a.detail,
    )


class _Verdict:
    """What both reports share: counts per kind, violations, the verdict and its text.

    A report names its findings (``_items``), their kinds (``_KINDS``) and its totals (``_totals``).
    """

    _KINDS: tuple[str, ...] = ()

    def _items(self) -> tuple[Anomaly, ...] | tuple[ConsumerFinding, ...]:
        raise NotImplementedError

    def _totals(self) -> str:
        raise NotImplementedError

    @property
    def counts(self) -> dict[str, int]:
        """Findings per kind, every kind present (zero when none), in ``_KINDS`` order."""
        out = dict.fromkeys(self._KINDS, 0)
        for f in self._items():
            out[f.kind] += 1
        return out

    @property
    def violations(self) -> list:
        return [f for f in self._items() if f.violation]

    @property
    def ok(self) -> bool:
        """True when no finding is a violation (see ``VIOLATIONS`` and ``CONSUMER_VIOLATIONS``)."""
        return not self.violations

    def summary(self) -> str:
        verdict = "OK" if self.ok else "VIOLATED"
        counts = " ".join(f"{k}={n}" for k, n in self.counts.items())
        return f"{verdict}: {self._totals()}; {counts}"

    def table(self) -> list[dict[str, Any]]:
        """One dict per finding, ready for ``pandas.DataFrame(report.table())``."""
        return [f.row() for f in self._items()]

    def __str__(self) -> str:
        return "\n".join([self.summary(), *(f"  {f}" for f in self._items())])


@dataclass(frozen=True)
class CheckReport(_Verdict):
    """The checker's verdict: anomalies sorted by kind, partition, offset and id."""

    _KINDS = ANOMALY_KINDS

    anomalies: tuple[Anomaly, ...]
    sends: int = 0
    acked: int = 0
    read: int = 0
    unknown_present: tuple[Hashable, ...] = ()
    unknown_absent: tuple[Hashable, ...] = ()

    def _items(self) -> tuple[Anomaly, ...]:
        return self.anomalies

    def _totals(self) -> str:
        return f"{self.sends} sends, {self.acked} acked, {self.read} read"

    def of_kind(self, kind: str) -> list[Anomaly]:
        if kind not in _KIND_ORDER:
            raise ValueError(f"unknown anomaly kind {kind!r}")
        return [a for a in self.anomalies if a.kind == kind]

    @property
    def lost(self) -> list[Anomaly]:
        return self.of_kind(LOST)

    @property
    def lost_acks0(self) -> list[Anomaly]:
        return self.of_kind(LOST_ACKS0)

    @property
    def duplicates(self) -> list[Anomaly]:
        return self.of_kind(DUPLICATE)

    @property
    def offset_reused(self) -> list[Anomaly]:
        return self.of_kind(OFFSET_REUSED)

    @property
    def divergent(self) -> list[Anomaly]:
        return self.of_kind(DIVERGENT)

    @property
    def unexpected(self) -> list[Anomaly]:
        return self.of_kind(UNEXPECTED)

    @property
    def reordered(self) -> list[Anomaly]:
        return self.of_kind(REORDERED)

    @property
    def ambiguous(self) -> list[Anomaly]:
        return self.of_kind(AMBIGUOUS)

    @property
    def lost_by_acks(self) -> dict[int, int]:
        """Lost acknowledged records per acks level (0, 1, -1), all levels present."""
        out = {0: 0, 1: 0, -1: 0}
        for a in self.anomalies:
            if a.kind in (LOST, LOST_ACKS0) and a.acks is not None:
                out[a.acks] += 1
        return out


def total_counts(reports: Iterable[CheckReport]) -> dict[str, int]:
    """Sum anomaly counts over many reports (e.g. one per fault seed)."""
    out = dict.fromkeys(ANOMALY_KINDS, 0)
    for report in reports:
        for kind, n in report.counts.items():
            out[kind] += n
    return out


# ---------------------------------------------------------------------------------------------------
# Input helpers
# ---------------------------------------------------------------------------------------------------


def _value_id(record: Record) -> Hashable:
    return record.value


def as_tp(key: TopicPartition | str) -> TopicPartition:
    """Accept ``("orders", 0)`` or ``"orders-0"`` and return ``("orders", 0)``."""
    if isinstance(key, str):
        topic, sep, part = key.rpartition("-")
        if not sep or not part.isdigit():
            raise ValueError(f"topic-partition must look like 'topic-3', not {key!r}")
        return (topic, int(part))
    topic, partition = key
    return (topic, int(partition))


def as_read(
    item: ReadRecord | Record | tuple[int, Hashable], id_of: Callable[[Record], Hashable] = _value_id
) -> ReadRecord:
    """Normalise one read entry: a ``ReadRecord``, a ``Record`` (id from ``id_of``) or ``(offset, id)``."""
    if isinstance(item, ReadRecord):
        return item
    if isinstance(item, Record):
        return ReadRecord(item.offset, id_of(item))
    offset, ident = item
    return ReadRecord(int(offset), ident)


def reads_from_records(
    records: Iterable[Record], id_of: Callable[[Record], Hashable] = _value_id
) -> list[ReadRecord]:
    """Turn decoded ``Record`` objects into read entries; the id is the value unless ``id_of`` says."""
    return [as_read(r, id_of) for r in records]


def reads_from_dict(
    per_partition: Mapping[TopicPartition | str, Iterable[ReadRecord | Record | tuple[int, Hashable]]],
    id_of: Callable[[Record], Hashable] = _value_id,
) -> dict[TopicPartition, list[ReadRecord]]:
    """Normalise ``{tp: entries}`` (tp as tuple or ``"topic-N"``) into ``{(topic, n): [ReadRecord]}``."""
    out: dict[TopicPartition, list[ReadRecord]] = {}
    for key, items in per_partition.items():
        out.setdefault(as_tp(key), []).extend(as_read(i, id_of) for i in items)
    return out


def sends_from_dicts(rows: Iterable[Mapping[str, Any]]) -> list[SendRecord]:
    """Build sends from plain dicts with ``SendRecord`` field names (e.g. rows of a JSON log)."""
    return [SendRecord(**dict(row)) for row in rows]


# ---------------------------------------------------------------------------------------------------
# The checker
# ---------------------------------------------------------------------------------------------------


class HistoryChecker:
    """Collects a history piece by piece (as a fault test runs) and checks it at the end."""

    def __init__(self) -> None:
        self.sends: list[SendRecord] = []
        self.reads: dict[TopicPartition, list[ReadRecord]] = {}
        self.replicas: dict[TopicPartition, dict[Hashable, list[ReadRecord]]] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}

    def add_send(self, send: SendRecord) -> None:
        self.sends.append(send)

    def add_read(
        self, tp: TopicPartition | str, items: Iterable[ReadRecord | Record | tuple[int, Hashable]]
    ) -> None:
        self.reads.setdefault(as_tp(tp), []).extend(as_read(i) for i in items)

    def add_replica(
        self,
        tp: TopicPartition | str,
        replica: Hashable,
        items: Iterable[ReadRecord | Record | tuple[int, Hashable]],
    ) -> None:
        self.replicas.setdefault(as_tp(tp), {})[replica] = [as_read(i) for i in items]

    def set_high_watermark(self, tp: TopicPartition | str, hw: int) -> None:
        self.high_watermarks[as_tp(tp)] = hw

    def check(self) -> CheckReport:
        return check_history(self.sends, self.reads, self.replicas or None, self.high_watermarks or None)


def check_history(
    sends: Iterable[SendRecord],
    reads: Mapping[TopicPartition | str, Iterable[ReadRecord | Record | tuple[int, Hashable]]],
    replicas: Mapping[TopicPartition | str, Mapping[Hashable, Iterable[Any]]] | None = None,
    high_watermarks: Mapping[TopicPartition | str, int] | None = None,
) -> CheckReport:
    """Check a history and return a ``CheckReport``.

    Send ids must be unique across the whole history. A partition with no entry in ``reads`` counts as
    read and empty. Divergence is judged below each partition's high watermark when given, else below
    the smallest log end offset among its replicas.
    """
    send_list = list(sends)
    by_id: dict[Hashable, SendRecord] = {}
    order: dict[Hashable, int] = {}
    for i, s in enumerate(send_list):
        if s.id in by_id:
            raise ValueError(f"send id {show_id(s.id)} is used twice; ids must be unique")
        by_id[s.id] = s
        order[s.id] = i if s.seq is None else s.seq

    found: list[Anomaly] = []
    log = reads_from_dict(reads)
    # A consumer that restarts may see the same (offset, id) twice; that is redelivery, not the log.
    for tp in log:
        log[tp] = sorted({(r.offset, _id_key(r.id)): r for r in log[tp]}.values(), key=_read_key)

    at_offset: dict[TopicPartition, dict[int, list[Hashable]]] = {}
    where: dict[Hashable, list[tuple[TopicPartition, int]]] = defaultdict(list)
    for tp, entries in log.items():
        slots: dict[int, list[Hashable]] = defaultdict(list)
        for r in entries:
            slots[r.offset].append(r.id)
            where[r.id].append((tp, r.offset))
        at_offset[tp] = slots
        for offset, ids in slots.items():
            if len(ids) > 1:
                shown = ", ".join(show_id(i) for i in sorted(ids, key=_id_key))
                found.append(Anomaly(OFFSET_REUSED, *tp, offset, None, f"read holds {len(ids)} ids: {shown}"))

    for ident, places in where.items():
        if len(places) > 1:
            places = sorted(places)
            shown = ", ".join(f"{t}-{p}@{o}" for (t, p), o in places)
            found.append(Anomaly(DUPLICATE, *places[0][0], places[0][1], ident, f"read at {shown}"))
        sent = by_id.get(ident)
        for tp, offset in places:
            if sent is None:
                found.append(Anomaly(UNEXPECTED, *tp, offset, ident, "never sent"))
            elif sent.tp != tp:
                found.append(
                    Anomaly(UNEXPECTED, *tp, offset, ident, f"sent to {sent.topic}-{sent.partition}")
                )

    for s in send_list:
        offsets = sorted(o for tp, o in where.get(s.id, ()) if tp == s.tp)
        present = bool(offsets)
        if s.outcome == ACKED:
            if not present:
                kind = LOST if s.acks != 0 else LOST_ACKS0
                found.append(Anomaly(kind, s.topic, s.partition, s.offset, s.id, f"acks={s.acks}", s.acks))
            if s.acks != 0 and s.offset is not None:
                holders = at_offset.get(s.tp, {}).get(s.offset, [])
                others = sorted((i for i in holders if i != s.id), key=_id_key)
                if others and s.id not in holders:
                    now = f"found at {offsets}" if present else "missing"
                    shown = ", ".join(show_id(i) for i in others)
                    found.append(
                        Anomaly(
                            OFFSET_REUSED,
                            s.topic,
                            s.partition,
                            s.offset,
                            s.id,
                            f"acked here, offset now holds {shown}; record {now}",
                            s.acks,
                        )
                    )
        elif s.outcome == FAILED and present:
            found.append(
                Anomaly(
                    AMBIGUOUS,
                    s.topic,
                    s.partition,
                    offsets[0],
                    s.id,
                    f"failed ({s.error}) but present",
                    s.acks,
                )
            )
        elif s.outcome == UNKNOWN:
            detail = "unknown outcome, present" if present else "unknown outcome, absent"
            found.append(
                Anomaly(
                    AMBIGUOUS, s.topic, s.partition, offsets[0] if present else None, s.id, detail, s.acks
                )
            )

    found.extend(_reorderings(send_list, order, where))
    if replicas:
        found.extend(_divergence(replicas, high_watermarks or {}))

    unknown = [s for s in send_list if s.outcome == UNKNOWN]
    landed = {s.id for s in unknown if any(tp == s.tp for tp, _ in where.get(s.id, ()))}
    return CheckReport(
        anomalies=tuple(sorted(found, key=_anomaly_key)),
        sends=len(send_list),
        acked=sum(1 for s in send_list if s.outcome == ACKED),
        read=sum(len(v) for v in log.values()),
        unknown_present=tuple(sorted((s.id for s in unknown if s.id in landed), key=_id_key)),
        unknown_absent=tuple(sorted((s.id for s in unknown if s.id not in landed), key=_id_key)),
    )


def _read_key(r: ReadRecord) -> tuple:
    return (r.offset, _id_key(r.id))


def _reorderings(
    sends: list[SendRecord], order: Mapping[Hashable, int], where: Mapping[Hashable, list]
) -> list[Anomaly]:
    # Only adjacent pairs (in send order) are reported: any inversion implies an adjacent one, and
    # this blames one record per displacement instead of every record it jumped over.
    chains: dict[tuple[TopicPartition, str], list[tuple[int, int, SendRecord]]] = defaultdict(list)
    for s in sends:
        if s.outcome != ACKED or s.acks == 0:
            continue
        offsets = sorted(o for tp, o in where.get(s.id, ()) if tp == s.tp)
        if offsets:
            chains[(s.tp, s.producer)].append((order[s.id], offsets[0], s))
    out: list[Anomaly] = []
    for (_, producer), chain in chains.items():
        chain.sort(key=lambda c: (c[0], c[1]))
        for (_, prev_off, prev), (_, off, cur) in zip(chain, chain[1:], strict=False):
            if off < prev_off:
                who = f"producer {producer} " if producer else ""
                detail = f"{who}sent after {show_id(prev.id)} (offset {prev_off}) but read before it"
                out.append(Anomaly(REORDERED, cur.topic, cur.partition, off, cur.id, detail, cur.acks))
    return out


def _divergence(
    replicas: Mapping[TopicPartition | str, Mapping[Hashable, Iterable[Any]]],
    high_watermarks: Mapping[TopicPartition | str, int],
) -> list[Anomaly]:
    hws = {as_tp(k): v for k, v in high_watermarks.items()}
    out: list[Anomaly] = []
    for key, logs in replicas.items():
        tp = as_tp(key)
        slots: dict[Hashable, dict[int, Hashable]] = {}
        for replica, items in logs.items():
            slots[replica] = {r.offset: r.id for r in map(as_read, items)}
        if len(slots) < 2:
            continue
        leo = {rep: (max(s) + 1 if s else 0) for rep, s in slots.items()}
        bound = hws.get(tp, min(leo.values()))
        for offset in sorted({o for s in slots.values() for o in s if o < bound}):
            # A replica whose log ends at or before this offset is lagging, not divergent.
            seen = {rep: s.get(offset) for rep, s in slots.items() if leo[rep] > offset}
            if len({_id_key(v) for v in seen.values()}) > 1:
                shown = ", ".join(
                    f"{rep}={'-' if v is None else show_id(v)}"
                    for rep, v in sorted(seen.items(), key=lambda kv: _id_key(kv[0]))
                )
                out.append(Anomaly(DIVERGENT, *tp, offset, None, shown))
    return out


# ---------------------------------------------------------------------------------------------------
# The consumer side: what a group processed and committed
# ---------------------------------------------------------------------------------------------------

# Kinds of consumer-side findings. Stable strings, like the producer-side kinds.
SKIPPED = "skipped"  # below the group's final committed offset, never processed: lost to the application
UNPROCESSED = "unprocessed"  # at or above the final committed offset and never processed (still to do)
REPROCESSED = "reprocessed"  # processed more than once (at-least-once redelivery)
COMMIT_AHEAD = "commit-ahead"  # a commit beyond what its member (or the group before it) had processed
SHARED_OWNERSHIP = "shared-ownership"  # two live members owned one partition in the same generation

CONSUMER_KINDS: tuple[str, ...] = (SKIPPED, UNPROCESSED, REPROCESSED, COMMIT_AHEAD, SHARED_OWNERSHIP)
# What breaks at-least-once processing by a group; reprocessing is its documented price.
CONSUMER_VIOLATIONS: frozenset[str] = frozenset({SKIPPED, COMMIT_AHEAD, SHARED_OWNERSHIP})


@dataclass(frozen=True)
class ConsumerFinding:
    """One consumer-side finding about a partition (and an offset or member when it is about one)."""

    kind: str
    topic: str
    partition: int
    offset: int | None = None
    member: str | None = None
    detail: str = ""

    @property
    def violation(self) -> bool:
        return self.kind in CONSUMER_VIOLATIONS

    def row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "member": self.member,
            "violation": self.violation,
            "detail": self.detail,
        }

    def __str__(self) -> str:
        return _finding_line(self, 16, self.member)


@dataclass(frozen=True)
class ConsumptionReport(_Verdict):
    """The consumer-side verdict: findings sorted by kind, partition, offset and member."""

    _KINDS = CONSUMER_KINDS

    findings: tuple[ConsumerFinding, ...]
    records: int = 0
    processed: int = 0
    commits: int = 0

    def _items(self) -> tuple[ConsumerFinding, ...]:
        return self.findings

    def _totals(self) -> str:
        return f"{self.records} records, {self.processed} processed, {self.commits} commits"

    def of_kind(self, kind: str) -> list[ConsumerFinding]:
        if kind not in CONSUMER_KINDS:
            raise ValueError(f"unknown consumer finding kind {kind!r}; known: {CONSUMER_KINDS}")
        return [f for f in self.findings if f.kind == kind]


class ConsumptionHistory:
    """What members of one group did, in the order it happened: records processed, commits that succeeded,
    and samples of who owned what in which generation. ``check`` compares it with the log."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, TopicPartition, int, Hashable]] = []
        self.ownership: list[tuple[int, str, int, frozenset]] = []

    def processed(self, member: str, tp: TopicPartition | str, offset: int, id: Hashable = None) -> None:
        """``member`` finished processing the record at ``offset`` (its side effect is done)."""
        self.events.append(("processed", member, as_tp(tp), int(offset), id))

    def committed(self, member: str, offsets: Mapping[Any, int]) -> None:
        """A commit by ``member`` succeeded: ``{tp: next offset to process}``."""
        for tp, offset in offsets.items():
            self.events.append(("committed", member, as_tp(tp), int(offset), None))

    def owners(self, t: int, member: str, generation: int, partitions: Iterable[Any]) -> None:
        """A sample: at time ``t`` the live ``member`` believed it owned ``partitions`` in ``generation``."""
        self.ownership.append((t, member, generation, frozenset(as_tp(tp) for tp in partitions)))

    def check(
        self,
        log: Mapping[TopicPartition | str, Iterable[ReadRecord | Record | tuple[int, Hashable]]],
        final_committed: Mapping[Any, int],
    ) -> ConsumptionReport:
        return check_consumption(self, log, final_committed)


def check_consumption(
    history: ConsumptionHistory,
    log: Mapping[TopicPartition | str, Iterable[ReadRecord | Record | tuple[int, Hashable]]],
    final_committed: Mapping[Any, int],
) -> ConsumptionReport:
    """Judge a group's history against the log (``{tp: records}``) and its final committed offsets.

    * every commit is at or below the larger of what its member had processed in that partition and the
      group's previous commit (``commit-ahead`` otherwise: an at-most-once commit);
    * every record below the final committed offset was processed (``skipped`` otherwise) and records at
      or above it are ``unprocessed``; a record processed twice is ``reprocessed``;
    * no two members' samples taken at the same time claim one partition in the same generation.
    """
    records = reads_from_dict(log)
    final = {as_tp(tp): o for tp, o in final_committed.items()}
    found: list[ConsumerFinding] = []
    done_by: dict[tuple[str, TopicPartition], int] = {}  # member's next offset after what it processed
    group_commit: dict[TopicPartition, int] = {}
    times: dict[tuple[TopicPartition, int], int] = defaultdict(int)
    n_processed = n_commits = 0
    for kind, member, tp, offset, _id in history.events:
        if kind == "processed":
            n_processed += 1
            times[(tp, offset)] += 1
            key = (member, tp)
            done_by[key] = max(done_by.get(key, 0), offset + 1)
            continue
        n_commits += 1
        allowed = max(done_by.get((member, tp), 0), group_commit.get(tp, 0))
        if offset > allowed:
            found.append(
                ConsumerFinding(
                    COMMIT_AHEAD,
                    tp[0],
                    tp[1],
                    offset,
                    member,
                    f"committed {offset}, processed up to {allowed}",
                )  # fmt: skip
            )
        group_commit[tp] = offset
    for tp, recs in sorted(records.items()):
        end = final.get(tp, 0)
        for r in recs:
            n = times.get((tp, r.offset), 0)
            if n == 0:
                found.append(
                    ConsumerFinding(SKIPPED if r.offset < end else UNPROCESSED, tp[0], tp[1], r.offset)
                )
            elif n > 1:
                found.append(ConsumerFinding(REPROCESSED, tp[0], tp[1], r.offset, detail=f"{n} times"))
    by_time: dict[int, list[tuple[str, int, frozenset]]] = defaultdict(list)
    for t, member, gen, tps in history.ownership:
        by_time[t].append((member, gen, tps))
    reported: set[tuple[TopicPartition, int]] = set()
    for t in sorted(by_time):
        owners: dict[tuple[TopicPartition, int], list[str]] = defaultdict(list)
        for member, gen, tps in by_time[t]:
            for tp in tps:
                owners[(tp, gen)].append(member)
        for (tp, gen), ms in sorted(owners.items()):
            if len(ms) > 1 and (tp, gen) not in reported:
                reported.add((tp, gen))
                found.append(
                    ConsumerFinding(
                        SHARED_OWNERSHIP,
                        tp[0],
                        tp[1],
                        None,
                        ",".join(sorted(ms)),
                        f"generation {gen} at t={t} ms",
                    )  # fmt: skip
                )
    order = {k: i for i, k in enumerate(CONSUMER_KINDS)}
    found.sort(key=lambda f: (order[f.kind], f.topic, f.partition, -1 if f.offset is None else f.offset,
                              f.member or ""))  # fmt: skip
    return ConsumptionReport(tuple(found), sum(len(v) for v in records.values()), n_processed, n_commits)
