"""The storage layer: Kafka's on-disk log, segment by segment, byte for byte.

A partition is a directory of segments (``%020d.log`` + ``.index`` + ``.timeindex``); ``Log`` appends
producer batches after validating them without decoding records, reads whole batches back as
``FileSlice`` ranges ready for ``sendfile``, recovers after crashes, enforces retention and, through
``cleaner.LogCleaner``, compacts.
"""

from kafkalite.config.topic import LogConfig
from kafkalite.storage.file_slice import FileSlice
from kafkalite.storage.log import FetchDataInfo, Log, LogAppendInfo, RecoveryReport
from kafkalite.storage.offset_index import OffsetIndex
from kafkalite.storage.segment import LogSegment
from kafkalite.storage.time_index import TimeIndex

__all__ = [
    "FetchDataInfo",
    "FileSlice",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogSegment",
    "OffsetIndex",
    "RecoveryReport",
    "TimeIndex",
]
