"""Walking a fetch's record batches by their length fields, compiled (numba).

A fetch of 4 MiB holds about 250 batches of 16 KiB; finding them is a chain of reads (each batch's length
says where the next one starts), one Python step per batch in plain code. Two walks use it: the segment
fetcher's cut after the last whole batch, and ``scan_plain``'s list of batches to check.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kafkalite.records.batch import BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2, MIN_BATCH_LENGTH

_HEAD_BYTES = 27  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta


@njit(cache=True, nogil=True)
def _be(buf, pos, size):  # noqa: ANN001, ANN202
    """The big-endian signed integer of ``size`` bytes at ``pos``."""
    v = np.int64(0)
    for i in range(size):
        v = (v << 8) | np.int64(buf[pos + i])
    if v >= np.int64(1) << (8 * size - 1):
        v -= np.int64(1) << (8 * size)
    return v


@njit(cache=True, nogil=True)
def _whole(buf):  # noqa: ANN001, ANN202
    pos = 0
    nxt = -1
    n = len(buf)
    while pos + _HEAD_BYTES <= n:
        length = _be(buf, pos + 8, 4)
        end = pos + length + LOG_OVERHEAD
        if end > n or length <= 0:
            break
        nxt = _be(buf, pos, 8) + _be(buf, pos + 23, 4) + 1
        pos = end
    return pos, nxt


@njit(cache=True, nogil=True)
def _starts(buf, out):  # noqa: ANN001, ANN202
    pos = 0
    k = 0
    n = len(buf)
    while n - pos >= BATCH_HEADER_SIZE:
        length = _be(buf, pos + 8, 4)
        if buf[pos + MAGIC_OFFSET] != MAGIC_V2 or length < MIN_BATCH_LENGTH:
            return -1
        nxt = pos + length + LOG_OVERHEAD
        if nxt > n:  # a torn tail ends the walk quietly
            break
        out[k] = pos
        k += 1
        pos = nxt
    return k


def _array(data) -> np.ndarray:
    buf = np.frombuffer(data, np.uint8)
    buf.flags.writeable = False  # one compiled signature, whatever the buffer
    return buf


def whole_batches(data) -> tuple[int, int]:
    """(length of the prefix of ``data`` made of whole batches, the offset after the last of them, -1
    when there is none)."""
    if len(data) < _HEAD_BYTES:
        return 0, -1
    cut, nxt = _whole(_array(data))
    return int(cut), int(nxt)


def batch_starts(data) -> np.ndarray | None:
    """Where each whole v2 batch of ``data`` starts; None at a bad magic byte or batch length (the
    caller's per-batch loop then says what is wrong). A short tail ends the list."""
    if len(data) < BATCH_HEADER_SIZE:
        return np.zeros(0, np.int64)
    out = np.empty(len(data) // BATCH_HEADER_SIZE + 1, np.int64)
    k = _starts(_array(data), out)
    return None if k < 0 else out[:k]


def warm() -> None:
    """Compile (or load from numba's cache) both walks."""
    whole_batches(bytes(BATCH_HEADER_SIZE))
    batch_starts(bytes(BATCH_HEADER_SIZE))


__all__ = ["batch_starts", "warm", "whole_batches"]
