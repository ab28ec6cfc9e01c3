"""Small typed accessors for the JSON documents Kafka keeps in ZooKeeper.

Kafka's reader (kafka.utils.json) is strict about types: an int field must be a JSON
integer, a list of broker ids a list of integers. These helpers apply the same rules and name
the znode and field in every error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from remediate.errors import FormatError

JsonObject = Mapping[str, Any]

# Kafka ids, epochs and ports are Java ints.
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def load_object(data: bytes | None, *, source: str) -> JsonObject:
    """Decode a znode's bytes into a JSON object, or raise FormatError.

    As Kafka's Json.parseBytes (Jackson's readTree) reads them: the encoding detected from the
    first bytes (UTF-8 with or without a byte-order mark, UTF-16 or UTF-32), the first JSON
    value read, and whatever follows it ignored.
    """
    if data is None or data == b"":
        raise FormatError(source, "data", "a JSON object", data)
    try:
        text = data.decode(json.detect_encoding(data))
        start = len(text) - len(text.lstrip(_WHITESPACE))
        value, _end = _DECODER.raw_decode(text, start)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: nesting deeper than Python's stack; Jackson refuses it as well.
        raise FormatError(source, "data", "a JSON object", data[:60]) from exc
    if not isinstance(value, dict):
        raise FormatError(source, "data", "a JSON object", value)
    return value


def _reject_constant(name: str) -> object:
    """NaN and Infinity are not JSON; Python accepts them, Jackson (Kafka's parser) does not."""
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_WHITESPACE = " \t\n\r"


def dump(value: object) -> bytes:
    """Encode the way Kafka's Json.encodeAsBytes does: compact, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def get_int(obj: JsonObject, key: str, *, source: str, default: int | None = None) -> int:
    if key not in obj:
        if default is not None:
            return default
        raise FormatError(source, key, "an integer", None)
    return as_int(obj[key], source=source, field=key)


def as_int(value: object, *, source: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(source, field, "an integer", value)
    if not INT32_MIN <= value <= INT32_MAX:
        raise FormatError(source, field, "a 32-bit integer", value)
    return value


def get_str(obj: JsonObject, key: str, *, source: str) -> str:
    if key not in obj:
        raise FormatError(source, key, "a string", None)
    value = obj[key]
    if not isinstance(value, str):
        raise FormatError(source, key, "a string", value)
    return value


def get_int_list(obj: JsonObject, key: str, *, source: str) -> tuple[int, ...]:
    if key not in obj:
        raise FormatError(source, key, "a list of integers", None)
    return as_int_list(obj[key], source=source, field=key)


def as_int_list(value: object, *, source: str, field: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise FormatError(source, field, "a list of integers", value)
    return tuple(as_int(item, source=source, field=field) for item in value)


def get_object(obj: JsonObject, key: str, *, source: str) -> JsonObject:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise FormatError(source, key, "a JSON object", value)
    return value
