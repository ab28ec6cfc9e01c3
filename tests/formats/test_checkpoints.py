"""Checkpoint files: leader-epoch-checkpoint and the log-dir offset checkpoints (CheckpointFile)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.logdir import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    ROOT_CHECKPOINTS,
    EpochEntry,
    encode_leader_epoch_checkpoint,
    encode_offset_checkpoint,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
)
from tests.formats.helpers import (
    FAST,
    expect_format_error,
    int32s,
    int64s,
    legal_topics,
    returns_or_format_error,
)

EPOCHS = f"/var/lib/kafka/data/orders-0/{LEADER_EPOCH_CHECKPOINT}"
OFFSETS = f"/var/lib/kafka/data/{REPLICATION_OFFSET_CHECKPOINT}"
LONG_MAX = 2**63 - 1


def test_root_checkpoint_names() -> None:
    assert ROOT_CHECKPOINTS == (
        REPLICATION_OFFSET_CHECKPOINT,
        RECOVERY_POINT_OFFSET_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
    )
    assert LEADER_EPOCH_CHECKPOINT == "leader-epoch-checkpoint"


# -- leader-epoch-checkpoint -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"", [], id="empty-file-no-entries"),
        pytest.param(b"0", [], id="version-only"),
        pytest.param(b"0\n", [], id="version-line-only"),
        pytest.param(b"0\n0\n", [], id="zero-entries"),
        pytest.param(b"0\n0", [], id="zero-entries-no-newline"),
        pytest.param(b"0\n2\n0 0\n3 1500\n", [(0, 0), (3, 1500)], id="kafka-example"),
        pytest.param(b"0\n2\n0 0\n3 1500", [(0, 0), (3, 1500)], id="no-final-newline"),
        pytest.param(b"0\r\n1\r\n4 10\r\n", [(4, 10)], id="crlf"),
        pytest.param(b"0\r1\r4 10\r", [(4, 10)], id="cr-only"),
        pytest.param(b"0\n1\n4 \t 10\n", [(4, 10)], id="spaces-and-tab-between"),
        pytest.param(b"0\n1\n4 10 \n", [(4, 10)], id="trailing-blank-dropped-by-split"),
        pytest.param(b"+0\n+1\n+4 +10\n", [(4, 10)], id="plus-signs"),
        pytest.param("٠\n١\n٤ ١٠\n".encode(), [(4, 10)], id="arabic-indic-digits"),
        pytest.param(b"00\n01\n-1 -1\n", [(-1, -1)], id="leading-zeros-and-negatives"),
        pytest.param(
            b"0\n1\n2147483647 9223372036854775807\n",
            [(2**31 - 1, LONG_MAX)],
            id="int-and-long-max",
        ),
        pytest.param(b"0\n2\n1 5\n1 5\n", [(1, 5), (1, 5)], id="duplicates-kept-in-order"),
    ],
)
def test_leader_epoch_valid(data: bytes, expected: list[tuple[int, int]]) -> None:
    entries = parse_leader_epoch_checkpoint(data, source=EPOCHS)
    assert entries == [EpochEntry(epoch, offset) for epoch, offset in expected]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param(b"1\n0\n", "version", id="version-1"),
        pytest.param(b"-1\n0\n", "version", id="version-minus-1"),
        pytest.param(b"x\n0\n", "version", id="version-not-a-number"),
        pytest.param(b" 0\n0\n", "version", id="version-leading-space"),
        pytest.param(b"0 \n0\n", "version", id="version-trailing-space"),
        pytest.param(b"\n", "version", id="blank-version-line"),
        pytest.param(b"0\nx\n", "count", id="count-not-a-number"),
        pytest.param(b"0\n\n", "count", id="blank-count-line"),
        pytest.param(b"0\n-1\n", "count", id="negative-count"),
        pytest.param(b"0\n1\n", "count", id="count-1-no-entries"),
        pytest.param(b"0\n1\n0 0\n1 5\n", "count", id="more-entries-than-count"),
        pytest.param(b"0\n3\n0 0\n1 5\n", "count", id="fewer-entries-than-count"),
        pytest.param(b"0\n1\n 0 0\n", "entry", id="entry-leading-space"),
        pytest.param(b"0\n1\n\t0 0\n", "entry", id="entry-leading-tab"),
        pytest.param(b"0\n1\n0\n", "entry", id="entry-one-field"),
        pytest.param(b"0\n1\n0 0 0\n", "entry", id="entry-three-fields"),
        pytest.param(b"0\n1\n0,0\n", "entry", id="entry-comma"),
        pytest.param(b"0\n1\n0 x\n", "entry", id="entry-offset-not-a-number"),
        pytest.param(b"0\n1\n2147483648 0\n", "entry", id="entry-epoch-overflows-int"),
        pytest.param(b"0\n1\n0 9223372036854775808\n", "entry", id="entry-offset-overflows-long"),
        pytest.param(b"0\n1\n0 0\n\n", "entry", id="blank-line-after-entries"),
        # Kafka parses every entry before it compares the count.
        pytest.param(b"0\n2\nbad\n", "entry", id="bad-entry-reported-before-count"),
        pytest.param(b"0\n1\n0 \xff\n", "encoding", id="non-utf8"),
    ],
)
def test_leader_epoch_invalid(data: bytes, field: str) -> None:
    error = expect_format_error(
        lambda: parse_leader_epoch_checkpoint(data, source=EPOCHS), source=EPOCHS, field=field
    )
    assert EPOCHS in str(error)


def test_leader_epoch_encoder_exact_bytes() -> None:
    entries = [EpochEntry(0, 0), EpochEntry(3, 1500)]
    assert encode_leader_epoch_checkpoint(entries) == b"0\n2\n0 0\n3 1500\n"
    assert encode_leader_epoch_checkpoint([]) == b"0\n0\n"
    assert encode_leader_epoch_checkpoint(iter(entries)) == b"0\n2\n0 0\n3 1500\n"


@FAST
@given(st.lists(st.builds(EpochEntry, int32s, int64s), max_size=20))
def test_leader_epoch_round_trip(entries: list[EpochEntry]) -> None:
    data = encode_leader_epoch_checkpoint(entries)
    assert parse_leader_epoch_checkpoint(data, source=EPOCHS) == entries


# -- offset checkpoints ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"", {}, id="empty-file"),
        pytest.param(b"0\n", {}, id="version-only"),
        pytest.param(b"0\n0\n", {}, id="zero-entries"),
        pytest.param(
            b"0\n2\norders 0 5\nmy.topic-with-dash 12 100\n",
            {("orders", 0): 5, ("my.topic-with-dash", 12): 100},
            id="two-entries",
        ),
        pytest.param(
            b"0\n1\n__consumer_offsets\t3  7\n", {("__consumer_offsets", 3): 7}, id="tabs"
        ),
        pytest.param(b"0\r\n1\r\nt 0 5\r\n", {("t", 0): 5}, id="crlf"),
        pytest.param(b"0\n2\nt 0 5\nt 0 9\n", {("t", 0): 9}, id="later-duplicate-wins"),
        pytest.param(b"0\n1\nt -1 -5\n", {("t", -1): -5}, id="negatives-parse"),
        pytest.param("0\n1\nt ٣ ٥\n".encode(), {("t", 3): 5}, id="unicode-digits"),
        pytest.param(b"0\n1\nnot/a:topic 0 1\n", {("not/a:topic", 0): 1}, id="topic-unchecked"),
        pytest.param(b"0\n1\nt 0 9223372036854775807", {("t", 0): LONG_MAX}, id="long-max"),
    ],
)
def test_offsets_valid(data: bytes, expected: dict[tuple[str, int], int]) -> None:
    assert parse_offset_checkpoint(data, source=OFFSETS) == expected


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param(b"1\n0\n", "version", id="version-1"),
        pytest.param(b"v0\n0\n", "version", id="version-text"),
        pytest.param(b"0\none\n", "count", id="count-text"),
        pytest.param(b"0\n2\nt 0 5\n", "count", id="count-mismatch"),
        pytest.param(b"0\n0\nt 0 5\n", "count", id="entries-beyond-count"),
        pytest.param(b"0\n1\n t 0 5\n", "entry", id="leading-whitespace"),
        pytest.param(b"0\n1\nt 0\n", "entry", id="two-fields"),
        pytest.param(b"0\n1\nt 0 5 6\n", "entry", id="four-fields"),
        pytest.param(b"0\n1\nmy topic 0 5\n", "entry", id="space-in-topic"),
        pytest.param(b"0\n1\nt x 5\n", "entry", id="partition-not-a-number"),
        pytest.param(b"0\n1\nt 2147483648 5\n", "entry", id="partition-overflows-int"),
        pytest.param(b"0\n1\nt 0 5.0\n", "entry", id="offset-decimal"),
        pytest.param(b"0\n1\nt\xff 0 5\n", "encoding", id="non-utf8"),
    ],
)
def test_offsets_invalid(data: bytes, field: str) -> None:
    expect_format_error(
        lambda: parse_offset_checkpoint(data, source=OFFSETS), source=OFFSETS, field=field
    )


def test_offsets_encoder_exact_bytes_sorted() -> None:
    offsets = {("b", 1): 5, ("a", 10): 7, ("a", 2): 3}
    assert encode_offset_checkpoint(offsets) == b"0\n3\na 2 3\na 10 7\nb 1 5\n"
    assert encode_offset_checkpoint({}) == b"0\n0\n"


@FAST
@given(st.dictionaries(st.tuples(legal_topics, int32s), int64s, max_size=12))
def test_offsets_round_trip(offsets: dict[tuple[str, int], int]) -> None:
    data = encode_offset_checkpoint(offsets)
    assert parse_offset_checkpoint(data, source=OFFSETS) == offsets


fragments = [
    b"0",
    b"1",
    b"2",
    b"-",
    b"+",
    b" ",
    b"\t",
    b"\n",
    b"\r",
    b"t",
    b"x",
    b"\xff",
    b"99999999999",
]


@FAST
@given(
    st.binary(max_size=60)
    | st.lists(st.sampled_from(fragments), max_size=20).map(b"".join)
    | st.lists(st.sampled_from(fragments), max_size=16).map(
        lambda parts: b"0\n1\n" + b"".join(parts)
    )
)
def test_hostile_bytes(data: bytes) -> None:
    epochs = returns_or_format_error(
        lambda: parse_leader_epoch_checkpoint(data, source=EPOCHS), source=EPOCHS
    )
    offsets = returns_or_format_error(
        lambda: parse_offset_checkpoint(data, source=OFFSETS), source=OFFSETS
    )
    assert isinstance(epochs, list) or epochs.field in ("version", "count", "entry", "encoding")
    assert isinstance(offsets, dict) or offsets.field in ("version", "count", "entry", "encoding")
