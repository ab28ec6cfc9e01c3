"""Integer.parseInt / Long.parseLong, the number parser behind every Kafka text format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.javanum import INT_RANGE, LONG_RANGE, parse_java_int, parse_java_long
from tests.formats.helpers import FAST, INT32, int32s, int64s


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("0", 0, id="zero"),
        pytest.param("+0", 0, id="plus-zero"),
        pytest.param("-0", 0, id="minus-zero"),
        pytest.param("00", 0, id="double-zero"),
        pytest.param("007", 7, id="leading-zeros"),
        pytest.param("-12", -12, id="negative"),
        pytest.param("2147483647", 2**31 - 1, id="int-max"),
        pytest.param("-2147483648", -(2**31), id="int-min"),
        pytest.param("٣", 3, id="arabic-indic-digit"),
        pytest.param("४२", 42, id="devanagari-digits"),
        pytest.param("０１", 1, id="fullwidth-digits"),
        pytest.param("߀", 0, id="nko-digit-zero"),
        pytest.param("1٣", 13, id="mixed-scripts"),
    ],
)
def test_parse_java_int_accepts(text: str, expected: int) -> None:
    assert parse_java_int(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("+", id="sign-only-plus"),
        pytest.param("-", id="sign-only-minus"),
        pytest.param("+-1", id="two-signs"),
        pytest.param("--1", id="double-minus"),
        pytest.param(" 1", id="leading-space"),
        pytest.param("1 ", id="trailing-space"),
        pytest.param("1\n", id="trailing-newline"),
        pytest.param("1_000", id="underscore"),
        pytest.param("1.0", id="decimal-point"),
        pytest.param("1e3", id="exponent"),
        pytest.param("0x1", id="hex"),
        pytest.param("2147483648", id="int-max-plus-one"),
        pytest.param("-2147483649", id="int-min-minus-one"),
        pytest.param("²", id="superscript-two-is-not-Nd"),
        pytest.param("Ⅻ", id="roman-numeral-is-not-Nd"),
        pytest.param("𝟎", id="digit-outside-bmp-is-two-utf16-units"),
    ],
)
def test_parse_java_int_rejects(text: str) -> None:
    assert parse_java_int(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("9223372036854775807", 2**63 - 1, id="long-max"),
        pytest.param("-9223372036854775808", -(2**63), id="long-min"),
        pytest.param("2147483648", 2**31, id="beyond-int"),
        pytest.param("9223372036854775808", None, id="long-max-plus-one"),
        pytest.param("", None, id="empty"),
    ],
)
def test_parse_java_long(text: str, expected: int | None) -> None:
    assert parse_java_long(text) == expected


def test_custom_bounds() -> None:
    assert parse_java_int("5", (0, 10)) == 5
    assert parse_java_int("-1", (0, 10)) is None
    assert parse_java_int("11", (0, 10)) is None
    assert (INT_RANGE, LONG_RANGE) == (INT32, (-(2**63), 2**63 - 1))


@FAST
@given(int32s, st.integers(min_value=0, max_value=3))
def test_int_round_trip(value: int, zeros: int) -> None:
    assert parse_java_int(str(value)) == value
    sign = "-" if value < 0 else "+"
    assert parse_java_int(sign + "0" * zeros + str(abs(value))) == value


@FAST
@given(int64s)
def test_long_round_trip(value: int) -> None:
    assert parse_java_long(str(value)) == value
    assert parse_java_int(str(value)) == (value if INT32[0] <= value <= INT32[1] else None)


@FAST
@given(st.text(max_size=25))
def test_arbitrary_text_is_an_int_or_none(text: str) -> None:
    value = parse_java_int(text)
    assert value is None or INT32[0] <= value <= INT32[1]
    if text.isascii() and text.lstrip("+-").isdigit() and len(text.lstrip("+-")) + 1 >= len(text):
        assert value == (int(text) if INT32[0] <= int(text) <= INT32[1] else None)
