"""The intra-broker replica move (AlterReplicaLogDirs): a future log in another log dir of the
same broker, copied from the current log on the broker's own disk, swapped in once it has
caught up. DescribeLogDirs tells where each replica is and whether a future log exists.

Follows Kafka 2.8.2, where the move matters to the repair (docs/sandbox.md):
- ReplicaManager.alterReplicaLogDirs (ReplicaManager.scala:734-805) checks only that the
  destination is a known, online log dir and that the broker hosts the partition: not its
  leadership, its epoch, its ISR or its topic id.
- Partition.maybeCreateFutureReplica -> LogManager.getOrCreateLog builds the future log in
  `<topic>-<partition>.<uuid>-future` without a topic id (LogManager.scala:781-830); 3.x builds
  it with the current log's id (KAFKA-12426, 3.0.0), which it writes into the future dir.
- ReplicaAlterLogDirsThread copies up to the current log's end, whatever its high watermark
  (FetchLogEnd isolation); the future log's leader-epoch cache holds the epochs of the records
  it copied and no other (an epoch under which nothing was written is not in it).
- Partition.maybeReplaceCurrentWithFutureReplica / LogManager.replaceCurrentWithFutureLog
  (Partition.scala:489-516, LogManager.scala:920-965): once the future log's end is the
  current one's, the future dir is renamed `<topic>-<partition>` in the destination, only the
  high watermark is carried over, the Partition's log becomes the future log (on 2.8 with no
  topic id, in memory or on disk), and the old dir is renamed `.<uuid>-delete`, deleted after
  `file.delete.delay.ms`.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from remediate.formats.logdir import partition_dir_name
from remediate.sandbox.emulated import wire
from remediate.sandbox.emulated.storage import PartitionLog

TopicPartition = tuple[str, int]
log = logging.getLogger("kafka.server.ReplicaAlterLogDirsManager")
COPY_BATCH = 500


class MoveHost(Protocol):
    """What the move needs of the broker's replica manager."""

    kafka_version: str
    lock: threading.RLock

    def online_log_dirs(self) -> list[Path]: ...

    def all_log_dirs_online(self) -> bool: ...

    def hosts(self, tp: TopicPartition) -> bool: ...

    def current_log(self, tp: TopicPartition) -> PartitionLog | None: ...

    def swap_in(self, tp: TopicPartition, future: PartitionLog) -> PartitionLog | None: ...


@dataclass
class FutureLog:
    tp: TopicPartition
    log: PartitionLog


class LogDirMover:
    """The future logs of one broker and the thread that copies and swaps them."""

    def __init__(self, host: MoveHost, *, delete_delay_s: float, stopping: threading.Event) -> None:
        self.host = host
        self.delete_delay_s = delete_delay_s
        self.stopping = stopping
        self.futures: dict[TopicPartition, FutureLog] = {}
        self._wakeup = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-dir-mover", daemon=True)
        self._thread.start()

    def adopt(self, tp: TopicPartition, future: PartitionLog) -> None:
        """A future log found on disk at startup: the copy goes on once the partition is
        online again (ReplicaManager.maybeAddLogDirFetchers)."""
        self.futures[tp] = FutureLog(tp, future)
        self._wakeup.set()

    # -- requests (called under the replica manager's lock) -----------------------------------

    def alter(self, request: dict[str, Any]) -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        online = {str(d): d for d in self.host.online_log_dirs()}
        for item in request["dirs"]:
            destination = str(item["path"])
            for topic, partition in item["partitions"]:
                tp = (topic, partition)
                base = {"topic": topic, "partition": partition}
                results.append({**base, "error": self._alter_one(tp, destination, online)})
        self._wakeup.set()
        return {"error": wire.NONE, "results": results}

    def _alter_one(self, tp: TopicPartition, destination: str, online: dict[str, Path]) -> int:
        if destination not in online:
            return wire.LOG_DIR_NOT_FOUND
        if not self.host.all_log_dirs_online():
            return wire.KAFKA_STORAGE_ERROR
        if not self.host.hosts(tp):
            # getPartitionOrException: a partition the broker has never heard of.
            return wire.UNKNOWN_TOPIC_OR_PARTITION
        current = self.host.current_log(tp)
        if current is None:
            # Hosted, but no log attached: every LeaderAndIsr for it was refused since the
            # broker started (3.x after the incident), so there is nothing to move.
            return wire.REPLICA_NOT_AVAILABLE
        target = online[destination]
        existing = self.futures.get(tp)
        if existing is not None:
            if existing.log.dir.parent == target:
                return wire.NONE
            # A new destination: the copy under way is dropped (futureReplicaDirChanged).
            del self.futures[tp]
            shutil.rmtree(existing.log.dir, ignore_errors=True)
        if current.dir.parent == target:
            return wire.NONE
        name = f"{partition_dir_name(*tp)}.{uuid.uuid4().hex}-future"
        future = PartitionLog.create(target / name, tp[0], tp[1])
        if self.host.kafka_version != "2.8" and current.topic_id is not None:
            future.assign_topic_id(current.topic_id)
        log.info("Created log for partition %s-%d in %s (future)", tp[0], tp[1], target)
        self.futures[tp] = FutureLog(tp, future)
        return wire.NONE

    def describe(
        self, log_dirs: list[tuple[Path, bool]], logs: dict[TopicPartition, PartitionLog]
    ) -> Any:
        """Per log dir (path, offline): each replica in it, its size in bytes, and whether it
        is a move's future log (DescribeLogDirs); an offline dir answers with an error."""
        described = []
        for directory, offline in log_dirs:
            if offline:
                described.append(
                    {"path": str(directory), "error": wire.KAFKA_STORAGE_ERROR, "partitions": []}
                )
                continue
            entries = [
                {"topic": tp[0], "partition": tp[1], "size": current.size_bytes, "future": False}
                for tp, current in sorted(logs.items())
                if current.dir.parent == directory
            ]
            entries += [
                {"topic": tp[0], "partition": tp[1], "size": f.log.size_bytes, "future": True}
                for tp, f in sorted(self.futures.items())
                if f.log.dir.parent == directory
            ]
            described.append({"path": str(directory), "error": wire.NONE, "partitions": entries})
        return described

    # -- the copy ------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self.stopping.is_set():
            self._wakeup.wait(0.05)
            self._wakeup.clear()
            for tp in list(self.futures):
                if self.stopping.is_set():
                    return
                try:
                    self._copy_some(tp)
                except OSError:
                    log.exception("Error while copying %s-%d to its future log", *tp)

    def _copy_some(self, tp: TopicPartition) -> None:
        with self.host.lock:
            future = self.futures.get(tp)
            current = self.host.current_log(tp)
            if future is None or current is None:
                return
            records = current.read(future.log.log_end_offset, COPY_BATCH)
            if records:
                future.log.append_replicated(records)
                self._wakeup.set()
                return
            if future.log.log_end_offset != current.log_end_offset:
                return
            del self.futures[tp]
            old = self.host.swap_in(tp, future.log)
            if old is not None:
                self._schedule_delete(old.dir)

    def _schedule_delete(self, directory: Path) -> None:
        deleted = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}-delete")
        os.rename(directory, deleted)

        def delete() -> None:
            shutil.rmtree(deleted, ignore_errors=True)

        timer = threading.Timer(self.delete_delay_s, delete)
        timer.daemon = True
        timer.start()
