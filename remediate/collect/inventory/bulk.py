"""The common inventory, read in bulk: a broker whose directories are Kafka partitions.

A broker's inventory is tens of thousands of records, nearly all of two kinds: `d` (a
directory with a plain name) and `f` (a plain-text file of it, its lines on the record).
Reading them one line at a time, through the general parser's objects, costs seconds of
Python across a large cluster. Here each log dir's plain records are matched by two regular
expressions at once, and each directory becomes its snapshot row directly. The few other
records (hex names or contents, unreadable files) are read by the general parser's own record
readers (parser.py), and their directories take the general path to their rows (rows.py).

`read_rows` gives exactly the rows the general path gives, or None whenever the output is not
whole and well-formed: the general parser then reads it, and refuses it with the line that is
wrong (read.py). tests/collect/test_plain_inventory.py holds the two to the same result.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

from remediate.collect.inventory.classify import accepted_topic_id, classify_metadata, partition_of
from remediate.collect.inventory.grammar import (
    END_RE,
    EPOCH,
    FORMAT_VERSION,
    HEADER_RE,
    J_RE,
    L_RE,
    METADATA,
    PLAIN,
    R_RE,
    WHICH,
    Z_RE,
)
from remediate.collect.inventory.model import FileState, StateChangeLogState, StateChangeTail
from remediate.collect.inventory.parser import (
    EntryBuilder,
    LogDirBuilder,
    RecordReader,
    build_entry,
)
from remediate.collect.inventory.rows import LogDirRows, entry_row, latest_epoch
from remediate.collect.snapshot import ReplicaRow
from remediate.errors import FormatError

# Every line that is not a `d` or `f` record: the header, L, Z, R, J and the trailer, and the
# records the general parser reads (D, F, T).
_STRUCTURE_RE = re.compile(r"^[^df\n].*$", re.M)
# A content line (T) right after a line that is neither a file record nor a content line.
_AFTER_OTHER_RE = re.compile(r"^[^FT\n].*\nT", re.M)
# A plain file as the bulk match gives it: (shown, total, cut, the lines each after a tab).
PlainFile = tuple[str, str, str, str]


@functools.lru_cache(maxsize=64)
def _records(index: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The `d` and present `f` records of log dir `index`, each with its line end."""
    number = "(?:0|[1-9][0-9]{0,17})"
    directory = re.compile(f"^d {index} {PLAIN}\n", re.M)
    file = re.compile(
        f"^f {index} {PLAIN} {WHICH} present ({number}) ({number}|-) ([01])(\t[ -~\t]*)?\n",
        re.M,
    )
    return directory, file


def _file_state(file: PlainFile) -> FileState:
    _shown, total, cut, lines = file
    content = lines[1:].replace("\t", "\n").encode("ascii")
    return FileState("present", content, cut == "1", None if total == "-" else int(total))


def _plain_row(
    log_dir: str, name: str, metadata: PlainFile | None, epoch: PlainFile | None
) -> ReplicaRow:
    """The row of a directory whose records were all plain: what `entry_row` gives for it."""
    partition, problem = partition_of(name)
    state, topic_id, metadata_problem = "missing", None, None
    if metadata is not None:
        content = metadata[3][1:].replace("\t", "\n").encode("ascii")
        topic_id = accepted_topic_id(content, metadata[2] == "0")
        state = "ok"
        if topic_id is None:  # refused: the general verdict names the file and the reason
            entry = build_entry(
                log_dir,
                name.encode("ascii"),
                EntryBuilder(True, {METADATA: _file_state(metadata)}),
            )
            finding = classify_metadata(entry)
            state, metadata_problem = finding.state, finding.problem
    return ReplicaRow(
        log_dir=log_dir,
        dir=name,
        dir_hex=name.encode("ascii").hex(),
        topic=partition.topic if partition else None,
        partition=partition.partition if partition else None,
        dir_kind=partition.kind if partition else "other",
        name_problem=problem,
        metadata_state=state,
        file_topic_id=topic_id,
        metadata_problem=metadata_problem,
        epoch_latest=None
        if epoch is None
        else latest_epoch(epoch[3][epoch[3].rfind("\t") + 1 :].encode("ascii")),
    )


def _log_dir_rows(text: str, index: int, path: str) -> list[ReplicaRow] | None:
    """The rows of a present log dir from the text between its L and Z records (every line
    ends in a line end); None for anything the general parser would refuse."""
    directory, file = _records(index)
    plain: dict[str, list[PlainFile | None]] = {}
    for name in directory.findall(text):
        if name in (".", "..") or name in plain:
            return None
        plain[name] = [None, None]
    for name, which, shown, total, cut, lines in file.findall(text):
        files = plain.get(name)
        slot = 0 if which == METADATA else 1
        count = lines.count("\t")
        if (
            files is None
            or files[slot] is not None
            or count != int(shown)
            or (total == "-" and cut != "1")
            or (total != "-" and int(total) < count)
        ):
            return None
        files[slot] = (shown, total, cut, lines)
    # The rest is read without the plain records, so a content line must not follow one.
    if _AFTER_OTHER_RE.search(text):
        return None
    rest = file.sub("", directory.sub("", text))
    general: dict[bytes, EntryBuilder] = {}
    if rest and not _read_rest(rest, index, plain, general):
        return None
    rows = [(name.encode("ascii"), _plain_row(path, name, *files)) for name, files in plain.items()]
    for raw, builder in general.items():
        if not builder.listed:
            return None
        rows.append((raw, entry_row(build_entry(path, raw, builder))))
    return [row for _raw, row in sorted(rows, key=lambda pair: pair[0])]


def _read_rest(
    rest: str,
    index: int,
    plain: dict[str, list[PlainFile | None]],
    general: dict[bytes, EntryBuilder],
) -> bool:
    """Read the records the bulk match left, with the general parser's record readers, into
    `general`; a directory among them leaves `plain` with what it had. False on anything the
    general parser would refuse."""
    parser = RecordReader(rest, "")
    current = LogDirBuilder("", "present", general)
    try:
        while parser.pos < len(parser.lines):
            line = parser.next_line()
            if line[:1] in ("D", "d", "F", "f"):
                _move_to_general(line, plain, general)
                if line[:1] in ("D", "d"):
                    parser.directory(line, current, index)
                else:
                    parser.file(line, current, index)
            else:
                return False
    except FormatError:
        return False
    return True


def _move_to_general(
    line: str, plain: dict[str, list[PlainFile | None]], general: dict[bytes, EntryBuilder]
) -> None:
    """A directory with a record the bulk match did not take is read the general way: what
    was matched for it so far moves to its builder."""
    fields = line.split(" ", 3)
    if len(fields) < 3:
        return
    name = fields[2]
    if line[0].isupper():
        try:
            name = bytes.fromhex(name).decode("ascii")
        except (ValueError, UnicodeDecodeError):
            return
    files = plain.pop(name, None)
    if files is None:
        return
    builder = general.setdefault(name.encode("ascii"), EntryBuilder())
    builder.listed = True
    for which, file in zip((METADATA, EPOCH), files, strict=True):
        if file is not None:
            builder.files[which] = _file_state(file)


def read_rows(output: str) -> tuple[LogDirRows, list[ReplicaRow], StateChangeTail | None] | None:
    """(log_dirs rows, replicas rows, the state-change tail) for a whole, well-formed
    output; None for anything else (see the module docstring)."""
    lines = list(_STRUCTURE_RE.finditer(output))
    if not lines or lines[0].start() != 0:
        return None
    header = HEADER_RE.fullmatch(lines[0].group())
    if header is None or int(header.group(1)) != FORMAT_VERSION:
        return None
    log_dirs: LogDirRows = []
    replicas: list[ReplicaRow] = []
    state_change: StateChangeTail | None = None
    at = 1  # the next structural line
    position = lines[0].end() + 1  # where the text after the last one read starts
    while at < len(lines):
        line = lines[at]
        between = output[position : line.start()]
        if between:
            return None
        if line.group().startswith("L ") and state_change is None:
            read = _log_dir(output, lines, at, len(log_dirs))
            if read is None:
                return None
            row, rows, at = read
            log_dirs.append(row)
            replicas += rows
        elif line.group().startswith("R ") and state_change is None:
            state_change, at = _rejections(lines, at)
            if state_change is None:
                return None
        else:
            end = END_RE.fullmatch(line.group())
            if end is None or int(end.group(1)) != len(log_dirs) or at != len(lines) - 1:
                return None
            if output[line.end() :] not in ("", "\n"):
                return None
            return log_dirs, replicas, state_change
        position = lines[at - 1].end() + 1
    return None


def _log_dir(
    output: str, lines: list[re.Match[str]], at: int, index: int
) -> tuple[dict[str, Any], list[ReplicaRow], int] | None:
    """The log dir whose L record is `lines[at]`: its log_dirs row, its replicas rows and the
    next structural line."""
    found = L_RE.fullmatch(lines[at].group())
    if found is None or int(found.group(1)) != index:
        return None
    path = os.fsdecode(bytes.fromhex(found.group(2)))
    if found.group(3) != "present":
        return {"log_dir": path, "state": found.group(3)}, [], at + 1
    # Its Z record: the first structural line after it that is not one of its records.
    close = at + 1
    while close < len(lines) and lines[close].group()[:1] in ("D", "F", "T"):
        close += 1
    status = Z_RE.fullmatch(lines[close].group()) if close < len(lines) else None
    if status is None or int(status.group(1)) != index:
        return None
    rows = _log_dir_rows(output[lines[at].end() + 1 : lines[close].start()], index, path)
    if rows is None:
        return None
    state = "present" if status.group(2) == "0" else "unreadable"
    return {"log_dir": path, "state": state}, rows, close + 1


def _rejections(lines: list[re.Match[str]], at: int) -> tuple[StateChangeTail | None, int]:
    """The R record at `at` and its J lines: the tail and the next structural line."""
    found = R_RE.fullmatch(lines[at].group())
    if found is None:
        return None, at
    if found.group(1) is not None:
        state: StateChangeLogState = found.group(1)  # type: ignore[assignment]
        return StateChangeTail(state), at + 1
    count = int(found.group(4))
    rejected: list[bytes] = []
    for offset in range(1, count + 1):
        if at + offset >= len(lines):
            return None, at
        line = lines[at + offset]
        record = J_RE.fullmatch(line.group())
        if record is None or line.start() != lines[at + offset - 1].end() + 1:
            return None, at
        rejected.append(bytes.fromhex(record.group(1)))
    tail = StateChangeTail("present", tuple(rejected), int(found.group(2)), found.group(3) == "1")
    return tail, at + count + 1
