"""Moving a replica between a broker's log dirs (KIP-113), and describing the dirs (DescribeLogDirs).

Kafka's way, which this follows: AlterReplicaLogDirs creates a *future* log for the partition in the
target dir, named ``<topic>-<partition>.<id>-future``; a background mover (Kafka's
``ReplicaAlterLogDirsThread``) copies the current log's batches into it, as a follower copies its leader's,
while the partition keeps serving and appending; once the future log has caught up with the current log's
end, the two are swapped (the future dir takes the partition's name, the old log is renamed
``<topic>-<partition>.<id>-delete`` and removed after ``file.delete.delay.ms``). A broker that restarts in
the middle finds the future log when the partition's replica is opened again and resumes copying.

Here the mover runs on the replica manager's tick, in the same event loop as every append, so the swap
sees no append between "caught up" and "renamed": nothing acknowledged can fall between the two logs.
The current log may be truncated under the copy (a follower that diverged, DeleteRecords, retention):
before each step the future log is brought back to a prefix of the current one by the leader-epoch rule
a follower uses (Kafka's future replica does the same through OffsetsForLeaderEpoch on its own broker).

The renames are ordered so that a crash anywhere leaves a state the next start repairs: the old log is
renamed ``-delete`` first, then the future one takes the name. A start that finds ``-delete`` and
``-future`` with the same id and no current log finishes the swap; a leftover ``-delete`` is removed.
(Kafka renames the future log first and refuses to start on the duplicate a crash there leaves.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from kafkalite.errors import (
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    LogDirNotFoundError,
    ReplicaNotAvailableError,
    UnknownServerError,
)
from kafkalite.protocol import (
    INVALID_OFFSET_LAG,
    NO_ERROR,
    DescribeLogDirsPartition,
    DescribeLogDirsResult,
    TopicPartition,
)
from kafkalite.records.batch import iter_batches
from kafkalite.storage.leader_epoch import UNDEFINED_EPOCH
from kafkalite.storage.log import Log

if TYPE_CHECKING:
    from kafkalite.broker.partition import Partition
    from kafkalite.broker.replica_manager import ReplicaManager

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
MAX_DIR_NAME = 255  # a file name's longest on the usual file systems (Kafka's KAFKA-4893 limit)

__all__ = [
    "DELETE_SUFFIX",
    "FUTURE_SUFFIX",
    "ReplicaAlterLogDirsManager",
    "copy_step",
    "describe_log_dirs",
    "reconcile",
]


def log_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def future_dir_name(tp: TopicPartition, move_id: str) -> str:
    return f"{log_dir_name(tp)}.{move_id}{FUTURE_SUFFIX}"


def _move_id(path: Path, suffix: str) -> str:
    """The id between the partition's name and ``suffix`` in a future or delete dir's name."""
    return path.name[: -len(suffix)].rpartition(".")[2]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ReplicaAlterLogDirsManager:
    """The future logs of one broker and the mover that fills and swaps them (module docstring)."""

    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm
        self.futures: dict[TopicPartition, Log] = {}
        self.preferred_dirs: dict[TopicPartition, Path] = {}
        """Where a partition not hosted yet is to be created (AlterReplicaLogDirs before LeaderAndIsr)."""
        self._retired: list[tuple[Log, Path]] = []  # swapped-out logs waiting for file.delete.delay.ms

    # ------------------------------------------------------------------------------- AlterReplicaLogDirs
    def alter(self, targets: dict[TopicPartition, str]) -> dict[TopicPartition, int]:
        """Kafka's ``alterReplicaLogDirs``: each partition's error code (NONE when its move started, was
        already under way to that dir, or nothing needed moving)."""
        out: dict[TopicPartition, int] = {}
        for tp, dest in targets.items():
            try:
                self._alter_one(tp, dest)
                out[tp] = NO_ERROR
            except (InvalidTopicError, LogDirNotFoundError, ReplicaNotAvailableError, KafkaStorageError) as e:
                self.rm._event("alter_replica_log_dir_failed", tp=str(tp), dir=dest, error=e.name)
                out[tp] = e.code
            except KafkaError as e:
                out[tp] = e.code
            except OSError as e:  # the target disk refused the new dir: it goes offline
                self.rm._event("alter_replica_log_dir_failed", tp=str(tp), dir=dest, error=repr(e))
                out[tp] = KafkaStorageError.code
            except Exception as e:  # noqa: BLE001 - one partition's surprise must not fail the others
                self.rm._event("alter_replica_log_dir_failed", tp=str(tp), dir=dest, error=repr(e))
                out[tp] = UnknownServerError.code
        return out

    def _alter_one(self, tp: TopicPartition, dest: str) -> None:
        rm = self.rm
        if len(future_dir_name(tp, uuid.uuid4().hex)) > MAX_DIR_NAME:
            raise InvalidTopicError("The topic name is too long.")
        target = Path(dest).absolute()
        if target not in rm.log_dirs:
            raise LogDirNotFoundError(f"Log dir {dest} is not found in the config.")
        if rm.failure_channel.has_offline(target):
            raise KafkaStorageError(f"Log directory {target} is offline")
        if rm.is_offline(tp):
            raise KafkaStorageError(f"Partition {tp} is offline")
        fut = self.futures.get(tp)
        if fut is not None and fut.dir.parent != target:
            self.remove(tp, delete=True)  # a new destination: the copy so far is dropped, as Kafka does
        self.preferred_dirs[tp] = target
        p = rm.partition_or_none(tp)
        if p is None:
            raise ReplicaNotAvailableError(f"Replica {rm.broker_id} of {tp} is not available on this broker")
        self.preferred_dirs.pop(tp, None)
        if p.log.dir.parent == target or tp in self.futures:
            return
        if rm.failure_channel.offline:
            # Kafka creates no future log while a dir is offline: the same partition might have one there.
            raise KafkaStorageError(
                f"Can not create future log for {tp} because log directories "
                f"{', '.join(map(str, rm.failure_channel.offline))} are offline"
            )
        fut = Log.open(
            target / future_dir_name(tp, uuid.uuid4().hex),
            p.log.config,
            clock=rm.clock,
            file_ops=rm.file_ops,
            failure_channel=rm.failure_channel,
        )
        if p.log.topic_id is not None:
            fut.assign_topic_id(p.log.topic_id)
        self.futures[tp] = fut
        rm._event("future_log_created", tp=str(tp), dir=str(target), source=str(p.log.dir.parent))

    # ------------------------------------------------------------------------------ opening a replica
    def prepare_open(self, tp: TopicPartition) -> None:
        """Before ``tp``'s current log is opened: finish a swap a crash interrupted, drop old ``-delete``
        dirs. Only online dirs are looked at."""
        rm = self.rm
        name = log_dir_name(tp)
        online = [d for d in rm.log_dirs if not rm.failure_channel.has_offline(d)]
        current = [d for d in online if (d / name).is_dir()]
        deletes = [e for d in online for e in self._children(d, name, DELETE_SUFFIX)]
        if not current and deletes:
            ids = {_move_id(e, DELETE_SUFFIX) for e in deletes}
            for d in online:
                for fut in self._children(d, name, FUTURE_SUFFIX):
                    if _move_id(fut, FUTURE_SUFFIX) in ids:
                        os.rename(fut, d / name)
                        _fsync_dir(d)
                        rm._event("log_dir_swap_completed", tp=str(tp), dir=str(d))
                        break
        for e in deletes:
            shutil.rmtree(e, ignore_errors=True)

    def resume(self, p: Partition) -> None:
        """After ``p``'s current log was opened: a future log left on disk by a move that a restart
        interrupted is opened again and the copy goes on (Kafka finds it when it loads the logs)."""
        rm = self.rm
        tp = p.tp
        found = [
            e
            for d in rm.log_dirs
            if not rm.failure_channel.has_offline(d)
            for e in self._children(d, log_dir_name(tp), FUTURE_SUFFIX)
        ]
        for extra in found[1:]:  # never more than one unless the disk was tampered with: keep the first
            shutil.rmtree(extra, ignore_errors=True)
        if not found or tp in self.futures:
            return
        if found[0].parent == p.log.dir.parent:  # a future log beside the current one moves nothing
            shutil.rmtree(found[0], ignore_errors=True)
            return
        self.futures[tp] = Log.open(
            found[0], p.log.config, clock=rm.clock, file_ops=rm.file_ops, failure_channel=rm.failure_channel
        )
        rm._event(
            "future_log_resumed", tp=str(tp), dir=str(found[0].parent), leo=self.futures[tp].log_end_offset
        )

    @staticmethod
    def _children(d: Path, name: str, suffix: str) -> list[Path]:
        try:
            return sorted(e for e in d.iterdir() if e.name.startswith(name + ".") and e.name.endswith(suffix))
        except OSError:
            return []

    # ------------------------------------------------------------------------------------- the mover
    def tick(self) -> None:
        """Copy up to ``replica.fetch.max.bytes`` into each future log; swap the ones caught up."""
        rm = self.rm
        for tp in sorted(self.futures):
            fut = self.futures[tp]
            p = rm.partition_or_none(tp)
            if p is None:
                continue  # the partition went offline or away: remove() handles the future log
            try:
                if copy_step(p.log, fut, rm.config.replica_fetch_max_bytes):
                    self._swap(p, fut)
            except KafkaStorageError as e:  # the failing dir is reported and goes offline on its own
                rm._event("log_dir_move_failed", tp=str(tp), error=str(e))
            except OSError as e:
                rm.failure_channel.maybe_add_offline_log_dir(
                    fut.dir.parent, f"Error while moving {tp} to {fut.dir.parent}", e
                )

    def _swap(self, p: Partition, fut: Log) -> None:
        """The future log becomes the partition's log (Kafka's ``replaceCurrentWithFutureLog``)."""
        rm = self.rm
        tp = p.tp
        cur = p.log
        if fut.log_start_offset < cur.log_start_offset:
            fut.delete_records(cur.log_start_offset)
        move_id = _move_id(fut.dir, FUTURE_SUFFIX)
        source, target = cur.dir.parent, fut.dir.parent
        cur.flush()
        fut.close()
        del self.futures[tp]
        retired = source / f"{log_dir_name(tp)}.{move_id}{DELETE_SUFFIX}"
        try:
            os.rename(cur.dir, retired)
            _fsync_dir(source)
        except OSError as e:
            rm.failure_channel.maybe_add_offline_log_dir(source, f"Error while renaming {cur.dir}", e)
            raise KafkaStorageError(f"could not retire {cur.dir}: {e}") from e
        try:
            os.rename(fut.dir, target / log_dir_name(tp))
            _fsync_dir(target)
        except OSError as e:
            rm.failure_channel.maybe_add_offline_log_dir(target, f"Error while renaming {fut.dir}", e)
            raise KafkaStorageError(f"could not rename {fut.dir}: {e}") from e
        p.log = Log.open(
            target / log_dir_name(tp),
            cur.config,
            clock=rm.clock,
            file_ops=rm.file_ops,
            failure_channel=rm.failure_channel,
        )
        # The old log's files stay open for reads already handed out (zero-copy fetch slices) until
        # file.delete.delay.ms has passed, as Kafka delays deleting a log.
        self._retired.append((cur, retired))
        delay = int(getattr(cur.config, "file_delete_delay_ms", 60_000))
        rm._set_timer(delay, lambda _now, entry=(cur, retired): self._delete_retired(entry))
        rm._hw_checkpoint.get(source, {}).pop((tp.topic, tp.partition), None)
        rm.checkpoint_high_watermarks()
        rm._event(
            "log_dir_moved", tp=str(tp), source=str(source), target=str(target), leo=p.log.log_end_offset
        )

    def _delete_retired(self, entry: tuple[Log, Path]) -> None:
        if entry in self._retired:
            self._retired.remove(entry)
        log, path = entry
        log.crash()  # closes the files; nothing is written into a dir about to go
        shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------------------------------ removal
    def remove(self, tp: TopicPartition, *, delete: bool) -> None:
        """Stop moving ``tp``: its future log is closed, and its files deleted if ``delete``."""
        fut = self.futures.pop(tp, None)
        if fut is None:
            return
        fut.crash()
        if delete:
            shutil.rmtree(fut.dir, ignore_errors=True)
        self.rm._event("future_log_removed", tp=str(tp), dir=str(fut.dir.parent), deleted=delete)

    def delete_leftovers(self, tp: TopicPartition) -> None:
        """``tp`` was deleted while not open here: its future and retired logs in the online dirs go too."""
        self.preferred_dirs.pop(tp, None)
        for d in self.rm.log_dirs:
            if self.rm.failure_channel.has_offline(d):
                continue
            for suffix in (FUTURE_SUFFIX, DELETE_SUFFIX):
                for e in self._children(d, log_dir_name(tp), suffix):
                    shutil.rmtree(e, ignore_errors=True)

    def on_dir_offline(self, dir: Path, offline: Iterable[TopicPartition]) -> None:
        """A dir failed: the moves into it stop, and so do those of the partitions that went offline
        (their files stay: the disk is not to be written)."""
        gone = set(offline)
        for tp in sorted(self.futures):
            if tp in gone or self.futures[tp].dir.parent == dir:
                self.remove(tp, delete=False)

    def close(self, *, crash: bool) -> None:
        """The broker stops (``crash``: without writing anything)."""
        for fut in self.futures.values():
            if crash:
                fut.crash()
            else:
                with contextlib.suppress(KafkaStorageError):  # its disk failed on the way out
                    fut.close()
        self.futures.clear()
        for log, _path in self._retired:
            log.crash()
        self._retired.clear()


# ------------------------------------------------------------------------------------- the copy
def copy_step(cur: Log, fut: Log, budget: int) -> bool:
    """One step of the mover: bring ``fut`` back to a prefix of ``cur``, then copy up to ``budget`` bytes
    of ``cur``'s batches into it; True once it ends where ``cur`` does."""
    reconcile(cur, fut)
    while fut.log_end_offset < cur.log_end_offset and budget > 0:
        data = cur.read(fut.log_end_offset, max(1, min(budget, 1 << 20))).records.read()
        if not data:
            break
        first = next(iter_batches(data))[1].base_offset
        if first < fut.log_end_offset:
            # The current log starts inside this batch (DeleteRecords moved its start there): the
            # future log takes the whole batch, as a follower does, and its start is raised at the swap.
            fut.truncate_fully_and_start_at(first)
        fut.append_as_follower(data)
        budget -= len(data)
    return fut.log_end_offset == cur.log_end_offset


def reconcile(cur: Log, fut: Log) -> None:
    """Cut the future log back to a prefix of the current one (the current may have been truncated)."""
    if cur.log_start_offset > fut.log_end_offset:
        fut.truncate_fully_and_start_at(cur.log_start_offset)
        return
    epoch = fut.leader_epoch_cache.latest_epoch
    keep = fut.log_end_offset
    if epoch != UNDEFINED_EPOCH:
        found, end = cur.leader_epoch_cache.end_offset_for(epoch, cur.log_end_offset)
        keep = min(keep, end) if found != UNDEFINED_EPOCH else cur.log_start_offset
    keep = min(keep, cur.log_end_offset)
    if keep < fut.log_end_offset:
        if keep <= fut.log_start_offset:
            fut.truncate_fully_and_start_at(cur.log_start_offset)
        else:
            fut.truncate_to(keep)


# ---------------------------------------------------------------------------------- DescribeLogDirs
def describe_log_dirs(
    rm: ReplicaManager, partitions: Iterable[TopicPartition] | None
) -> list[DescribeLogDirsResult]:
    """Kafka's ``describeLogDirs``: every configured dir, KAFKA_STORAGE_ERROR for an offline one; for an
    online one its volume's total and usable bytes and, of the partitions asked for (None: all), the
    current and future logs it holds with their size and lag."""
    wanted = None if partitions is None else set(partitions)
    logs: dict[Path, list[tuple[TopicPartition, Log, bool]]] = {}
    for p in rm.partitions():
        logs.setdefault(p.log.dir.parent, []).append((p.tp, p.log, False))
    for tp, fut in sorted(rm.alter_log_dirs.futures.items()):
        logs.setdefault(fut.dir.parent, []).append((tp, fut, True))
    out = []
    for d in rm.log_dirs:
        if rm.failure_channel.has_offline(d):
            out.append(DescribeLogDirsResult(error_code=KafkaStorageError.code, log_dir=str(d)))
            continue
        entries = []
        for tp, log, future in logs.get(d, []):
            if wanted is not None and tp not in wanted:
                continue
            try:
                entries.append(
                    DescribeLogDirsPartition(
                        tp=tp,
                        partition_size=log.size_bytes,
                        offset_lag=_offset_lag(rm, tp, log, future),
                        is_future=future,
                    )
                )
            except KafkaError:
                continue  # closed under us by a failure: the next describe shows the dir offline
        try:
            usage = shutil.disk_usage(d)
            total, usable = usage.total, usage.free
        except OSError:
            out.append(DescribeLogDirsResult(error_code=KafkaStorageError.code, log_dir=str(d)))
            continue
        out.append(
            DescribeLogDirsResult(
                log_dir=str(d),
                partitions=tuple(sorted(entries, key=lambda e: (e.tp, e.is_future))),
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return out


def _offset_lag(rm: ReplicaManager, tp: TopicPartition, log: Log, future: bool) -> int:
    p = rm.partition_or_none(tp)
    if p is None:
        return INVALID_OFFSET_LAG
    if future:
        return p.log.log_end_offset - log.log_end_offset
    return max(p.high_watermark - log.log_end_offset, 0)
