"""partition.metadata: what PartitionMetadataFile writes, and exactly what its reader accepts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.logdir import (
    PARTITION_METADATA,
    PartitionMetadata,
    encode_partition_metadata,
    parse_partition_metadata,
)
from remediate.formats.topic_id import TopicId
from tests.formats.helpers import (
    FAST,
    JAVA_WHITESPACE,
    TOPIC_ID,
    TOPIC_ID_TEXT,
    ZERO_TEXT,
    expect_format_error,
    nonzero_topic_ids,
    returns_or_format_error,
)

SOURCE = f"/var/lib/kafka/data/orders-3/{PARTITION_METADATA}"
ID = TOPIC_ID_TEXT.encode("ascii")


def test_encoder_writes_kafkas_exact_bytes() -> None:
    data = encode_partition_metadata(TOPIC_ID)
    assert data == b"version: 0\ntopic_id: J4HMUnGPS7KPVIjY6FgUvg"
    assert not data.endswith(b"\n")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"version: 0\ntopic_id: " + ID, id="exact-kafka-bytes"),
        pytest.param(b"version: 0\ntopic_id: " + ID + b"\n", id="trailing-newline"),
        pytest.param(b"version: 0\r\ntopic_id: " + ID + b"\r\n", id="crlf"),
        pytest.param(b"version: 0\rtopic_id: " + ID, id="cr-only"),
        pytest.param(b"version: 0\ntopic_id: " + ID + b"\nmore\n\nlines: x\n", id="extra-lines"),
        pytest.param(b"version: 0\ntopic_id: " + ID + b"\n\xc3\xa9", id="utf8-in-extra-line"),
        pytest.param(b"anything at all: 0\nid: " + ID, id="key-text-ignored"),
        pytest.param(b": 0\n: " + ID, id="empty-keys"),
        pytest.param(b"version : 0\ntopic_id : " + ID, id="space-before-colon-is-key"),
        pytest.param(b"  version: 0\n\ttopic_id: " + ID, id="leading-blanks-are-key"),
        pytest.param(b"\xef\xbb\xbfversion: 0\ntopic_id: " + ID, id="utf8-bom-is-part-of-key"),
        pytest.param(b"version:  \t 0\ntopic_id:\t\t" + ID, id="spaces-and-tabs-after-colon"),
        pytest.param(b"version:\x0b0\ntopic_id:\x0c" + ID, id="vertical-tab-form-feed"),
        pytest.param(b"version: 0\ntopic_id: " + ID + b"==", id="padded-24-char-id"),
        pytest.param(b"version: +0\ntopic_id: " + ID, id="version-plus-zero"),
        pytest.param(b"version: 00\ntopic_id: " + ID, id="version-double-zero"),
        pytest.param(b"version: -0\ntopic_id: " + ID, id="version-minus-zero"),
        pytest.param("version: ٠\ntopic_id: ".encode() + ID, id="version-arabic-indic-zero"),
        pytest.param("version: ०\ntopic_id: ".encode() + ID, id="version-devanagari-zero"),
        pytest.param("version: ０\ntopic_id: ".encode() + ID, id="version-fullwidth-zero"),
        # String.split drops trailing empty strings: "0: " splits into ["version", "0"].
        pytest.param(b"version: 0: \ntopic_id: " + ID + b": ", id="trailing-colon-space"),
        pytest.param(b"version: 0\ntopic_id: J4HMUnGPS7KPVIjY6FgUvh", id="unused-id-bits"),
    ],
)
def test_accepted_variants(data: bytes) -> None:
    assert parse_partition_metadata(data, source=SOURCE) == PartitionMetadata(0, TOPIC_ID)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param(b"", "version", id="empty-file"),
        pytest.param(b"\n", "version", id="blank-first-line"),
        pytest.param(b"version: 0", "topic_id", id="one-line"),
        pytest.param(b"version: 0\n", "topic_id", id="one-line-with-newline"),
        pytest.param(b"version: 0\n\ntopic_id: " + ID, "topic_id", id="blank-second-line"),
        pytest.param(b"version:0\ntopic_id: " + ID, "version", id="no-space-after-colon"),
        pytest.param(b"version 0\ntopic_id: " + ID, "version", id="no-colon"),
        pytest.param(b"version: 1\ntopic_id: " + ID, "version", id="version-1"),
        pytest.param(b"version: -1\ntopic_id: " + ID, "version", id="version-minus-1"),
        pytest.param(b"version: 0.0\ntopic_id: " + ID, "version", id="version-decimal"),
        pytest.param(b"version: 0 \ntopic_id: " + ID, "version", id="version-trailing-space"),
        pytest.param(b"version: 4294967296\ntopic_id: " + ID, "version", id="version-overflow"),
        pytest.param("version: 𝟎\ntopic_id: ".encode() + ID, "version", id="version-astral-digit"),
        pytest.param(b"version: \ntopic_id: " + ID, "version", id="version-missing"),
        pytest.param(b"a: b: 0\ntopic_id: " + ID, "version", id="three-parts"),
        pytest.param(b"topic_id: " + ID + b"\nversion: 0", "version", id="lines-swapped"),
        pytest.param(b"version: 0\ntopic_id: " + ZERO_TEXT.encode(), "topic_id", id="zero-id"),
        pytest.param(
            b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAB", "topic_id", id="zero-id-alias"
        ),
        pytest.param(b"version: 0\ntopic_id: " + ID[:-1] + b"AA", "topic_id", id="23-char-id"),
        pytest.param(b"version: 0\ntopic_id: " + ID[:-1], "topic_id", id="21-char-id"),
        pytest.param(b"version: 0\ntopic_id: " + ID + b"=", "topic_id", id="single-pad"),
        pytest.param(
            b"version: 0\ntopic_id: J4HMUnGPS7=PVIjY6FgUvg", "topic_id", id="pad-in-middle"
        ),
        pytest.param(b"version: 0\ntopic_id: " + ID + b" ", "topic_id", id="id-trailing-space"),
        pytest.param(b"version: 0\ntopic_id: " + ID + b"\t", "topic_id", id="id-trailing-tab"),
        pytest.param(b"version: 0\ntopic_id:" + ID, "topic_id", id="id-no-space-after-colon"),
        pytest.param(b"version: 0\ntopic_id: : " + ID, "topic_id", id="id-three-parts"),
        pytest.param(b"version: 0\ntopic_id: ", "topic_id", id="id-missing"),
        pytest.param(
            b"version: 0\ntopic_id: J4HMUnGPS7KPVIjY6FgU+g", "topic_id", id="id-standard-base64"
        ),
        pytest.param(b"version: 0\ntopic_id: \xff" + ID[1:], "encoding", id="non-utf8-in-id"),
        pytest.param(b"\xfeversion: 0\ntopic_id: " + ID, "encoding", id="non-utf8-in-key"),
        # Kafka decodes the whole (small) file strictly while filling its first buffer.
        pytest.param(
            b"version: 0\ntopic_id: " + ID + b"\n\xc0\x80", "encoding", id="bad-extra-line"
        ),
        pytest.param(
            b"version: 0\ntopic_id: \xed\xa0\x80", "encoding", id="utf8-encoded-surrogate"
        ),
    ],
)
def test_rejected(data: bytes, field: str) -> None:
    error = expect_format_error(
        lambda: parse_partition_metadata(data, source=SOURCE), source=SOURCE, field=field
    )
    assert str(error).startswith(SOURCE)


@FAST
@given(nonzero_topic_ids)
def test_encode_then_parse_is_identity(topic_id: TopicId) -> None:
    data = encode_partition_metadata(topic_id)
    assert data == b"version: 0\ntopic_id: " + str(topic_id).encode("ascii")
    assert parse_partition_metadata(data, source=SOURCE) == PartitionMetadata(0, topic_id)


line_end = st.sampled_from(["\n", "\r\n", "\r"])
key = st.text(st.characters(exclude_characters=":\r\n", exclude_categories=["Cs"]), max_size=10)
gap = st.text(alphabet=JAVA_WHITESPACE, min_size=1, max_size=4).filter(
    lambda text: "\n" not in text and "\r" not in text
)


@FAST
@given(
    topic_id=nonzero_topic_ids,
    keys=st.tuples(key, key),
    gaps=st.tuples(gap, gap),
    ends=st.tuples(line_end, line_end | st.just("")),
    version=st.sampled_from(["0", "+0", "-0", "000", "٠", "۰"]),
    padded=st.booleans(),
    tail=st.text(max_size=20),
)
def test_every_variant_kafka_accepts(
    topic_id: TopicId,
    keys: tuple[str, str],
    gaps: tuple[str, str],
    ends: tuple[str, str],
    version: str,
    padded: bool,
    tail: str,
) -> None:
    id_text = str(topic_id) + ("==" if padded else "")
    extra = ends[1] + tail if ends[1] else ""
    text = f"{keys[0]}:{gaps[0]}{version}{ends[0]}{keys[1]}:{gaps[1]}{id_text}{extra}"
    data = text.encode("utf-8")
    assert parse_partition_metadata(data, source=SOURCE) == PartitionMetadata(0, topic_id)


@FAST
@given(
    st.binary(max_size=80)
    | st.lists(
        st.sampled_from(
            [
                b"version",
                b"topic_id",
                b":",
                b" ",
                b"\t",
                b"\n",
                b"\r",
                b"0",
                b"+",
                ID,
                b"==",
                b"\xff",
            ]
        ),
        max_size=12,
    ).map(b"".join)
)
def test_hostile_bytes(data: bytes) -> None:
    result = returns_or_format_error(
        lambda: parse_partition_metadata(data, source=SOURCE), source=SOURCE
    )
    if isinstance(result, PartitionMetadata):
        assert result.version == 0
        assert not result.topic_id.is_zero
    else:
        assert result.field in ("version", "topic_id", "encoding")


# Kafka's reader (a BufferedReader over the file) decodes it 8 KiB at a time and reads two
# lines: bytes after the chunk in which the second line ends are never decoded.
GOOD = b"version: 0\ntopic_id: " + ID + b"\n"


@pytest.mark.parametrize(
    ("data", "accepted"),
    [
        pytest.param(GOOD + b"x" * 10_000, True, id="kilobytes-of-junk-after"),
        pytest.param(GOOD + b"x" * 9000 + b"\xff\xfe", True, id="bad-utf8-after-8k"),
        pytest.param(GOOD + b"x" * 100 + b"\xff", False, id="bad-utf8-in-the-first-8k"),
        pytest.param(
            GOOD + b"x" * (8192 - len(GOOD) - 1) + "é".encode(), True, id="char-across-8k"
        ),
        pytest.param(b"x" * 9000 + b"\n" + GOOD, False, id="first-line-past-8k"),
    ],
)
def test_only_the_first_two_lines_are_decoded_as_kafka_does(data: bytes, accepted: bool) -> None:
    if accepted:
        assert parse_partition_metadata(data, source=SOURCE).topic_id == TOPIC_ID
    else:
        expect_format_error(
            lambda: parse_partition_metadata(data, source=SOURCE),
            source=SOURCE,
            field="encoding" if b"\xff" in data else "version",
        )


def test_the_start_of_a_file_is_enough_when_both_lines_end_in_it() -> None:
    start = (GOOD + b"x" * 10_000)[:8192]
    assert parse_partition_metadata(start, source=SOURCE, whole=False).topic_id == TOPIC_ID
    cut = GOOD[:-1]  # the second line may go on past the cut
    expect_format_error(
        lambda: parse_partition_metadata(cut, source=SOURCE, whole=False),
        source=SOURCE,
        field="length",
    )
