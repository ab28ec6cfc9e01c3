"""The broker inventory's record format: its tokens and one regular expression per record.

The command (script.py) prints it, the parser (parser.py) and the bulk reader (bulk.py) read
it. Output is one record per line, fields separated by one space; HEX is lowercase hex of raw
bytes, PLAIN a name of bytes from [A-Za-z0-9._-], TEXT bytes from space to '~' (no tab), N a
decimal number; `I` is the log dir's 0-based position in the command's arguments:

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

Content is reconstructed as the lines joined with b"\\n". awk's getline splits on "\\n" only and
drops each line's "\\n", so a final newline is not seen (b"a\\n" reads as b"a") and "\\r" stays at
the end of a line. Both are harmless for partition.metadata: Kafka's reader splits lines on
"\\n", "\\r" or "\\r\\n" and ignores a final terminator and any line after the second.
"""

from __future__ import annotations

import re

FORMAT_VERSION = 2
HEADER = "remediate-inventory"
TRAILER = "end"
# The two files a partition directory's records report, as WHICH names them.
METADATA = "metadata"
EPOCH = "epoch"

NUMBER = "(0|[1-9][0-9]{0,17})"  # at most 18 digits: a huge number is malformed, not slow
HEX = "((?:[0-9a-f]{2})+)"
PLAIN = "([A-Za-z0-9._-]+)"
WHICH = f"({METADATA}|{EPOCH})"
UNREADABLE_REASON = "(directory|symlink|special|error)"

HEADER_RE = re.compile(f"{HEADER} {NUMBER} awk-nul=([01])")
L_RE = re.compile(f"L {NUMBER} {HEX} (present|missing|not_a_directory|unreadable)")
PLAIN_NAME_RE = re.compile(PLAIN)
D_RE = re.compile(f"D {NUMBER} {HEX}")
PLAIN_D_RE = re.compile(f"d {NUMBER} {PLAIN}")
F_PRESENT_RE = re.compile(f"F {NUMBER} {HEX} {WHICH} present {NUMBER} ({NUMBER}|-) ([01])")
PLAIN_F_PRESENT_RE = re.compile(f"f {NUMBER} {PLAIN} {WHICH} present {NUMBER} ({NUMBER}|-) ([01])")
F_UNREADABLE_RE = re.compile(f"F {NUMBER} {HEX} {WHICH} unreadable {UNREADABLE_REASON}")
PLAIN_F_UNREADABLE_RE = re.compile(f"f {NUMBER} {PLAIN} {WHICH} unreadable {UNREADABLE_REASON}")
INLINE_RE = re.compile("[ -~\t]*")  # plain-text lines, tab-separated
T_RE = re.compile(f"T(?: {HEX})?")
Z_RE = re.compile(f"Z {NUMBER} {NUMBER}")
END_RE = re.compile(f"{TRAILER} {NUMBER}")
R_RE = re.compile(f"R (?:(missing|unreadable)|present {NUMBER} ([01]) {NUMBER})")
J_RE = re.compile(f"J {HEX}")

# The records inside a log dir, by their first letter, as errors name them.
RECORD_NAMES = {
    "L": "log dir",
    "D": "directory",
    "d": "directory",
    "F": "file",
    "f": "file",
    "T": "content line",
    "Z": "end",
}
