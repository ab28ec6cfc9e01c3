"""Topic ids: exactly what Uuid.fromString accepts (java.util.Base64 URL decoder, 16 bytes)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.topic_id import ZERO_ID, ZERO_ID_TEXT, TopicId, parse_topic_id
from tests.formats.helpers import (
    FAST,
    OTHER_ID_TEXT,
    TOPIC_ID,
    TOPIC_ID_TEXT,
    ZERO_TEXT,
    expect_format_error,
    returns_or_format_error,
    topic_ids,
)

SOURCE = "/brokers/topics/orders"
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@pytest.mark.parametrize(
    ("text", "raw_hex", "canonical"),
    [
        pytest.param(
            TOPIC_ID_TEXT, "2781cc52718f4bb28f5488d8e85814be", TOPIC_ID_TEXT, id="unpadded-22"
        ),
        pytest.param(
            TOPIC_ID_TEXT + "==",
            "2781cc52718f4bb28f5488d8e85814be",
            TOPIC_ID_TEXT,
            id="padded-24-ending-in-==",
        ),
        pytest.param(OTHER_ID_TEXT, "ff" * 16, OTHER_ID_TEXT, id="underscore-is-url-safe-63"),
        pytest.param(
            "---------------------w",
            "fbefbe" * 5 + "fb",
            "---------------------w",
            id="dash-is-url-safe-62",
        ),
        pytest.param(ZERO_TEXT, "00" * 16, ZERO_TEXT, id="zero-id-parses-here"),
        # The last character carries 2 bits; java.util.Base64 ignores the other 4, as Python does.
        pytest.param(
            "J4HMUnGPS7KPVIjY6FgUvh",
            "2781cc52718f4bb28f5488d8e85814be",
            TOPIC_ID_TEXT,
            id="unused-trailing-bits-ignored",
        ),
        pytest.param("AAAAAAAAAAAAAAAAAAAAAP", "00" * 16, ZERO_TEXT, id="zero-id-non-canonical"),
    ],
)
def test_valid_ids(text: str, raw_hex: str, canonical: str) -> None:
    topic_id = parse_topic_id(text, source=SOURCE)
    assert topic_id.raw == bytes.fromhex(raw_hex)
    assert str(topic_id) == canonical
    assert topic_id.is_zero == (canonical == ZERO_TEXT)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param(TOPIC_ID_TEXT[:21], id="21-chars"),
        pytest.param(TOPIC_ID_TEXT + "A", id="23-chars-17-bytes"),
        pytest.param(TOPIC_ID_TEXT + "AA", id="24-chars-unpadded-18-bytes"),
        pytest.param(TOPIC_ID_TEXT + "=", id="single-pad"),
        pytest.param(TOPIC_ID_TEXT + "===", id="three-pads-25-chars"),
        pytest.param(TOPIC_ID_TEXT + "==A", id="data-after-padding"),
        pytest.param(TOPIC_ID_TEXT[:10] + "=" + TOPIC_ID_TEXT[11:], id="pad-in-the-middle"),
        pytest.param(TOPIC_ID_TEXT[:21] + "=A", id="pad-then-data"),
        pytest.param(TOPIC_ID_TEXT[:20] + "==", id="20-chars-padded-15-bytes"),
        pytest.param(TOPIC_ID_TEXT[:21] + "+", id="standard-alphabet-plus"),
        pytest.param(TOPIC_ID_TEXT[:21] + "/", id="standard-alphabet-slash"),
        pytest.param(TOPIC_ID_TEXT + " ", id="trailing-space"),
        pytest.param(" " + TOPIC_ID_TEXT, id="leading-space"),
        pytest.param(TOPIC_ID_TEXT + "\n", id="trailing-newline"),
        pytest.param(TOPIC_ID_TEXT[:21] + "é", id="non-ascii"),
        pytest.param(TOPIC_ID_TEXT[:21] + "Ａ", id="fullwidth-letter"),
        pytest.param(TOPIC_ID_TEXT * 2, id="far-too-long"),
    ],
)
def test_invalid_ids(text: str) -> None:
    expect_format_error(
        lambda: parse_topic_id(text, source=SOURCE), source=SOURCE, field="topic_id"
    )


def test_invalid_id_names_the_given_field() -> None:
    error = expect_format_error(
        lambda: parse_topic_id("nope", source=SOURCE, field="partitions.topic_id"),
        source=SOURCE,
        field="partitions.topic_id",
    )
    assert "'nope'" in str(error)


@pytest.mark.parametrize("value", [None, 42, b"J4HMUnGPS7KPVIjY6FgUvg", ["x"]], ids=repr)
def test_non_string_is_a_format_error(value: object) -> None:
    expect_format_error(
        lambda: parse_topic_id(value, source=SOURCE),  # type: ignore[arg-type]
        source=SOURCE,
        field="topic_id",
    )


def test_zero_id_constants() -> None:
    assert ZERO_ID.is_zero
    assert str(ZERO_ID) == ZERO_ID_TEXT == ZERO_TEXT
    assert parse_topic_id(ZERO_ID_TEXT, source=SOURCE) == ZERO_ID
    assert not TOPIC_ID.is_zero


@pytest.mark.parametrize("size", [0, 15, 17, 22])
def test_topic_id_holds_exactly_16_bytes(size: int) -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        TopicId(bytes(size))


def test_random_ids_are_never_reserved() -> None:
    """Uuid.randomUuid never returns the zero id, the sentinel 1, or text starting with '-'."""
    seen = {TopicId.random() for _ in range(500)}
    assert len(seen) == 500
    for topic_id in seen:
        text = str(topic_id)
        assert not topic_id.is_zero
        assert topic_id.raw != bytes(15) + b"\x01"
        assert not text.startswith("-")
        assert len(text) == 22
        assert parse_topic_id(text, source=SOURCE) == topic_id


@FAST
@given(topic_ids)
def test_str_then_parse_is_identity(topic_id: TopicId) -> None:
    text = str(topic_id)
    assert len(text) == 22
    assert set(text) <= set(B64URL)
    assert text == base64.urlsafe_b64encode(topic_id.raw).decode("ascii")[:22]
    assert parse_topic_id(text, source=SOURCE) == topic_id
    assert parse_topic_id(text + "==", source=SOURCE) == topic_id


@FAST
@given(st.text(alphabet=B64URL + "=+/ é\n", max_size=26) | st.text(max_size=30))
def test_arbitrary_text_parses_or_raises_format_error(text: str) -> None:
    result = returns_or_format_error(lambda: parse_topic_id(text, source=SOURCE), source=SOURCE)
    if isinstance(result, TopicId):
        assert len(text) in (22, 24)
        assert set(text[:22]) <= set(B64URL)
        assert text[22:] in ("", "==")
        assert parse_topic_id(str(result), source=SOURCE) == result
    else:
        assert result.field == "topic_id"
