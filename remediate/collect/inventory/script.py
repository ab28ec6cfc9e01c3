"""The broker inventory's command: one shell script per broker that lists its log dirs.

`inventory_command` builds a command for `sh -c`-compatible remote shells (ssh, or a local
`/bin/sh`). It needs only POSIX sh, find, awk and nice on the broker (tested with mawk,
gawk, the one-true-awk and busybox awk, and with busybox's sh and find): no Python, no GNU
options (no -print0, -maxdepth, -mindepth, -printf). It reads, never writes. What it prints is
the record format of grammar.py; parser.py reads it.

Directory names on disk are untrusted: they can hold any byte but NUL and '/'. No name is ever
part of a shell word or an awk program. Names reach awk only as arguments from
`find -exec awk ... {} +`, and awk prints a name as it is only when it is plain (bytes from
`[A-Za-z0-9._-]`, as every Kafka partition directory's name is) and every content line as it is
only when it is plain text (bytes from space to '~'); anything else is printed as lowercase hex.
So the output is printable ASCII whatever the disk holds. Everything runs under LC_ALL=C, so
awk's length(), substr() and bracket ranges count and compare bytes.

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
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from remediate.collect.inventory.grammar import FORMAT_VERSION, HEADER
from remediate.formats.logdir import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA

DEFAULT_MAX_CONTENT_BYTES = 8192  # Kafka's reader decodes partition.metadata 8 KiB at a time
DEFAULT_EPOCH_TAIL_LINES = 3
DEFAULT_STATE_CHANGE_TAIL_BYTES = 1024 * 1024
EPOCH_HEAD_LINES = 2  # the awk program's leader-epoch-checkpoint head (its `total <= 2`)


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


# The header is the grammar's: a program that printed another would be refused by the parser.
if f'print "{HEADER} {FORMAT_VERSION} awk-nul="' not in _AWK:  # pragma: no cover
    raise AssertionError("the awk program must print the grammar's header")


def inventory_command(
    log_dirs: Sequence[str],
    *,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    epoch_tail_lines: int = DEFAULT_EPOCH_TAIL_LINES,
    state_change_log: str | None = None,
    state_change_tail_bytes: int = DEFAULT_STATE_CHANGE_TAIL_BYTES,
) -> str:
    """The command that inventories `log_dirs` on one broker:
    `nice -n 10 sh -c '<script>' sh <state-change log or ''> <dirs>` (at a lower priority: it
    walks every partition directory, and on a busy broker the broker's own work comes first).

    Every argument is quoted with shlex.quote (sudo, where configured, is the transport's:
    remediate/transport.py). Its stdout is printable ASCII (see the module docstring).
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
    return " ".join(shlex.quote(word) for word in words)
