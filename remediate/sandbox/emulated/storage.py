"""A partition's log on disk, the way a Kafka broker keeps it.

Each partition directory holds an append-only record log (`00000000000000000000.log`), the
`leader-epoch-checkpoint` and, once the broker knows the topic id, `partition.metadata`.
The record log is Kafka-shaped (batches with base offset, leader epoch and CRC) but not
byte-compatible with Kafka's record format: nothing in this project reads it but the sandbox.

A torn batch at the end of the log (a broker killed mid-write) is cut off on load, as Kafka's
log recovery does after an unclean shutdown.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

from remediate.formats.logdir import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    EpochEntry,
    encode_leader_epoch_checkpoint,
    encode_partition_metadata,
    parse_leader_epoch_checkpoint,
    parse_partition_metadata,
)
from remediate.formats.topic_id import TopicId

LOG_FILE = "00000000000000000000.log"
INDEX_FILES = ("00000000000000000000.index", "00000000000000000000.timeindex")
# base offset, length of the rest, leader epoch, magic, crc32, record count
_BATCH_HEADER = struct.Struct(">qiibIi")
_HEADER_AFTER_LENGTH = _BATCH_HEADER.size - 12
MAGIC = 2
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True)
class Record:
    offset: int
    leader_epoch: int
    key: str | None
    value: str


def write_atomically(path: Path, data: bytes) -> None:
    """Write `path` the way Kafka writes its small files: a .tmp file, fsync, rename."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _encode_records(records: list[tuple[str | None, str]]) -> bytes:
    out = bytearray()
    for key, value in records:
        key_bytes = key.encode("utf-8") if key is not None else None
        value_bytes = value.encode("utf-8")
        out += struct.pack(">i", -1 if key_bytes is None else len(key_bytes))
        if key_bytes is not None:
            out += key_bytes
        out += struct.pack(">i", len(value_bytes)) + value_bytes
    return bytes(out)


def _encode_batch(base: int, epoch: int, records: list[tuple[str | None, str]]) -> bytes:
    body = _encode_records(records)
    count = len(records)
    crc = zlib.crc32(struct.pack(">i", count) + body)
    return (
        _BATCH_HEADER.pack(base, _HEADER_AFTER_LENGTH + len(body), epoch, MAGIC, crc, count) + body
    )


def _decode_records(body: bytes, count: int) -> list[tuple[str | None, str]]:
    result: list[tuple[str | None, str]] = []
    pos = 0
    for _ in range(count):
        (key_len,) = struct.unpack_from(">i", body, pos)
        pos += 4
        key = None
        if key_len >= 0:
            key = body[pos : pos + key_len].decode("utf-8")
            pos += key_len
        (value_len,) = struct.unpack_from(">i", body, pos)
        pos += 4
        value = body[pos : pos + value_len].decode("utf-8")
        pos += value_len
        result.append((key, value))
    return result


class LeaderEpochCache:
    """Epoch -> start offset, persisted to leader-epoch-checkpoint on every change.

    Follows kafka.server.epoch.LeaderEpochFileCache (2.8.2): entries stay strictly increasing
    in epoch and start offset, truncation from the end drops entries at or past the new end,
    and OffsetsForLeaderEpoch answers with the start offset of the next higher epoch.
    """

    def __init__(self, path: Path, entries: list[EpochEntry]) -> None:
        self._path = path
        self.entries = entries

    @classmethod
    def load(cls, partition_dir: Path) -> LeaderEpochCache:
        path = partition_dir / LEADER_EPOCH_CHECKPOINT
        entries: list[EpochEntry] = []
        if path.exists():
            entries = parse_leader_epoch_checkpoint(path.read_bytes(), source=str(path))
        return cls(path, entries)

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1].epoch if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; entries it contradicts are dropped."""
        if self.entries:
            latest = self.entries[-1]
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return
        # maybeTruncateNonMonotonicEntries: drop from the end what is not below the new entry.
        while self.entries and (
            self.entries[-1].epoch >= epoch or self.entries[-1].start_offset >= start_offset
        ):
            self.entries.pop()
        self.entries.append(EpochEntry(epoch, start_offset))
        self.flush()

    def truncate_from_end(self, end_offset: int) -> None:
        kept = [e for e in self.entries if e.start_offset < end_offset]
        if kept != self.entries:
            self.entries = kept
            self.flush()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch found, offset where the requested epoch ended)."""
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.entries[-1].epoch:
            return epoch, log_end_offset
        higher = next((e for e in self.entries if e.epoch > epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = [e for e in self.entries if e.epoch <= epoch]
        if not floor:
            # Older than anything kept: answer with the first known start offset.
            return epoch, higher.start_offset
        return floor[-1].epoch, higher.start_offset

    def flush(self) -> None:
        write_atomically(self._path, encode_leader_epoch_checkpoint(self.entries))


class PartitionLog:
    """One replica's log: records, leader epochs and topic id, all on disk."""

    def __init__(self, directory: Path, topic: str, partition: int) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.lock = threading.RLock()
        self.records: list[Record] = []
        self.topic_id: TopicId | None = None
        self.epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT, [])
        self._file = directory / LOG_FILE

    # -- creation and loading -----------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, topic: str, partition: int) -> PartitionLog:
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, topic, partition)
        log._file.touch()
        for name in INDEX_FILES:
            (directory / name).touch()
        log.epochs.flush()
        return log

    @classmethod
    def load(cls, directory: Path, topic: str, partition: int) -> PartitionLog:
        """Load a replica from disk. A malformed partition.metadata raises FormatError."""
        log = cls(directory, topic, partition)
        metadata = directory / PARTITION_METADATA
        if metadata.exists():
            log.topic_id = parse_partition_metadata(
                metadata.read_bytes(), source=str(metadata)
            ).topic_id
        log.epochs = LeaderEpochCache.load(directory)
        log._load_records()
        log.epochs.truncate_from_end(log.log_end_offset)
        return log

    def _load_records(self) -> None:
        if not self._file.exists():
            self._file.touch()
            return
        data = self._file.read_bytes()
        pos = 0
        valid_end = 0
        while pos + _BATCH_HEADER.size <= len(data):
            base, length, epoch, magic, crc, count = _BATCH_HEADER.unpack_from(data, pos)
            end = pos + 12 + length
            if magic != MAGIC or length < _HEADER_AFTER_LENGTH or end > len(data):
                break
            body = data[pos + _BATCH_HEADER.size : end]
            if zlib.crc32(struct.pack(">i", count) + body) != crc:
                break
            try:
                decoded = _decode_records(body, count)
            except (struct.error, UnicodeDecodeError):
                break
            self.records.extend(
                Record(base + i, epoch, key, value) for i, (key, value) in enumerate(decoded)
            )
            pos = end
            valid_end = end
        if valid_end < len(data):
            with open(self._file, "r+b") as handle:
                handle.truncate(valid_end)

    def rename_dir(self, directory: Path) -> None:
        """Move the log to `directory` (a rename on the same file system), as Log.renameDir."""
        with self.lock:
            os.rename(self.dir, directory)
            self.dir = directory
            self._file = directory / LOG_FILE
            self.epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT, self.epochs.entries)

    # -- topic id ---------------------------------------------------------------------------

    def assign_topic_id(self, topic_id: TopicId) -> None:
        """Record the id and write partition.metadata when it is absent (never overwrite)."""
        with self.lock:
            self.topic_id = topic_id
            path = self.dir / PARTITION_METADATA
            if not path.exists():
                write_atomically(path, encode_partition_metadata(topic_id))

    # -- records ----------------------------------------------------------------------------

    @property
    def size_bytes(self) -> int:
        """The log's size on disk, as Kafka's DescribeLogDirs reports a replica's."""
        try:
            return self._file.stat().st_size
        except OSError:
            return 0

    @property
    def log_end_offset(self) -> int:
        return self.records[-1].offset + 1 if self.records else 0

    def append(self, records: list[tuple[str | None, str]], leader_epoch: int) -> int:
        """Append as leader: every record gets `leader_epoch`. Returns the base offset."""
        with self.lock:
            base = self.log_end_offset
            self._write_batch(base, leader_epoch, records)
            return base

    def append_replicated(self, records: list[Record]) -> None:
        """Append as follower: keep the leader's offsets and epochs.

        Records that do not continue the log without a gap are refused before anything is
        written, so a refused fetch leaves the log as it was.
        """
        with self.lock:
            expected = self.log_end_offset
            for record in records:
                if record.offset != expected:
                    follows = (
                        f"log end {expected}"
                        if expected == self.log_end_offset
                        else f"offset {expected - 1}"
                    )
                    raise ValueError(
                        f"{self.topic}-{self.partition}: fetched offset {record.offset}"
                        f" does not follow {follows}"
                    )
                expected += 1
            for group in _group_by_epoch(records):
                self._write_batch(
                    group[0].offset, group[0].leader_epoch, [(r.key, r.value) for r in group]
                )

    def _write_batch(self, base: int, epoch: int, records: list[tuple[str | None, str]]) -> None:
        if not records:
            return
        self.epochs.assign(epoch, base)
        with open(self._file, "ab") as handle:
            handle.write(_encode_batch(base, epoch, records))
        self.records.extend(
            Record(base + i, epoch, key, value) for i, (key, value) in enumerate(records)
        )

    def read(self, offset: int, max_records: int) -> list[Record]:
        with self.lock:
            start = offset - (self.records[0].offset if self.records else 0)
            start = max(start, 0)
            return self.records[start : start + max_records]

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or after `offset` (Kafka's log truncation)."""
        with self.lock:
            if offset >= self.log_end_offset:
                return
            self.records = [r for r in self.records if r.offset < offset]
            self._rewrite()
            self.epochs.truncate_from_end(offset)

    def _rewrite(self) -> None:
        out = b"".join(
            _encode_batch(g[0].offset, g[0].leader_epoch, [(r.key, r.value) for r in g])
            for g in _group_by_epoch(self.records)
        )
        write_atomically(self._file, out)


def _group_by_epoch(records: list[Record]) -> list[list[Record]]:
    groups: list[list[Record]] = []
    for record in records:
        if (
            groups
            and groups[-1][-1].leader_epoch == record.leader_epoch
            and groups[-1][-1].offset + 1 == record.offset
        ):
            groups[-1].append(record)
        else:
            groups.append([record])
    return groups
