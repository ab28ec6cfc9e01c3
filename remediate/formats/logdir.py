"""Files in a Kafka log directory: what each looks like and exactly what Kafka accepts.

- `partition.metadata` (kafka.server.PartitionMetadataFile, 2.8.2 and 3.4.1)
- checkpoint files: `leader-epoch-checkpoint` per partition; `replication-offset-checkpoint`,
  `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`
  in the log-dir root (kafka.server.checkpoints.CheckpointFile)
- `meta.properties` (kafka.server.BrokerMetadataCheckpoint)
- partition directory names (kafka.log.Log.parseTopicPartitionName) and topic names
  (org.apache.kafka.common.internals.Topic.validate)

Every reader takes raw bytes plus the path they came from and either returns a value or raises
FormatError naming that path and the field at fault.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeVar

from remediate.errors import FormatError
from remediate.formats.javanum import parse_java_int, parse_java_long
from remediate.formats.properties import dump_properties, load_properties
from remediate.formats.topic_id import TopicId, parse_topic_id

PARTITION_METADATA = "partition.metadata"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
ROOT_CHECKPOINTS = (
    REPLICATION_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
CHECKPOINT_VERSION = 0
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# Java's \s: space, \t, \n, \x0B, \f, \r.
_JAVA_SPACE = " \t\n\x0b\f\r"
_COLON_SPACES = re.compile(f":[{_JAVA_SPACE}]+")
_SPACES = re.compile(f"[{_JAVA_SPACE}]+")


def java_lines(text: str) -> list[str]:
    """Lines as BufferedReader.readLine returns them.

    A line ends at \\n, \\r or \\r\\n; a final terminator does not start an empty line.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def java_split(pattern: re.Pattern[str], text: str) -> list[str]:
    """String.split(regex) with limit 0: trailing empty strings are removed."""
    if not pattern.search(text):
        return [text]
    parts = pattern.split(text)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _decode_utf8(data: bytes, *, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(
            source, "encoding", "UTF-8 text", data[max(0, exc.start - 8) : exc.end + 8]
        ) from exc


# -- partition.metadata ------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionMetadata:
    version: int
    topic_id: TopicId


# Kafka reads partition.metadata through a BufferedReader, which decodes the file 8 KiB at a
# time: bytes past the chunk that completes the second line are never decoded.
READER_CHUNK_BYTES = 8192
_LINE_END = re.compile("\r\n|\r|\n")


def _first_two_lines(data: bytes, *, source: str, whole: bool) -> str:
    """The text Kafka's reader decodes to read two lines: whole 8 KiB chunks, strictly as UTF-8,
    until the second line has ended (or the data has). `whole`: `data` is the entire file; else
    it is the file's start, and may end inside a character."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    text = ""
    for start in range(0, max(len(data), 1), READER_CHUNK_BYTES):
        chunk = data[start : start + READER_CHUNK_BYTES]
        last = start + READER_CHUNK_BYTES >= len(data)
        try:
            text += decoder.decode(chunk, final=last and whole)
        except UnicodeDecodeError as exc:
            at = start + exc.start
            raise FormatError(
                source, "encoding", "UTF-8 text", data[max(0, at - 8) : start + exc.end + 8]
            ) from exc
        ends = [m.end() for m in _LINE_END.finditer(text)]
        # "\r" at the very end may be the first half of "\r\n": the line has ended either way.
        if len(ends) >= 2:
            return text[: ends[1]]
    if not whole:
        raise FormatError(source, "length", "two lines within what the inventory reads", len(data))
    return text


def parse_partition_metadata(data: bytes, *, source: str, whole: bool = True) -> PartitionMetadata:
    """Accept exactly what Kafka's PartitionMetadataReadBuffer accepts.

    Line 1 splits on `:\\s+` into two parts whose second is the Java int 0; line 2 splits the
    same way and its second part must be a non-zero topic id. Keys are not checked; what follows
    the second line is never read (nor decoded past the 8 KiB chunk that ends it), as in Kafka.
    `whole=False`: `data` is only the file's start (the inventory's read limit); it is enough
    when the two lines end within it.
    """
    text = _first_two_lines(data, source=source, whole=whole)
    lines = java_lines(text)
    if not lines:
        raise FormatError(source, "version", "'version: 0' on the first line", data)
    version_parts = java_split(_COLON_SPACES, lines[0])
    if len(version_parts) != 2:
        raise FormatError(source, "version", "'version: 0' on the first line", lines[0])
    version = parse_java_int(version_parts[1])
    if version is None:
        raise FormatError(source, "version", "'version: 0' on the first line", lines[0])
    if version != 0:
        raise FormatError(source, "version", "version 0", version)
    if len(lines) < 2:
        raise FormatError(source, "topic_id", "'topic_id: <id>' on the second line", None)
    id_parts = java_split(_COLON_SPACES, lines[1])
    if len(id_parts) != 2:
        raise FormatError(source, "topic_id", "'topic_id: <id>' on the second line", lines[1])
    topic_id = parse_topic_id(id_parts[1], source=source, field="topic_id")
    if topic_id.is_zero:
        raise FormatError(source, "topic_id", "a non-zero topic id", id_parts[1])
    return PartitionMetadata(version=0, topic_id=topic_id)


def encode_partition_metadata(topic_id: TopicId) -> bytes:
    """Exactly Kafka's bytes: two lines, no trailing newline."""
    return f"version: 0\ntopic_id: {topic_id}".encode("ascii")


# -- checkpoint files --------------------------------------------------------------------------


_T = TypeVar("_T")


@dataclass(frozen=True, order=True)
class EpochEntry:
    epoch: int
    start_offset: int


def _read_checkpoint(
    data: bytes, *, source: str, parse_entry: Callable[[str], _T | None], entry_format: str
) -> list[_T]:
    """The entries of a checkpoint file, read as CheckpointReadBuffer does.

    An empty file, or one with only the version line, holds no entries. Every entry line is
    parsed before the count is compared with the number of entries, as in Kafka; a negative
    count fails first (3.x sizes its ArrayList with it).
    """
    lines = java_lines(_decode_utf8(data, source=source))
    if not lines:
        return []
    version = parse_java_int(lines[0])
    if version is None:
        raise FormatError(source, "version", "the integer 0 on the first line", lines[0])
    if version != CHECKPOINT_VERSION:
        raise FormatError(source, "version", "checkpoint version 0", version)
    if len(lines) < 2:
        return []
    count = parse_java_int(lines[1])
    if count is None or count < 0:
        raise FormatError(source, "count", "the number of entries on the second line", lines[1])
    entries = []
    for line in lines[2:]:
        entry = parse_entry(line)
        if entry is None:
            raise FormatError(source, "entry", entry_format, line)
        entries.append(entry)
    if count != len(entries):
        raise FormatError(source, "count", f"{count} entries", f"{len(entries)} entries")
    return entries


def _epoch_entry(line: str) -> EpochEntry | None:
    parts = java_split(_SPACES, line)
    if len(parts) != 2:
        return None
    epoch, offset = parse_java_int(parts[0]), parse_java_long(parts[1])
    return None if epoch is None or offset is None else EpochEntry(epoch, offset)


def parse_leader_epoch_checkpoint(data: bytes, *, source: str) -> list[EpochEntry]:
    return _read_checkpoint(
        data, source=source, parse_entry=_epoch_entry, entry_format="'<epoch> <startOffset>'"
    )


def encode_leader_epoch_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    rows = list(entries)
    body = "".join(f"{e.epoch} {e.start_offset}\n" for e in rows)
    return f"{CHECKPOINT_VERSION}\n{len(rows)}\n{body}".encode("ascii")


def _offset_entry(line: str) -> tuple[tuple[str, int], int] | None:
    parts = java_split(_SPACES, line)
    if len(parts) != 3:
        return None
    partition, offset = parse_java_int(parts[1]), parse_java_long(parts[2])
    return None if partition is None or offset is None else ((parts[0], partition), offset)


def parse_offset_checkpoint(data: bytes, *, source: str) -> dict[tuple[str, int], int]:
    """Offsets by (topic, partition); a later line for the same partition wins, as in Kafka's
    toMap, while the count still counts lines."""
    entries = _read_checkpoint(
        data,
        source=source,
        parse_entry=_offset_entry,
        entry_format="'<topic> <partition> <offset>'",
    )
    return dict(entries)


def encode_offset_checkpoint(offsets: Mapping[tuple[str, int], int]) -> bytes:
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(offsets.items()))
    return f"{CHECKPOINT_VERSION}\n{len(offsets)}\n{body}".encode()


# -- meta.properties ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MetaProperties:
    broker_id: int
    cluster_id: str | None
    version: int = 0


def parse_meta_properties(data: bytes, *, source: str) -> MetaProperties:
    props = load_properties(data, source=source)
    # RawMetaProperties.version: `intValue(VersionKey).getOrElse(0)`.
    version = parse_java_int(props["version"]) if "version" in props else 0
    if version is None:
        raise FormatError(source, "version", "version=0 or version=1", props.get("version"))
    if version == 0:
        key = "broker.id"
    elif version == 1:
        key = "node.id"
        if "cluster.id" not in props:
            raise FormatError(source, "cluster.id", "a cluster id (required in version 1)", None)
    else:
        raise FormatError(source, "version", "version=0 or version=1", version)
    broker_id = parse_java_int(props.get(key, ""))
    if broker_id is None:
        raise FormatError(source, key, "an integer broker id", props.get(key))
    return MetaProperties(broker_id=broker_id, cluster_id=props.get("cluster.id"), version=version)


def encode_meta_properties(meta: MetaProperties, *, now: datetime | None = None) -> bytes:
    values = {"version": str(meta.version), "broker.id": str(meta.broker_id)}
    if meta.cluster_id is not None:
        values = {"cluster.id": meta.cluster_id, **values}
    return dump_properties(values, now=now)


# -- partition directories and topic names -----------------------------------------------------

DirKind = Literal["live", "delete", "future", "stray"]
_SUFFIXES: dict[str, DirKind] = {"-delete": "delete", "-future": "future", "-stray": "stray"}
_NOT_SPACE = f"[^{_JAVA_SPACE}]+"
_SUFFIX_PATTERNS = {
    suffix: re.compile(f"({_NOT_SPACE})-({_NOT_SPACE})\\.({_NOT_SPACE}){suffix}")
    for suffix in _SUFFIXES
}


@dataclass(frozen=True)
class PartitionDir:
    """A log-dir entry Kafka would load as a partition: `<topic>-<partition>[.<id>-<suffix>]`."""

    name: str
    topic: str
    partition: int
    kind: DirKind = "live"


def parse_partition_dir(name: str, *, source: str) -> PartitionDir:
    """Split a directory name as Log.parseTopicPartitionName does (at the LAST '-').

    `-delete`, `-future` (and 3.6+ `-stray`) directories carry `.<unique id>` before the
    suffix. The topic part is not validated here; see `validate_topic_name`.
    """
    expected = "<topic>-<partition> or <topic>-<partition>.<id>-delete|-future|-stray"
    if not name or "-" not in name:
        raise FormatError(source, "directory name", expected, name)
    kind: DirKind = "live"
    base = name
    for suffix, suffix_kind in _SUFFIXES.items():
        if name.endswith(suffix):
            if not _SUFFIX_PATTERNS[suffix].fullmatch(name):
                raise FormatError(source, "directory name", expected, name)
            kind = suffix_kind
            base = name[: name.rindex(".")]
            break
    index = base.rindex("-") if "-" in base else -1
    topic, partition_text = base[:index], base[index + 1 :]
    if index < 0 or not topic or not partition_text:
        raise FormatError(source, "directory name", expected, name)
    partition = parse_java_int(partition_text)
    if partition is None:
        raise FormatError(source, "partition", "an integer after the last '-'", partition_text)
    return PartitionDir(name=name, topic=topic, partition=partition, kind=kind)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_LENGTH = 249


def topic_name_problem(name: str) -> str | None:
    """Why `name` is not a legal Kafka topic name, or None when it is."""
    if not name:
        return "is empty"
    if name in (".", ".."):
        return "cannot be '.' or '..'"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"is longer than {MAX_TOPIC_LENGTH} characters"
    if not _LEGAL_TOPIC.fullmatch(name):
        return "contains characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def validate_topic_name(name: str, *, source: str) -> str:
    problem = topic_name_problem(name)
    if problem is not None:
        raise FormatError(source, "topic", f"a legal topic name (this one {problem})", name)
    return name
