"""The broker inventory's parser: the command's output (grammar.py) in, an `Inventory` out.

Pure: text in, frozen records out, no I/O. `parse_inventory` reads a whole output and refuses
anything that is not one, naming the line. Its record readers (`RecordReader.directory`,
`RecordReader.file`) are public for the bulk reader (bulk.py), which reads the uncommon
records of an output with them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from remediate.collect.inventory.classify import partition_of
from remediate.collect.inventory.grammar import (
    D_RE,
    END_RE,
    EPOCH,
    F_PRESENT_RE,
    F_UNREADABLE_RE,
    FORMAT_VERSION,
    HEADER,
    HEADER_RE,
    INLINE_RE,
    J_RE,
    L_RE,
    METADATA,
    PLAIN_D_RE,
    PLAIN_F_PRESENT_RE,
    PLAIN_F_UNREADABLE_RE,
    PLAIN_NAME_RE,
    R_RE,
    RECORD_NAMES,
    T_RE,
    TRAILER,
    Z_RE,
)
from remediate.collect.inventory.model import (
    ABSENT,
    DirEntry,
    FileState,
    Inventory,
    LogDirInfo,
    LogDirState,
    StateChangeLogState,
    StateChangeTail,
)
from remediate.errors import FormatError


# The builders collect one log dir's records while it is read (a directory's records may come
# in any order), so they change; what the parser returns is frozen.
@dataclass
class EntryBuilder:
    """One child directory while its log dir is read: listed yet, and its files so far."""

    listed: bool = False
    files: dict[str, FileState] = field(default_factory=dict)


@dataclass
class LogDirBuilder:
    """One present log dir while it is read: its child directories by their raw names."""

    path: str
    state: LogDirState
    entries: dict[bytes, EntryBuilder] = field(default_factory=dict)


class RecordReader:
    """Reads an output's lines in order, one record reader per record kind; each refuses what
    the grammar does not allow with a FormatError naming `source` and the line."""

    def __init__(self, output: str, source: str) -> None:
        self.source = source
        self.lines = output.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self.pos = 0  # index of the next line to read
        self.state_change: StateChangeTail | None = None

    def error(self, expected: str, got: object = None, *, lineno: int | None = None) -> FormatError:
        return FormatError(self.source, f"line {lineno or self.pos}", expected, got)

    def next_line(self) -> str:
        if self.pos >= len(self.lines):
            raise FormatError(
                self.source,
                f"line {self.pos + 1}",
                f"the trailer '{TRAILER} <count>' (the output is truncated: it has no trailer)",
                "end of output",
            )
        line = self.lines[self.pos]
        self.pos += 1
        return line

    def parse(self) -> Inventory:
        keeps_nul = self.header()
        done: list[LogDirInfo] = []
        current: LogDirBuilder | None = None
        while True:
            line = self.next_line()
            if line.startswith(f"{TRAILER} ") or line == TRAILER:
                self.trailer(line, current, len(done))
                return Inventory(
                    log_dirs=tuple(done), awk_keeps_nul=keeps_nul, state_change=self.state_change
                )
            if line[:1] == "R":
                self.rejections(line, current)
                continue
            if self.state_change is not None:
                raise self.error(f"the trailer '{TRAILER} <count>' after the R record", line)
            current = self.record(line, current, done)

    def header(self) -> bool:
        expected = f"the header '{HEADER} {FORMAT_VERSION} awk-nul=0|1'"
        if not self.lines:
            raise self.error(expected, "empty output", lineno=1)
        line = self.next_line()
        match = HEADER_RE.fullmatch(line)
        if match is None:
            raise self.error(expected, line)
        if int(match.group(1)) != FORMAT_VERSION:
            raise self.error(f"format version {FORMAT_VERSION}", line)
        return match.group(2) == "1"

    def trailer(self, line: str, current: LogDirBuilder | None, count: int) -> None:
        match = END_RE.fullmatch(line)
        if match is None:
            raise self.error(f"'{TRAILER} <count>'", line)
        if current is not None:
            raise self.error(f"'Z {count} <status>' before the trailer", line)
        if int(match.group(1)) != count:
            raise self.error(f"'{TRAILER} {count}' (one L record per log dir)", line)
        if self.pos != len(self.lines):
            raise self.error("nothing after the trailer", self.lines[self.pos], lineno=self.pos + 1)

    def record(
        self, line: str, current: LogDirBuilder | None, done: list[LogDirInfo]
    ) -> LogDirBuilder | None:
        """Handle one record other than the trailer; the log dir still open after it."""
        kind = line[:1]
        if kind == "L":
            if current is not None:
                raise self.error(f"'Z {len(done)} <status>' before the next log dir", line)
            current = self.log_dir(line, len(done))
            if current.state == "present":
                return current
            done.append(LogDirInfo(current.path, current.state, ()))
            return None
        if kind == "T":
            raise self.error("a content line only after its file record", line)
        if kind not in RECORD_NAMES:
            raise self.error("a record: L, D, d, F, f, T, Z or the trailer", line)
        if current is None:
            raise self.error(
                f"a {RECORD_NAMES[kind]} record only after 'L <index> <path> present'", line
            )
        if kind in "Dd":
            self.directory(line, current, len(done))
        elif kind in "Ff":
            self.file(line, current, len(done))
        else:
            done.append(self.close(line, current, len(done)))
            return None
        return current

    def rejections(self, line: str, current: LogDirBuilder | None) -> None:
        match = R_RE.fullmatch(line)
        if match is None:
            raise self.error("'R missing|unreadable' or 'R present <status> <cut> <count>'", line)
        if current is not None or self.state_change is not None:
            raise self.error("one R record, after the last log dir's Z record", line)
        if match.group(1) is not None:
            state: StateChangeLogState = match.group(1)  # type: ignore[assignment]
            self.state_change = StateChangeTail(state)
            return
        lines = []
        for _ in range(int(match.group(4))):
            record = self.next_line()
            found = J_RE.fullmatch(record)
            if found is None:
                raise self.error("a state-change log line 'J <hex>'", record)
            lines.append(bytes.fromhex(found.group(1)))
        self.state_change = StateChangeTail(
            "present", tuple(lines), int(match.group(2)), match.group(3) == "1"
        )

    def index(self, text: str, expected: int, line: str) -> None:
        if int(text) != expected:
            raise self.error(f"a record for log dir {expected} (announced by its L record)", line)

    def log_dir(self, line: str, index: int) -> LogDirBuilder:
        match = L_RE.fullmatch(line)
        if match is None:
            raise self.error("'L <index> <hex path> <state>'", line)
        self.index(match.group(1), index, line)
        path = os.fsdecode(bytes.fromhex(match.group(2)))
        state: LogDirState = match.group(3)  # type: ignore[assignment]
        return LogDirBuilder(path, state)

    def name(self, text: str, line: str) -> bytes:
        raw = bytes.fromhex(text)
        if b"/" in raw or b"\0" in raw or raw in (b".", b".."):
            raise self.error("a directory name (no '/', no NUL, not '.' or '..')", line)
        return raw

    def directory(self, line: str, current: LogDirBuilder, index: int) -> None:
        match = (PLAIN_D_RE if line[0] == "d" else D_RE).fullmatch(line)
        if match is None:
            raise self.error("'D <index> <hex name>' or 'd <index> <plain name>'", line)
        self.index(match.group(1), index, line)
        entry = current.entries.setdefault(
            self.raw_name(line[0], match.group(2), line), EntryBuilder()
        )
        if entry.listed:
            raise self.error("each directory listed once", line)
        entry.listed = True

    def raw_name(self, kind: str, text: str, line: str) -> bytes:
        """The name's bytes: hex-decoded, or as they are for a plain name (lower-case record)."""
        return self.name(text, line) if kind.isupper() else self.plain_name(text, line)

    def plain_name(self, text: str, line: str) -> bytes:
        if text in (".", "..") or PLAIN_NAME_RE.fullmatch(text) is None:
            raise self.error("a plain directory name (not '.' or '..')", line)
        return text.encode("ascii")

    def file(self, line: str, current: LogDirBuilder, index: int) -> None:
        lineno = self.pos
        plain = line[0] == "f"
        record, inline = line, None
        if plain and "\t" in line:
            record, inline = line.split("\t", 1)
        present = (PLAIN_F_PRESENT_RE if plain else F_PRESENT_RE).fullmatch(record)
        unreadable = None
        if present is None:
            unreadable = (PLAIN_F_UNREADABLE_RE if plain else F_UNREADABLE_RE).fullmatch(record)
        match = present or unreadable
        if match is None:
            raise self.error("'F|f <index> <name> metadata|epoch present|unreadable ...'", line)
        self.index(match.group(1), index, line)
        raw = self.raw_name(line[0], match.group(2), line)
        which = match.group(3)
        if present is not None:
            shown = int(present.group(4))
            total = None if present.group(5) == "-" else int(present.group(5))
            truncated = present.group(7) == "1"
            if total is not None and total < shown:
                raise self.error("a total line count no smaller than the lines shown", line)
            if total is None and not truncated:
                raise self.error("a total line count unless the content is truncated", line)
            if plain:
                content = self.inline_content(inline, shown, line)
            else:
                content = b"\n".join([self.content_line() for _ in range(shown)])
            state = FileState("present", content, truncated, total)
        else:
            assert unreadable is not None
            if inline is not None:
                raise self.error("no content on an unreadable file's record", line)
            state = FileState("unreadable", None, reason=unreadable.group(4))
        self.put(current, raw, (which, state), line, lineno)

    def put(
        self,
        current: LogDirBuilder,
        raw: bytes,
        file: tuple[str, FileState],
        line: str,
        lineno: int,
    ) -> None:
        which, state = file
        entry = current.entries.setdefault(raw, EntryBuilder())
        if which in entry.files:
            raise self.error(f"one record for each file, not a second {which}", line, lineno=lineno)
        entry.files[which] = state

    def inline_content(self, inline: str | None, shown: int, line: str) -> bytes:
        """The content lines on a plain file record, after its tabs (exactly `shown` of them,
        each plain text), joined with b"\\n"."""
        if inline is None:
            count = 0
        elif INLINE_RE.fullmatch(inline):
            count = inline.count("\t") + 1
        else:
            count = -1
        if count != shown:
            raise self.error(f"{shown} content line(s) of plain text after tabs", line)
        return b"" if inline is None else inline.replace("\t", "\n").encode("ascii")

    def content_line(self) -> bytes:
        line = self.next_line()
        match = T_RE.fullmatch(line)
        if match is None:
            raise self.error("a content line 'T [<hex>]'", line)
        return bytes.fromhex(match.group(1) or "")

    def close(self, line: str, current: LogDirBuilder, index: int) -> LogDirInfo:
        match = Z_RE.fullmatch(line)
        if match is None:
            raise self.error("'Z <index> <status>'", line)
        self.index(match.group(1), index, line)
        entries = []
        for raw in sorted(current.entries):
            builder = current.entries[raw]
            if not builder.listed:
                raise self.error("file records only for directories that were listed", raw.hex())
            entries.append(build_entry(current.path, raw, builder))
        state: LogDirState = "present" if match.group(2) == "0" else "unreadable"
        return LogDirInfo(current.path, state, tuple(entries))


def build_entry(log_dir: str, raw: bytes, builder: EntryBuilder) -> DirEntry:
    """The frozen entry of a directory read into `builder`, its name judged by Kafka's rules."""
    name = os.fsdecode(raw)
    partition, problem = partition_of(name)
    return DirEntry(
        log_dir=log_dir,
        name=name,
        partition=partition,
        name_problem=problem,
        metadata=builder.files.get(METADATA, ABSENT),
        epoch_checkpoint=builder.files.get(EPOCH, ABSENT),
    )


def parse_inventory(output: str, *, source: str) -> Inventory:
    """Parse what `inventory_command` printed; `source` names the broker in errors.

    Raises FormatError (naming `source` and the line) on anything that is not a complete
    output: a bad header, bad hex, an unknown record, a record for a log dir that was not
    announced, a missing trailer (a connection that dropped), anything after the trailer.
    """
    return RecordReader(output, source).parse()
