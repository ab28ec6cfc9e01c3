"""java.util.Properties text format, as Kafka reads `meta.properties` and `server.properties`.

Implements Properties.load's rules: natural lines end at \\n, \\r or \\r\\n; '#' or '!' start a
comment; a key ends at the first unescaped '=', ':' or white space; a trailing odd backslash
continues the line; \\t \\n \\r \\f \\uXXXX escapes; any other escaped character stands for itself.
Java strings are UTF-16, so two \\uXXXX escapes that form a surrogate pair are one character.

Kafka reads these files with Properties.load(InputStream), which decodes ISO-8859-1, and writes
them with Properties.store(OutputStream), which escapes every character outside ' '..'~' as
\\uXXXX; both are done the same way here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from remediate.errors import FormatError

_BLANK = " \t\f"


def _logical_lines(text: str) -> list[str]:
    """The logical lines of `text`, as successive LineReader.readLine calls return them."""
    result: list[str] = []
    offset = 0
    while True:
        line, offset = _read_line(text, offset)
        if line is None:
            return result
        result.append(line)


def _read_line(text: str, offset: int) -> tuple[str | None, int]:
    """A port of java.util.Properties.LineReader.readLine (JDK 9 and later).

    Natural lines end at \\n, \\r or \\r\\n. Leading blanks and blank lines are skipped; a line
    whose first character is '#' or '!' is a comment. An odd run of backslashes at the end of a
    line joins it to the next one (minus that backslash and the next line's leading blanks). A
    logical line that is still empty at a line end is no line at all (so '#' after it starts a
    comment), yet one that meets the end of the input right after its backslash, or after one
    \\n or \\r following it, is returned even if empty.
    """
    chars: list[str] = []
    skip_blanks = True
    continued = False  # inside a continuation: a line end here ends the logical line
    backslash = False  # an odd run of backslashes ends `chars`
    end = len(text)
    while True:
        if offset >= end:
            if not chars:
                return None, offset
            return "".join(chars[:-1] if backslash else chars), offset
        char = text[offset]
        offset += 1
        if skip_blanks:
            if char in _BLANK or (not continued and char in "\r\n"):
                continue
            skip_blanks = continued = False
        if not chars and char in "#!":
            while offset < end and text[offset] not in "\r\n":
                offset += 1
            if offset >= end:
                return None, offset
            offset += 1
            skip_blanks = True
            continue
        if char not in "\r\n":
            chars.append(char)
            backslash = not backslash if char == "\\" else False
            continue
        if not chars:
            skip_blanks = True
            continue
        if offset >= end or not backslash:
            return "".join(chars[:-1] if backslash else chars), offset
        chars.pop()
        skip_blanks = continued = True
        backslash = False
        if char == "\r" and text[offset] == "\n":
            offset += 1


def _unescape(text: str, *, source: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 >= len(text):
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise FormatError(source, "escape", "\\uXXXX with four hex digits", text[i : i + 6])
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return _join_surrogates("".join(out))


def _join_surrogates(text: str) -> str:
    """Turn each UTF-16 surrogate pair (as \\uD83D\\uDE00 produces) into one code point."""
    if not any("\ud800" <= char <= "\udfff" for char in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _split_key(line: str) -> tuple[str, str]:
    """Split a logical line into raw key and raw value, as Properties.load0 does."""
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    preceding_backslash = False
    for index, char in enumerate(line):
        if char in "=:" and not preceding_backslash:
            key_end, value_start, has_separator = index, index + 1, True
            break
        if char in _BLANK and not preceding_backslash:
            key_end, value_start = index, index + 1
            break
        preceding_backslash = (not preceding_backslash) if char == "\\" else False
    while value_start < len(line):
        char = line[value_start]
        if char not in _BLANK:
            if has_separator or char not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def load_properties(data: bytes | str, *, source: str) -> dict[str, str]:
    """Parse a properties file as Properties.load does.

    Bytes are decoded as ISO-8859-1, as Properties.load(InputStream) does (Kafka's
    Utils.loadProps): raw UTF-8 bytes are read as Latin-1 characters, exactly as Kafka sees them.
    Text is taken as it is, as Properties.load(Reader) does.
    """
    text = data.decode("latin-1") if isinstance(data, bytes) else data
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key(line)
        result[_unescape(key, source=source)] = _unescape(value, source=source)
    return result


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char == "\t":
            out.append("\\t")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\f":
            out.append("\\f")
        elif char in "=:#!" or (char == " " and (is_key or index == 0)):
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            # Properties.store(OutputStream) escapes each UTF-16 code unit outside ' '..'~'.
            units = char.encode("utf-16-be", "surrogatepass")
            out += [f"\\u{units[i]:02X}{units[i + 1]:02X}" for i in range(0, len(units), 2)]
    return "".join(out)


def dump_properties(values: Mapping[str, str], *, now: datetime | None = None) -> bytes:
    """Write the way Properties.store(OutputStream) does: a comment line, a date line, then
    key=value lines in printable ASCII (anything else as \\uXXXX)."""
    stamp = (now or datetime.now(UTC)).strftime("%a %b %d %H:%M:%S UTC %Y")
    lines = ["#", f"#{stamp}"]
    lines += [f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in values.items()]
    return ("\n".join(lines) + "\n").encode("ascii")
