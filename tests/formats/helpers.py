"""Shared assertions and hypothesis strategies for the format tests."""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st

from remediate.errors import FormatError
from remediate.formats.topic_id import TopicId

# Pure parsers: many examples are cheap, but keep the whole directory well under 30 s.
FAST = settings(max_examples=200, deadline=None)
QUICK = settings(max_examples=100, deadline=None)
# For tests parametrized over every decoder: each decoder gets this many documents.
PER_DECODER = settings(max_examples=50, deadline=None)

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

# A real id and its bytes (checked with java.util.Base64 / Uuid.fromString).
TOPIC_ID_TEXT = "J4HMUnGPS7KPVIjY6FgUvg"
TOPIC_ID = TopicId(bytes.fromhex("2781cc52718f4bb28f5488d8e85814be"))
OTHER_ID_TEXT = "_____________________w"  # sixteen 0xff bytes: the URL-safe alphabet's '_'
ZERO_TEXT = "AAAAAAAAAAAAAAAAAAAAAA"

LEGAL_TOPIC_CHARS = string.ascii_letters + string.digits + "._-"
JAVA_WHITESPACE = " \t\n\x0b\f\r"


def expect_format_error(call: Callable[[], object], *, source: str, field: str) -> FormatError:
    """Run `call`, which must raise FormatError naming `source` and `field`."""
    with pytest.raises(FormatError) as info:
        call()
    error = info.value
    assert error.source == source
    assert error.field == field
    assert str(error).startswith(f"{source}: {field}: expected ")
    return error


def returns_or_format_error(call: Callable[[], Any], *, source: str) -> Any:
    """The value `call` returns, or the FormatError it raises (which must name `source`).

    Any other exception propagates and fails the test: hostile input may be refused, never
    crash a parser.
    """
    try:
        return call()
    except FormatError as error:
        caught = error
    assert caught.source == source
    assert str(caught).startswith(f"{source}: {caught.field}: expected ")
    assert len(caught.got) <= 80
    return caught


topic_ids = st.binary(min_size=16, max_size=16).map(TopicId)
nonzero_topic_ids = topic_ids.filter(lambda topic_id: not topic_id.is_zero)
int32s = st.integers(*INT32)
int64s = st.integers(*INT64)
legal_topics = st.text(alphabet=LEGAL_TOPIC_CHARS, min_size=1, max_size=249).filter(
    lambda name: name not in (".", "..")
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=10,
)
