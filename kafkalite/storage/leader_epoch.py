"""Kafka's LeaderEpochFileCache: which leader epoch wrote which offsets (KIP-101).

An entry ``(epoch, start_offset)`` says the leader of ``epoch`` wrote its first record at ``start_offset``;
that epoch ends where the next one starts (or at the log end for the latest). A follower asks the leader
for the end offset of its own latest epoch (OffsetForLeaderEpoch) and truncates there, instead of to its
high watermark, which is what lets replicas agree on a common prefix after leader changes. The entries
persist in ``leader-epoch-checkpoint`` (Kafka's text checkpoint format) on every change.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kafkalite.storage.checkpoint import LeaderEpochCheckpoint
from kafkalite.storage.file_ops import OS_FILE_OPS, FileOps

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Ordered ``(epoch, start_offset)`` entries with Kafka's assign / lookup / truncate rules."""

    def __init__(
        self,
        path: str | os.PathLike | None,
        entries: list[tuple[int, int]] | None = None,
        file_ops: FileOps = OS_FILE_OPS,
    ) -> None:
        self._checkpoint = LeaderEpochCheckpoint(path, file_ops) if path is not None else None
        self._entries: list[tuple[int, int]] = list(entries or [])
        self.on_change: Callable[[], None] | None = None
        # The owning Log's disk-failure handler: turns an OSError into KafkaStorageError after reporting.
        self.on_io_error: Callable[[str, OSError], Exception] | None = None

    # ----- views ---------------------------------------------------------------------------------
    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def __len__(self) -> int:
        return len(self._entries)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that wrote ``offset`` (the last entry starting at or before it)."""
        found = UNDEFINED_EPOCH
        for e, o in self._entries:
            if o <= offset:
                found = e
            else:
                break
        return found

    def start_offset_of_latest(self) -> int:
        return self._entries[-1][1] if self._entries else UNDEFINED_EPOCH_OFFSET

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)``: the largest epoch <= ``requested_epoch`` and where it ends.

        As Kafka: the latest epoch ends at the log end offset; an older one ends where the next higher
        epoch starts; an epoch below every entry answers itself with the first entry's start offset; an
        undefined epoch, an epoch above the latest, or an empty cache gives ``(-1, -1)``.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1][0]:
            return requested_epoch, log_end_offset
        floor = None
        for i, (e, _o) in enumerate(self._entries):
            if e <= requested_epoch:
                floor = i
            else:
                break
        if floor is None:
            # The epochs before our first entry are gone from this log (retention, DeleteRecords, or a
            # replica that never had them): whoever asks must agree with us no further than where our
            # history starts, which lets a follower after an unclean election truncate and catch up.
            return requested_epoch, self._entries[0][1]
        if floor == len(self._entries) - 1:  # asked for an epoch above the latest
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        return self._entries[floor][0], self._entries[floor + 1][1]

    # ----- mutations -----------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; only a newer epoch adds an entry.

        Entries that the new one contradicts (same or higher epoch, or starting at or after it) go, as
        Kafka's cache does when a follower appends a leader's batches after truncating."""
        if epoch < 0:
            return False
        if self._entries and self._entries[-1][0] == epoch:
            return False  # same epoch: its start offset is already known
        if self._entries and epoch < self._entries[-1][0] and start_offset >= self._entries[-1][1]:
            return False  # an older epoch cannot start after a newer one
        self._entries = [(e, o) for e, o in self._entries if e < epoch and o < start_offset]
        self._entries.append((epoch, start_offset))
        self._flush()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated to it)."""
        kept = [(e, o) for e, o in self._entries if o < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved up: entries wholly below it go; the one spanning it starts there."""
        kept: list[tuple[int, int]] = []
        for i, (e, o) in enumerate(self._entries):
            nxt = self._entries[i + 1][1] if i + 1 < len(self._entries) else None
            if nxt is not None and nxt <= start_offset:
                continue
            kept.append((e, max(o, start_offset)))
        if kept != self._entries:
            self._entries = kept
            self._flush()

    def clear(self) -> None:
        self._entries = []
        self._flush()

    def _set(self, entries: list[tuple[int, int]], persist: bool) -> None:
        self._entries = list(entries)
        if persist:
            self._flush()

    def _flush(self) -> None:
        if self._checkpoint is not None:
            try:
                self._checkpoint.write(self._entries)
            except OSError as e:
                if self.on_io_error is None:
                    raise
                raise self.on_io_error(f"Error while writing {self._checkpoint.path}", e) from e
        if self.on_change is not None:
            self.on_change()

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._entries})"


__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "LeaderEpochCache"]
