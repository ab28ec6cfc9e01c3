"""What a broker inventory holds, as the parser gives it: log dirs, their child directories,
the two files of each, and the state-change log's tail. Frozen dataclasses, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from remediate.formats.logdir import PartitionDir

LogDirState = Literal["present", "missing", "not_a_directory", "unreadable"]
FileStateName = Literal["absent", "present", "unreadable"]
StateChangeLogState = Literal["missing", "unreadable", "present"]


@dataclass(frozen=True)
class FileState:
    """One file of a partition directory as the command saw it.

    `content` is the lines that were read, joined with b"\\n" (see grammar.py);
    `truncated` says it is less than the whole file; `line_count` is the file's total number of
    lines when known. `reason` says why an unreadable file was not read: "directory",
    "symlink", "special" (not a regular file) or "error" (reading it failed).
    """

    state: FileStateName
    content: bytes | None
    truncated: bool = False
    line_count: int | None = None
    reason: str | None = None


ABSENT = FileState("absent", None)


@dataclass(frozen=True)
class DirEntry:
    """An immediate child directory of a log dir.

    `name` holds the raw bytes of the directory name as `os.fsdecode` gives them:
    `os.fsencode(name)` is exactly what is on disk. `partition` is set when Kafka would load the
    directory as a partition (the name parses and the topic is a legal name); otherwise
    `name_problem` says why not.
    """

    log_dir: str
    name: str
    partition: PartitionDir | None
    name_problem: str | None
    metadata: FileState
    epoch_checkpoint: FileState


@dataclass(frozen=True)
class LogDirInfo:
    """One configured log dir. `entries` are sorted by the raw bytes of their names.

    "unreadable" with entries: the listing was incomplete (find reported an error).
    """

    path: str
    state: LogDirState
    entries: tuple[DirEntry, ...] = ()


@dataclass(frozen=True)
class StateChangeTail:
    """What the command saw of the broker's state-change log: the mismatch lines of its tail.

    `tail_status` is tail's exit status (non-zero: the read failed part way, `lines` may be
    incomplete); `cut` says the file was longer than the bound (its first line was dropped).
    """

    state: StateChangeLogState
    lines: tuple[bytes, ...] = ()
    tail_status: int = 0
    cut: bool = False


@dataclass(frozen=True)
class Inventory:
    """What one broker has in its log dirs, in the order the log dirs were given.

    `awk_keeps_nul` is False when the broker's awk cannot hold NUL bytes (busybox, the
    one-true-awk): a content line with a NUL may then have lost the bytes after it.
    `state_change` is None when the command was not asked to read a state-change log.
    """

    log_dirs: tuple[LogDirInfo, ...]
    awk_keeps_nul: bool = True
    state_change: StateChangeTail | None = None
