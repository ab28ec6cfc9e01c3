"""java.util.Properties text format, as Kafka reads `meta.properties` and `server.properties`.

Implements Properties.load's rules: natural lines end at \\n, \\r or \\r\\n; '#' or '!' start a
comment; a key ends at the first unescaped '=', ':' or white space; a trailing odd backslash
continues the line; \\t \\n \\r \\f \\uXXXX escapes; any other escaped character stands for itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

from remediate.errors import FormatError

_BLANK = " \t\f"


def _natural_lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _logical_lines(text: str) -> list[str]:
    """Join continuation lines the way LineReader does; drop comments and blank lines."""
    result: list[str] = []
    pending: str | None = None
    for raw in _natural_lines(text):
        line = raw.lstrip(_BLANK)
        if pending is None:
            if not line or line[0] in "#!":
                continue
        else:
            line = pending + line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = line[:-1]
            continue
        pending = None
        result.append(line)
    if pending is not None:
        result.append(pending)
    return result


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
    return "".join(out)


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
    """Parse a properties file. Kafka writes them in ISO-8859-1 or UTF-8; both decode here."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
    else:
        text = data
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
        else:
            out.append(char)
    return "".join(out)


def dump_properties(values: Mapping[str, str], *, now: datetime | None = None) -> bytes:
    """Write the way Properties.store does: a comment line, a date line, key=value lines."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%a %b %d %H:%M:%S UTC %Y")
    lines = ["#", f"#{stamp}"]
    lines += [f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in values.items()]
    return ("\n".join(lines) + "\n").encode("utf-8")
