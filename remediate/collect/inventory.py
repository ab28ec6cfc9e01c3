"""The broker inventory fact: one shell command per broker, one pure parser of its output.

`inventory_command` builds a command for `sh -c`-compatible remote shells (ssh, or a local
`/bin/sh`). It needs only POSIX sh, find, awk and nice on the broker (tested with mawk,
gawk, the one-true-awk and busybox awk, and with busybox's sh and find): no Python, no GNU
options (no -print0, -maxdepth, -mindepth, -printf). It reads, never writes.

Directory names on disk are untrusted: they can hold any byte but NUL and '/'. No name is ever
part of a shell word or an awk program. Names reach awk only as arguments from
`find -exec awk ... {} +`, and awk prints a name as it is only when it is plain (bytes from
`[A-Za-z0-9._-]`, as every Kafka partition directory's name is) and every content line as it is
only when it is plain text (bytes from space to '~'); anything else is printed as lowercase hex.
So the output is printable ASCII whatever the disk holds. Everything runs under LC_ALL=C, so
awk's length(), substr() and bracket ranges count and compare bytes.

Output (one record per line, fields separated by one space; HEX is lowercase hex of raw bytes,
PLAIN a name of bytes from [A-Za-z0-9._-], TEXT bytes from space to '~' (no tab), N a decimal
number; `I` is the log dir's 0-based position in the command's arguments):

    output   = header logdir* rejections? trailer
    header   = "remediate-inventory 2 awk-nul=" ("0" | "1")
    logdir   = "L" I HEX ("missing" | "not_a_directory" | "unreadable")
             | "L" I HEX "present" (dir | file)* "Z" I N
    dir      = "D" I HEX | "d" I PLAIN          an immediate child directory, by name
    file     = "F" I HEX WHICH "present" N (N | "-") ("0" | "1") line*
             | "f" I PLAIN WHICH "present" N (N | "-") ("0" | "1") ("<tab>" TEXT)*
             | ("F" I HEX | "f" I PLAIN) WHICH "unreadable"
                   ("directory" | "symlink" | "special" | "error")
    WHICH    = "metadata" | "epoch"             partition.metadata | leader-epoch-checkpoint
    line     = "T" | "T" HEX                    one content line ("T" alone: an empty line)
    rejections = "R" ("missing" | "unreadable")             the state-change log, when asked
             | "R present" N ("0" | "1") N reject*       tail's exit status, cut, count
    reject   = "J" HEX                          one line of the log's tail that names a topic-id
                                                mismatch (cut at max_content_bytes bytes)
    trailer  = "end" N                          N = number of L records

The lower-case records are the common case in one line: a plain name, and for a file whose
lines are all plain text, its lines on the record itself after tabs. A file with any other
line, or a directory with any other name, takes the hex records.
A present file record gives the number of T lines that follow, the file's total line count
("-" when reading stopped early) and whether the lines shown are less than the file.
`Z I N` closes a listed log dir with find's exit status; a non-zero status (find could not
read something, or an awk failed) makes that log dir "unreadable" with the entries that were
seen. `D` and `F` records of one log dir may come in any order (find runs its -exec batches
when they fill up). `awk-nul=0` says the broker's awk keeps strings as C strings (busybox,
the one-true-awk): content after a NUL byte within a line may then be lost or split.

What the command reports, and what it does not:
- A log dir is "present" (a directory the command can enter and read), "unreadable",
  "not_a_directory" (anything else that exists, a dangling symlink included) or "missing".
  A log dir given as a symlink to a directory is followed.
- Immediate child directories only; files at the log dir's root (meta.properties,
  checkpoints, .lock) are not reported, nor are child symlinks (find does not follow them).
- `partition.metadata` and `leader-epoch-checkpoint` of each child: absent (no such entry),
  present (a regular file, read), or unreadable: reading failed ("error"), or the entry is not a
  regular file ("directory", "symlink", "special"). Symlinks, a dangling one included, are
  never followed and FIFOs or devices are never opened: a read could hang or never end.
- partition.metadata: its lines, at most `max_content_bytes` bytes in all (counting one "\\n"
  between lines); longer files are cut there and flagged truncated.
- leader-epoch-checkpoint: its first 2 lines and its last `epoch_tail_lines` lines (each cut
  at `max_content_bytes` bytes) and its total line count.
- awk reads line by line: a line is read whole before it is cut, so a multi-gigabyte file
  without a newline would be read into the broker's memory. Kafka writes both files as a few
  short lines.

The broker's state-change log (optional): only its last `state_change_tail_bytes` bytes are
read (`tail -c`, never the whole file), and only the lines holding Kafka's topic-id mismatch
message are printed. "cut" says the tail started inside the file: its first line may be a
fragment, so it is dropped. A log that does not exist is "missing"; one that is not a readable
regular file is "unreadable": the evidence is then absent, which is not an error.

Content is reconstructed as the lines joined with b"\\n". awk's getline splits on "\\n" only and
drops each line's "\\n", so a final newline is not seen (b"a\\n" reads as b"a") and "\\r" stays at
the end of a line. Both are harmless for partition.metadata: Kafka's reader splits lines on
"\\n", "\\r" or "\\r\\n" and ignores a final terminator and any line after the second.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from remediate.errors import FormatError
from remediate.formats.logdir import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    PartitionDir,
    parse_partition_dir,
    parse_partition_metadata,
    topic_name_problem,
)

FORMAT_VERSION = 2
HEADER = "remediate-inventory"
TRAILER = "end"
DEFAULT_MAX_CONTENT_BYTES = 8192  # Kafka's reader decodes partition.metadata 8 KiB at a time
DEFAULT_EPOCH_TAIL_LINES = 3
DEFAULT_STATE_CHANGE_TAIL_BYTES = 1024 * 1024
EPOCH_HEAD_LINES = 2

LogDirState = Literal["present", "missing", "not_a_directory", "unreadable"]
FileStateName = Literal["absent", "present", "unreadable"]
MetadataState = Literal["ok", "missing", "corrupt", "unreadable"]


@dataclass(frozen=True)
class FileState:
    """One file of a partition directory as the command saw it.

    `content` is the lines that were read, joined with b"\\n" (see the module docstring);
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


StateChangeLogState = Literal["missing", "unreadable", "present"]


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


@dataclass(frozen=True)
class MetadataFinding:
    """partition.metadata judged by Kafka's rules: the id it holds, or why it holds none."""

    state: MetadataState
    topic_id: str | None
    problem: str | None


# -- the command -------------------------------------------------------------------------------

# Runs only in BEGIN, so awk never reads its operands as input files (and never treats an
# operand of the form a=b as an assignment). Paths it gets are "./<name>" or
# "./<name>/<file>", relative to the log dir: never "-", never a gawk special file.
# No single quotes here: the program sits in single quotes in the script.
_AWK = r"""
function hex(s,    n, j, c, o) {
    n = length(s)
    o = ""
    for (j = 1; j <= n; j++) {
        c = substr(s, j, 1)
        o = o ((c in HX) ? HX[c] : "??")
    }
    return o
}
function emit(s,    h) {
    h = hex(s)
    if (h == "") print "T"
    else print "T " h
}
function plain(s) {
    return s ~ /^[A-Za-z0-9._-]+$/
}
function label(s) {
    return (plain(s) ? "f " I " " s : "F " I " " hex(s))
}
function record(head, n,    k, o) {
    if (plain(NM)) {
        for (k = 1; k <= n; k++) if (LN[k] !~ /^[ -~]*$/) break
        if (k > n) {
            o = "f " I " " NM " " head
            for (k = 1; k <= n; k++) o = o "\t" LN[k]
            print o
            return
        }
    }
    print "F " I " " hex(NM) " " head
    for (k = 1; k <= n; k++) emit(LN[k])
}
function locate(p,    n) {
    n = length(p)
    if (substr(p, n - 18) == "/partition.metadata") {
        WH = "metadata"
        NM = substr(p, 3, n - 21)
    } else {
        WH = "epoch"
        NM = substr(p, 3, n - 26)
    }
}
function metadata(p,    r, line, n, used, add, k, tr) {
    n = 0
    used = 0
    tr = 0
    while ((r = (getline line < p)) > 0) {
        add = length(line) + (n > 0 ? 1 : 0)
        if (used + add > X) {
            k = X - used - (n > 0 ? 1 : 0)
            if (k > 0) {
                n++
                LN[n] = substr(line, 1, k)
            }
            tr = 1
            break
        }
        n++
        LN[n] = line
        used += add
    }
    close(p)
    if (r < 0) {
        print label(NM) " metadata unreadable error"
        return
    }
    record("metadata present " n " " (tr ? "-" : n) " " tr, n)
}
function epoch(p,    r, line, total, first, n, j, tr) {
    total = 0
    while ((r = (getline line < p)) > 0) {
        total++
        if (total <= 2) HD[total] = line
        else if (T > 0) RG[(total - 3) % T] = line
    }
    close(p)
    if (r < 0) {
        print label(NM) " epoch unreadable error"
        return
    }
    n = 0
    for (j = 1; j <= total && j <= 2; j++) {
        n++
        LN[n] = HD[j]
    }
    first = total - T + 1
    if (first < 3) first = 3
    for (j = first; j <= total; j++) {
        n++
        LN[n] = RG[(j - 3) % T]
    }
    tr = (n < total)
    for (j = 1; j <= n; j++) {
        if (length(LN[j]) > X) {
            LN[j] = substr(LN[j], 1, X)
            tr = 1
        }
    }
    record("epoch present " n " " total " " tr, n)
}
function rejections(    line, held, have, total, n, j, st, cut, first) {
    total = 0
    n = 0
    have = 0
    first = 1
    while ((getline line) > 0) {
        if (have) {
            total += length(held) + 1
            if (index(held, "does not match the topic Id for partition") ||
                index(held, "does not match the topic ID for partition")) {
                n++
                RJ[n] = (length(held) > X) ? substr(held, 1, X) : held
                FL[n] = first
            }
            first = 0
        }
        held = line
        have = 1
    }
    st = (have && substr(held, 1, 6) == "=tail ") ? substr(held, 7) + 0 : 1
    cut = (total - 1 > B) ? 1 : 0
    j = 0
    for (k = 1; k <= n; k++) if (!(cut && FL[k])) j++
    print "R present " st " " cut " " j
    for (k = 1; k <= n; k++) if (!(cut && FL[k])) print "J " hex(RJ[k])
}
BEGIN {
    for (k = 0; k < 256; k++) HX[sprintf("%c", k)] = sprintf("%02x", k)
    I = i
    X = x + 0
    T = t + 0
    B = b + 0
    if (m == "R") {
        rejections()
    } else if (m == "H") {
        print "remediate-inventory 2 awk-nul=" (length(sprintf("%c", 0)) == 1 ? 1 : 0)
    } else if (m == "L") {
        print "L " I " " hex(ARGV[1]) " " s
    } else if (m == "D") {
        for (k = 1; k < ARGC; k++) {
            NM = substr(ARGV[k], 3)
            print (plain(NM) ? "d " I " " NM : "D " I " " hex(NM))
        }
    } else if (m == "O") {
        for (k = 1; k < ARGC; k++) {
            locate(ARGV[k])
            print label(NM) " " WH " unreadable " r
        }
    } else if (m == "F") {
        for (k = 1; k < ARGC; k++) {
            locate(ARGV[k])
            if (WH == "metadata") metadata(ARGV[k])
            else epoch(ARGV[k])
        }
    }
    exit
}
"""

# `find . ! -name . -prune` is the POSIX way to visit only immediate children; here the prune
# happens two levels deeper (`-path "./*/*/*" -prune`) so that find also sees the two files
# inside each child directory, and reports nothing below them. (Pruning at "./*/*" would do
# too, but GNU find then stats every file of every partition: 100,000 stats instead of 37,500
# on a log dir of 12,500 partitions.) The expression is a flat chain of -o: busybox find
# (1.35) never runs an `-exec ... {} +` batch that sits inside \( \).
# mawk, where the broker has it, runs the program in two thirds of gawk's time (measured at
# 12,500 partitions); $REMEDIATE_AWK pins one (the tests use it to run each awk in turn).
_SCRIPT = """\
P='{awk}'
LC_ALL=C; export LC_ALL; unset CDPATH
A=${{REMEDIATE_AWK:-$(command -v mawk 2>/dev/null || echo awk)}}
S=$1; shift
"$A" -v m=H -- "$P" || exit 1
i=0
for d in "$@"; do
  case $d in /*) p=$d ;; *) p=./$d ;; esac
  if [ -d "$p" ]; then
    if [ -r "$p" ] && [ -x "$p" ] && (cd -- "$p") 2>/dev/null; then s=present; else s=unreadable; fi
  elif [ -e "$p" ] || [ -h "$p" ]; then s=not_a_directory
  else s=missing
  fi
  "$A" -v m=L -v i=$i -v s=$s -- "$P" "$d" || exit 1
  if [ $s = present ]; then
    (cd -- "$p" && exec find . \\
      -path "./*/*/*" -prune \\
      -o -path "./*/*" {names} -type f \\
      -exec "$A" -v m=F -v i=$i -v x={max_bytes} -v t={tail} -- "$P" {{}} + \\
      -o -path "./*/*" {names} -type d -exec "$A" -v m=O -v i=$i -v r=directory -- "$P" {{}} + \\
      -o -path "./*/*" {names} -type l -exec "$A" -v m=O -v i=$i -v r=symlink -- "$P" {{}} + \\
      -o -path "./*/*" {names} -exec "$A" -v m=O -v i=$i -v r=special -- "$P" {{}} + \\
      -o ! -name . ! -path "./*/*" -type d -exec "$A" -v m=D -v i=$i -- "$P" {{}} +)
    echo "Z $i $?"
  fi
  i=$((i+1))
done
if [ -n "$S" ]; then
  case $S in /*) q=$S ;; *) q=./$S ;; esac
  if [ -f "$q" ] && [ -r "$q" ]; then
    {{ tail -c {tail_bytes_plus_one} -- "$q" 2>/dev/null; s=$?; echo; echo "=tail $s"; }} |
      "$A" -v m=R -v x={max_bytes} -v b={tail_bytes} -- "$P" || exit 1
  elif [ -e "$q" ] || [ -h "$q" ]; then echo "R unreadable"
  else echo "R missing"
  fi
fi
echo "end $i"
"""

if "'" in _AWK:  # pragma: no cover - a guard for whoever edits the program
    raise AssertionError("the awk program must not contain single quotes")


def inventory_command(
    log_dirs: Sequence[str],
    *,
    sudo: bool = False,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    epoch_tail_lines: int = DEFAULT_EPOCH_TAIL_LINES,
    state_change_log: str | None = None,
    state_change_tail_bytes: int = DEFAULT_STATE_CHANGE_TAIL_BYTES,
) -> str:
    """The command that inventories `log_dirs` on one broker:
    `nice -n 10 sh -c '<script>' sh <state-change log or ''> <dirs>` (at a lower priority: it
    walks every partition directory, and on a busy broker the broker's own work comes first).

    Every argument is quoted with shlex.quote; with `sudo` the command is prefixed with
    `sudo -n ` (never prompts). Its stdout is printable ASCII (see the module docstring).
    With `state_change_log`, the mismatch lines of that file's last `state_change_tail_bytes`
    bytes are reported too.
    """
    if isinstance(log_dirs, str):
        raise TypeError("log_dirs is a sequence of paths, not one string")
    for path in log_dirs:
        if not path or "\0" in path:
            raise ValueError(f"a log dir must be a non-empty path without NUL: {path!r}")
    if isinstance(max_content_bytes, bool) or max_content_bytes < 1:
        raise ValueError(f"max_content_bytes must be at least 1, not {max_content_bytes!r}")
    if isinstance(epoch_tail_lines, bool) or epoch_tail_lines < 0:
        raise ValueError(f"epoch_tail_lines must be at least 0, not {epoch_tail_lines!r}")
    if state_change_log is not None and (not state_change_log or "\0" in state_change_log):
        raise ValueError(f"a state-change log must be a path without NUL: {state_change_log!r}")
    if isinstance(state_change_tail_bytes, bool) or state_change_tail_bytes < 1:
        raise ValueError(f"state_change_tail_bytes must be at least 1: {state_change_tail_bytes!r}")
    script = _SCRIPT.format(
        awk=_AWK.strip("\n"),
        names=f"\\( -name {PARTITION_METADATA} -o -name {LEADER_EPOCH_CHECKPOINT} \\)",
        max_bytes=int(max_content_bytes),
        tail=int(epoch_tail_lines),
        tail_bytes=int(state_change_tail_bytes),
        tail_bytes_plus_one=int(state_change_tail_bytes) + 1,
    )
    words = ["nice", "-n", "10", "sh", "-c", script, "sh", state_change_log or "", *log_dirs]
    command = " ".join(shlex.quote(word) for word in words)
    return f"sudo -n {command}" if sudo else command


# -- the parser --------------------------------------------------------------------------------

_N = "(0|[1-9][0-9]{0,17})"
_HEX = "((?:[0-9a-f]{2})+)"
_WHICH = "(metadata|epoch)"
_HEADER_RE = re.compile(f"{HEADER} {_N} awk-nul=([01])")
_L_RE = re.compile(f"L {_N} {_HEX} (present|missing|not_a_directory|unreadable)")
_PLAIN = "([A-Za-z0-9._-]+)"
_PLAIN_NAME_RE = re.compile(_PLAIN)
_D_RE = re.compile(f"D {_N} {_HEX}")
_PLAIN_D_RE = re.compile(f"d {_N} {_PLAIN}")
_F_PRESENT_RE = re.compile(f"F {_N} {_HEX} {_WHICH} present {_N} ({_N}|-) ([01])")
_PLAIN_F_PRESENT_RE = re.compile(f"f {_N} {_PLAIN} {_WHICH} present {_N} ({_N}|-) ([01])")
_F_UNREADABLE_RE = re.compile(
    f"F {_N} {_HEX} {_WHICH} unreadable (directory|symlink|special|error)"
)
_PLAIN_F_UNREADABLE_RE = re.compile(
    f"f {_N} {_PLAIN} {_WHICH} unreadable (directory|symlink|special|error)"
)
_INLINE_RE = re.compile("[ -~\t]*")  # plain-text lines, tab-separated
_T_RE = re.compile(f"T(?: {_HEX})?")
_Z_RE = re.compile(f"Z {_N} {_N}")
_END_RE = re.compile(f"{TRAILER} {_N}")
_R_RE = re.compile(f"R (?:(missing|unreadable)|present {_N} ([01]) {_N})")
_J_RE = re.compile(f"J {_HEX}")
_RECORD_NAMES = {
    "L": "log dir",
    "D": "directory",
    "d": "directory",
    "F": "file",
    "f": "file",
    "T": "content line",
    "Z": "end",
}


@dataclass
class _EntryBuilder:
    listed: bool = False
    files: dict[str, FileState] = field(default_factory=dict)


@dataclass
class _LogDirBuilder:
    path: str
    state: LogDirState
    entries: dict[bytes, _EntryBuilder] = field(default_factory=dict)


class _Parser:
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
        current: _LogDirBuilder | None = None
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
        match = _HEADER_RE.fullmatch(line)
        if match is None:
            raise self.error(expected, line)
        if int(match.group(1)) != FORMAT_VERSION:
            raise self.error(f"format version {FORMAT_VERSION}", line)
        return match.group(2) == "1"

    def trailer(self, line: str, current: _LogDirBuilder | None, count: int) -> None:
        match = _END_RE.fullmatch(line)
        if match is None:
            raise self.error(f"'{TRAILER} <count>'", line)
        if current is not None:
            raise self.error(f"'Z {count} <status>' before the trailer", line)
        if int(match.group(1)) != count:
            raise self.error(f"'{TRAILER} {count}' (one L record per log dir)", line)
        if self.pos != len(self.lines):
            raise self.error("nothing after the trailer", self.lines[self.pos], lineno=self.pos + 1)

    def record(
        self, line: str, current: _LogDirBuilder | None, done: list[LogDirInfo]
    ) -> _LogDirBuilder | None:
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
        if kind not in _RECORD_NAMES:
            raise self.error("a record: L, D, d, F, f, T, Z or the trailer", line)
        if current is None:
            raise self.error(
                f"a {_RECORD_NAMES[kind]} record only after 'L <index> <path> present'", line
            )
        if kind in "Dd":
            self.directory(line, current, len(done))
        elif kind in "Ff":
            self.file(line, current, len(done))
        else:
            done.append(self.close(line, current, len(done)))
            return None
        return current

    def rejections(self, line: str, current: _LogDirBuilder | None) -> None:
        match = _R_RE.fullmatch(line)
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
            found = _J_RE.fullmatch(record)
            if found is None:
                raise self.error("a state-change log line 'J <hex>'", record)
            lines.append(bytes.fromhex(found.group(1)))
        self.state_change = StateChangeTail(
            "present", tuple(lines), int(match.group(2)), match.group(3) == "1"
        )

    def index(self, text: str, expected: int, line: str) -> None:
        if int(text) != expected:
            raise self.error(f"a record for log dir {expected} (announced by its L record)", line)

    def log_dir(self, line: str, index: int) -> _LogDirBuilder:
        match = _L_RE.fullmatch(line)
        if match is None:
            raise self.error("'L <index> <hex path> <state>'", line)
        self.index(match.group(1), index, line)
        path = os.fsdecode(bytes.fromhex(match.group(2)))
        state: LogDirState = match.group(3)  # type: ignore[assignment]
        return _LogDirBuilder(path, state)

    def name(self, text: str, line: str) -> bytes:
        raw = bytes.fromhex(text)
        if b"/" in raw or b"\0" in raw or raw in (b".", b".."):
            raise self.error("a directory name (no '/', no NUL, not '.' or '..')", line)
        return raw

    def directory(self, line: str, current: _LogDirBuilder, index: int) -> None:
        match = (_PLAIN_D_RE if line[0] == "d" else _D_RE).fullmatch(line)
        if match is None:
            raise self.error("'D <index> <hex name>' or 'd <index> <plain name>'", line)
        self.index(match.group(1), index, line)
        entry = current.entries.setdefault(
            self.raw_name(line[0], match.group(2), line), _EntryBuilder()
        )
        if entry.listed:
            raise self.error("each directory listed once", line)
        entry.listed = True

    def raw_name(self, kind: str, text: str, line: str) -> bytes:
        """The name's bytes: hex-decoded, or as they are for a plain name (lower-case record)."""
        return self.name(text, line) if kind.isupper() else self.plain_name(text, line)

    def plain_name(self, text: str, line: str) -> bytes:
        if text in (".", "..") or _PLAIN_NAME_RE.fullmatch(text) is None:
            raise self.error("a plain directory name (not '.' or '..')", line)
        return text.encode("ascii")

    def file(self, line: str, current: _LogDirBuilder, index: int) -> None:
        lineno = self.pos
        plain = line[0] == "f"
        record, inline = line, None
        if plain and "\t" in line:
            record, inline = line.split("\t", 1)
        present = (_PLAIN_F_PRESENT_RE if plain else _F_PRESENT_RE).fullmatch(record)
        unreadable = None
        if present is None:
            unreadable = (_PLAIN_F_UNREADABLE_RE if plain else _F_UNREADABLE_RE).fullmatch(record)
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
        current: _LogDirBuilder,
        raw: bytes,
        file: tuple[str, FileState],
        line: str,
        lineno: int,
    ) -> None:
        which, state = file
        entry = current.entries.setdefault(raw, _EntryBuilder())
        if which in entry.files:
            raise self.error(f"one record for each file, not a second {which}", line, lineno=lineno)
        entry.files[which] = state

    def inline_content(self, inline: str | None, shown: int, line: str) -> bytes:
        """The content lines on a plain file record, after its tabs (exactly `shown` of them,
        each plain text), joined with b"\\n"."""
        if inline is None:
            count = 0
        elif _INLINE_RE.fullmatch(inline):
            count = inline.count("\t") + 1
        else:
            count = -1
        if count != shown:
            raise self.error(f"{shown} content line(s) of plain text after tabs", line)
        return b"" if inline is None else inline.replace("\t", "\n").encode("ascii")

    def content_line(self) -> bytes:
        line = self.next_line()
        match = _T_RE.fullmatch(line)
        if match is None:
            raise self.error("a content line 'T [<hex>]'", line)
        return bytes.fromhex(match.group(1) or "")

    def close(self, line: str, current: _LogDirBuilder, index: int) -> LogDirInfo:
        match = _Z_RE.fullmatch(line)
        if match is None:
            raise self.error("'Z <index> <status>'", line)
        self.index(match.group(1), index, line)
        entries = []
        for raw in sorted(current.entries):
            builder = current.entries[raw]
            if not builder.listed:
                raise self.error("file records only for directories that were listed", raw.hex())
            entries.append(_entry(current.path, raw, builder))
        state: LogDirState = "present" if match.group(2) == "0" else "unreadable"
        return LogDirInfo(current.path, state, tuple(entries))


def _entry(log_dir: str, raw: bytes, builder: _EntryBuilder) -> DirEntry:
    name = os.fsdecode(raw)
    partition, problem = _partition(name)
    return DirEntry(
        log_dir=log_dir,
        name=name,
        partition=partition,
        name_problem=problem,
        metadata=builder.files.get("metadata", ABSENT),
        epoch_checkpoint=builder.files.get("epoch", ABSENT),
    )


def _partition(name: str) -> tuple[PartitionDir | None, str | None]:
    try:
        partition = parse_partition_dir(name, source="directory name")
    except FormatError as exc:
        return None, f"not a partition directory: {exc.field}: expected {exc.expected}"
    problem = topic_name_problem(partition.topic)
    if problem is not None:
        return None, f"not a partition directory: the topic name {problem}"
    return partition, None


def parse_inventory(output: str, *, source: str) -> Inventory:
    """Parse what `inventory_command` printed; `source` names the broker in errors.

    Raises FormatError (naming `source` and the line) on anything that is not a complete
    output: a bad header, bad hex, an unknown record, a record for a log dir that was not
    announced, a missing trailer (a connection that dropped), anything after the trailer.
    """
    return _Parser(output, source).parse()


# -- classification ----------------------------------------------------------------------------


def _printable_path(path: str) -> str:
    return path if path.isprintable() else repr(path)


def classify_metadata(entry: DirEntry) -> MetadataFinding:
    """Judge an entry's partition.metadata by Kafka's rules (`parse_partition_metadata`).

    The content is the lines awk read joined with b"\\n" (see the module docstring): a final
    newline is lost and "\\r" stays at line ends, neither of which changes Kafka's verdict.
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
        topic_id = _topic_id_of(metadata.content, not metadata.truncated)
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
def _topic_id_of(content: bytes, whole: bool) -> str | None:
    """The topic id of a partition.metadata Kafka accepts, None for one it refuses."""
    try:
        parsed = parse_partition_metadata(content, source="partition.metadata", whole=whole)
    except FormatError:
        return None
    return str(parsed.topic_id)
