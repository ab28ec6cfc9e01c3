"""Kafka's verdicts on what an inventory found: whether a directory is a partition Kafka would
load, and which topic id its partition.metadata holds (or why it holds none). Pure."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Literal

from remediate.collect.inventory.model import DirEntry
from remediate.errors import FormatError
from remediate.formats.logdir import (
    PARTITION_METADATA,
    PartitionDir,
    parse_partition_dir,
    parse_partition_metadata,
    topic_name_problem,
)

MetadataState = Literal["ok", "missing", "corrupt", "unreadable"]


@dataclass(frozen=True)
class MetadataFinding:
    """partition.metadata judged by Kafka's rules: the id it holds, or why it holds none."""

    state: MetadataState
    topic_id: str | None
    problem: str | None


def partition_of(name: str) -> tuple[PartitionDir | None, str | None]:
    """(the partition Kafka would load from a directory of this name, None) or (None, why it
    would not load one)."""
    try:
        partition = parse_partition_dir(name, source="directory name")
    except FormatError as exc:
        return None, f"not a partition directory: {exc.field}: expected {exc.expected}"
    problem = topic_name_problem(partition.topic)
    if problem is not None:
        return None, f"not a partition directory: the topic name {problem}"
    return partition, None


def _printable_path(path: str) -> str:
    return path if path.isprintable() else repr(path)


def classify_metadata(entry: DirEntry) -> MetadataFinding:
    """Judge an entry's partition.metadata by Kafka's rules (`parse_partition_metadata`).

    The content is the lines awk read joined with b"\\n" (see grammar.py): a final newline is
    lost and "\\r" stays at line ends, neither of which changes Kafka's verdict.
    A file longer than the inventory reads is judged on what was read, as Kafka judges it on
    its first two lines: it is corrupt only when those do not end within it.
    """
    metadata = entry.metadata
    if metadata.state == "absent":
        return MetadataFinding("missing", None, None)
    if metadata.state == "unreadable":
        reason = f"{PARTITION_METADATA} could not be read ({metadata.reason or 'unknown'})"
        return MetadataFinding("unreadable", None, reason)
    if metadata.content is not None:
        topic_id = accepted_topic_id(metadata.content, not metadata.truncated)
        if topic_id is not None:
            return MetadataFinding("ok", topic_id, None)
    source = _printable_path(os.path.join(entry.log_dir, entry.name, PARTITION_METADATA))
    if metadata.content is None:
        return MetadataFinding(
            "corrupt", None, f"{source}: longer than the inventory reads (truncated)"
        )
    try:
        parse_partition_metadata(metadata.content, source=source, whole=not metadata.truncated)
    except FormatError as exc:
        return MetadataFinding("corrupt", None, str(exc))
    raise AssertionError("unreachable: the file parsed once and not twice")  # pragma: no cover


# Every replica of a topic holds the same partition.metadata, so a broker's thousands of files
# are a few hundred distinct contents: each is judged once. Only the verdicts of files Kafka
# accepts are kept (a corrupt one is judged again, to name its path in the problem).
@functools.lru_cache(maxsize=1 << 16)
def accepted_topic_id(content: bytes, whole: bool) -> str | None:
    """The topic id of a partition.metadata Kafka accepts, None for one it refuses."""
    try:
        parsed = parse_partition_metadata(content, source="partition.metadata", whole=whole)
    except FormatError:
        return None
    return str(parsed.topic_id)
