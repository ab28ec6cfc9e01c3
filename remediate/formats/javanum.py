"""Java's integer parsing, which Kafka applies to version lines, offsets and partition numbers.

`Integer.parseInt` / `Long.parseLong` accept an optional '+' or '-' and one or more decimal
digits of any script (Unicode category Nd), and nothing else: no spaces, no underscores, no
empty string. Python's int() accepts more than that, so it is never used on untrusted text.
"""

from __future__ import annotations

import unicodedata

INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)


def parse_java_int(text: str, bounds: tuple[int, int] = INT_RANGE) -> int | None:
    """The value Java would parse from `text`, or None where Java throws NumberFormatException."""
    if not text:
        return None
    sign = 1
    digits = text
    if text[0] in "+-":
        sign = -1 if text[0] == "-" else 1
        digits = text[1:]
    if not digits:
        return None
    value = 0
    for char in digits:
        # Java looks at UTF-16 code units: a digit outside the BMP is two surrogates, not a digit.
        digit = unicodedata.decimal(char, None) if ord(char) <= 0xFFFF else None
        if digit is None:
            return None
        value = value * 10 + digit
    value *= sign
    low, high = bounds
    if not low <= value <= high:
        return None
    return value


def parse_java_long(text: str) -> int | None:
    return parse_java_int(text, LONG_RANGE)
