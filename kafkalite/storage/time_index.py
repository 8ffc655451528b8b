"""The time index: ``%020d.timeindex``, 12-byte entries mapping timestamps to offsets.

Each entry is a big-endian int64 timestamp followed by an int32 offset relative to the segment's base.
An entry is added only when the segment's maximum timestamp grows, so timestamps in the file strictly
increase even though record timestamps (CreateTime) may go backwards. The entry ``(T, O)`` promises that
no record at an offset <= O has a timestamp above T, which is what makes ``offsetsForTimes`` correct.
"""

from __future__ import annotations

import struct
from bisect import bisect_right

from kafkalite.errors import KafkaStorageError
from kafkalite.storage.offset_index import _Index

NO_TIMESTAMP = -1


class TimeIndex(_Index):
    """Sparse map from timestamp to the offset of the record holding that timestamp."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPE = "q"
    VALUE_TYPE = "i"
    KIND = "time index"

    def _check_order(self) -> str | None:
        keys, vals = self._keys, self._vals
        if vals and vals[0] < 0:
            return f"first entry has negative relative offset {vals[0]}"
        if not all(map(int.__lt__, keys, keys[1:])):
            return "timestamps are not strictly increasing"
        if not all(map(int.__le__, vals, vals[1:])):
            return "offsets are decreasing"
        return None

    def validate_against(self, next_offset: int) -> str | None:
        """Reason this index cannot belong to a segment ending at ``next_offset``, or None."""
        if self.corrupt_reason:
            return self.corrupt_reason
        if self._vals and self.base_offset + self._vals[-1] >= next_offset:
            return f"last entry offset {self.base_offset + self._vals[-1]} is past the log end {next_offset}"
        return None

    @property
    def entries(self) -> list[tuple[int, int]]:
        """``(timestamp, relative_offset)`` pairs, oldest first."""
        return list(zip(self._keys, self._vals, strict=True))

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, absolute offset)`` of the last entry, ``(-1, base)`` when empty."""
        if not self._keys:
            return NO_TIMESTAMP, self.base_offset
        return self._keys[-1], self.base_offset + self._vals[-1]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add ``(timestamp, offset)`` if the timestamp is a new maximum; returns whether it did."""
        keys = self._keys
        if keys and timestamp <= keys[-1]:
            return False
        rel = offset - self.base_offset
        if self._vals and rel < self._vals[-1]:
            raise KafkaStorageError(
                f"time index entry ({timestamp}, {offset}) goes back from offset "
                f"{self.base_offset + self._vals[-1]} in {self.path.name}"
            )
        if not 0 <= rel <= 0x7FFFFFFF:
            raise KafkaStorageError(f"offset {offset} does not fit segment {self.base_offset}'s int32 index")
        if skip_full_check and len(keys) >= self.max_entries:
            return False
        self._write(timestamp, rel)
        return True

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry with timestamp <= ``timestamp``; ``(-1, base)`` if none."""
        i = self._floor(self._keys, timestamp)
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._keys[i], self.base_offset + self._vals[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries pointing at ``offset`` or later."""
        self._cut(bisect_right(self._vals, offset - self.base_offset - 1))


__all__ = ["TimeIndex"]
