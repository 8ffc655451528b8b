"""Incremental fetch sessions (KIP-227): Kafka's ``FetchSession`` and ``FetchSessionCache`` on the broker,
and the fetcher's side of them (Kafka's ``FetchSessionHandler``).

A fetcher that names every partition it follows in every Fetch pays for all of them on both ends, on
every round, though most have nothing new: a follower of the 50 ``__consumer_offsets`` partitions fetches
them all for each record of a busy topic. With a session the broker remembers the partitions and their
fetch state; the fetcher sends only what changed (a new fetch offset, a partition added, or one
``forgotten``), and the answer holds only the partitions with something to say: records, an error, a
diverging epoch, or a high watermark, last stable offset or log start offset that moved since the last
answer.

The request's ``session_id`` / ``session_epoch`` say which kind of fetch it is:

- epoch -1 (``FINAL_EPOCH``): a full fetch without a session (a session it names is closed);
- epoch 0 (``INITIAL_EPOCH``): a full fetch that opens a session; the answer carries its id (0 when the
  cache has no room: the fetcher goes on without one);
- any other: the next fetch of session ``session_id``. An unknown id is ``FETCH_SESSION_ID_NOT_FOUND``, an
  epoch other than the one expected ``INVALID_FETCH_SESSION_EPOCH``; the fetcher then starts over with a
  full fetch.

The broker still looks at every partition of the session on each fetch, as Kafka does: a follower's fetch
moves the leader's view of it (its LEO, and so the ISR and the high watermark) for all of them. For a
follower, each partition of the session also keeps a memo of its last answer when that was the empty
"caught up" one (``_Cached.memo``): while the partition's fetch marks (``ReplicaManager.fetch_marks``)
and the fetch the session holds for it stay the same, the answer is the same, and the leader sends it
again without reading the partition (``ReplicaManager.handle_fetch``). Any change the answer could show
changes the marks, so the memo needs no invalidation of its own; it goes with its partition's entry.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kafkalite.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from kafkalite.protocol import NO_ERROR, FetchPartition, FetchPartitionResponse, TopicPartition

# Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (a constant, not a config key): how long a session must
# sit unused before a new one may take its slot in a full cache.
EVICTION_MS = 120_000
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: it wraps to 1, since 0 would mean a new session."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass
class _Cached:
    """One partition of a session: what the fetcher last sent, and what the last answer told it."""

    fetch: FetchPartition
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    memo: tuple | None = None
    """A follower's session only: ``(marks, fetch, answer)`` of the last read, when ``answer`` was the
    empty one of a fetch caught up at the log end; kept and read by ``ReplicaManager.handle_fetch``. It
    holds the partition alive no longer than this entry (the session, or until the partition is
    forgotten, or the next read of it no longer gives that answer)."""


@dataclass
class FetchSession:
    """The broker's memory of one fetcher's partitions (Kafka's ``FetchSession``)."""

    id: int
    privileged: bool  # a follower's: evicted last
    last_used_ms: int
    epoch: int = 1  # the epoch the next fetch must carry
    partitions: dict[TopicPartition, _Cached] = field(default_factory=dict)

    def update(self, changed: Iterable[FetchPartition], forgotten: Iterable[TopicPartition]) -> None:
        for fp in changed:
            cached = self.partitions.get(fp.tp)
            if cached is None:
                self.partitions[fp.tp] = _Cached(fp)
            else:
                cached.fetch = fp
        for tp in forgotten:
            self.partitions.pop(tp, None)

    def select(
        self, results: Sequence[FetchPartitionResponse], full: bool
    ) -> tuple[FetchPartitionResponse, ...]:
        """The answers to send: all of them after a full fetch, else those with something new. Either way
        the session remembers what it sent (an error forgets the high watermark, so that the partition
        is sent again once the error is gone)."""
        out = []
        for r in results:
            cached = self.partitions.get(r.tp)
            if cached is None:  # not in the session (cannot happen for a fetch it answered)
                out.append(r)
                continue
            if r.error_code != NO_ERROR:
                cached.high_watermark = -1
                out.append(r)
                continue
            moved = (
                r.high_watermark != cached.high_watermark
                or r.last_stable_offset != cached.last_stable_offset
                or r.log_start_offset != cached.log_start_offset
            )
            if moved:
                cached.high_watermark = r.high_watermark
                cached.last_stable_offset = r.last_stable_offset
                cached.log_start_offset = r.log_start_offset
            if full or moved or r.records or r.diverging_epoch is not None or r.preferred_read_replica >= 0:
                out.append(r)
        return tuple(out)


@dataclass(frozen=True)
class FetchContext:
    """How to answer one fetch: the partitions to read, and the session that filters the answer."""

    partitions: tuple[FetchPartition, ...]
    session: FetchSession | None = None
    full: bool = True
    error_code: int = NO_ERROR
    entries: tuple[_Cached, ...] = ()
    """An incremental fetch's: the session's entry of each of ``partitions``, in the same order (where
    a follower's fetch keeps its memos); empty for a full fetch."""

    @property
    def session_id(self) -> int:
        return INVALID_SESSION_ID if self.session is None else self.session.id

    def select(self, results: Sequence[FetchPartitionResponse]) -> tuple[FetchPartitionResponse, ...]:
        if self.session is None:
            return tuple(results)
        return self.session.select(results, self.full)


class FetchSessionCache:
    """A broker's fetch sessions (Kafka's ``FetchSessionCache``): at most ``max_slots``
    (``max.incremental.fetch.session.cache.slots``). When it is full, a new session takes the place of the
    least recently used one that has been idle for ``eviction_ms``
    (``min.incremental.fetch.session.eviction.ms``), a consumer's before a follower's; failing that,
    the fetch goes on without a session."""

    def __init__(self, max_slots: int, eviction_ms: int, seed: str) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        # Random ids, as Kafka's: a fetcher that outlived a restart of this broker must not find its old id
        # given to another fetcher. Seeded, so a simulated run stays deterministic.
        self._rng = random.Random(seed)

    def context(
        self,
        *,
        session_id: int,
        session_epoch: int,
        partitions: tuple[FetchPartition, ...],
        forgotten: tuple[TopicPartition, ...],
        follower: bool,
        now_ms: int,
    ) -> FetchContext:
        """The context of a fetch carrying these fields (see the module docstring)."""
        if session_epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            if session_epoch == FINAL_EPOCH:
                return FetchContext(partitions)
            session = self._create(follower, now_ms)
            if session is not None:
                session.update(partitions, ())
            return FetchContext(partitions, session)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext((), error_code=FetchSessionIdNotFoundError.code)
        if session.epoch != session_epoch:
            return FetchContext((), error_code=InvalidFetchSessionEpochError.code)
        session.update(partitions, forgotten)
        session.epoch = next_epoch(session_epoch)
        session.last_used_ms = now_ms
        # Kept in order of use: the first is the one to evict.
        self.sessions[session_id] = self.sessions.pop(session_id)
        entries = tuple(session.partitions.values())
        # a list comprehension, not a generator: this runs on every fetch of every follower
        return FetchContext(tuple([c.fetch for c in entries]), session, full=False, entries=entries)

    def _create(self, follower: bool, now_ms: int) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self.sessions) >= self.max_slots and not self._evict_one(follower, now_ms):
            return None
        while True:
            sid = self._rng.randint(1, _MAX_EPOCH)
            if sid not in self.sessions:
                break
        session = self.sessions[sid] = FetchSession(sid, follower, now_ms)
        return session

    def _evict_one(self, follower: bool, now_ms: int) -> bool:
        idle = [s for s in self.sessions.values() if now_ms - s.last_used_ms >= self.eviction_ms]
        # a consumer's idle session first; a follower's new session may also take a consumer's busy one
        pick = next((s for s in idle if not s.privileged), None) or (idle[0] if idle else None)
        if pick is None and follower:
            pick = next((s for s in self.sessions.values() if not s.privileged), None)
        if pick is None:
            return False
        del self.sessions[pick.id]
        return True


@dataclass
class FetchSessionHandler:
    """The fetcher's side (Kafka's ``FetchSessionHandler``): which fetch to send next, and what the leader's
    session holds (by partition, the ``FetchPartition`` it last received)."""

    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH
    sent: dict[TopicPartition, FetchPartition] = field(default_factory=dict)

    def build(
        self, wanted: Sequence[FetchPartition]
    ) -> tuple[int, int, tuple[FetchPartition, ...], tuple[TopicPartition, ...]]:
        """``session_id``, ``session_epoch``, the partitions and the forgotten ones of the next fetch, which
        asks for ``wanted``. The session then holds ``wanted`` exactly."""
        if self.session_id == INVALID_SESSION_ID:
            self.sent = {fp.tp: fp for fp in wanted}
            return INVALID_SESSION_ID, INITIAL_EPOCH, tuple(wanted), ()
        sent = self.sent
        now = {}
        changes = []
        for fp in wanted:  # a loop, not comprehensions: no closure cells to build per fetch
            tp = fp.tp
            now[tp] = fp
            old = sent.get(tp)
            # ``is`` first: a fetcher hands the same object again for a partition where nothing changed
            if old is not fp and old != fp:
                changes.append(fp)
        changed = tuple(changes)
        forgotten = _missing(sent, now) if len(now) != len(sent) or changed else ()
        self.sent = now  # a new dict: the caller may keep the old one as what an earlier fetch asked
        return self.session_id, self.epoch, changed, forgotten

    def on_response(self, session_epoch: int, error_code: int, response_session_id: int) -> None:
        """The fetch sent with ``session_epoch`` was answered."""
        if error_code != NO_ERROR:
            self.reset()
        elif session_epoch == INITIAL_EPOCH:
            # a session opened (or none, when the leader had no room: the next fetch is full again)
            self.session_id = response_session_id
            self.epoch = next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(session_epoch)

    def reset(self) -> None:
        """Start over with a full fetch: the session is gone, or its state is unknown (no answer came)."""
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent = {}


def _missing(sent: dict, now: dict) -> tuple[TopicPartition, ...]:
    """The partitions of ``sent`` not in ``now``, in ``sent``'s order."""
    return tuple([tp for tp in sent if tp not in now])
