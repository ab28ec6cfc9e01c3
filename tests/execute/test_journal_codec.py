"""The journal's blobs and records as ZooKeeper keeps them, and which copy of a journal wins."""

from __future__ import annotations

import contextlib
import json
import re
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.errors import JournalError
from remediate.execute.journal import JournalEvent, journal_line, journal_record, replay
from remediate.execute.journal_codec import Blob, decode_blob, decode_record, encode_blob
from remediate.execute.journal_mirror import choose_copy


@given(st.binary(max_size=4096), st.integers(min_value=1, max_value=300))
def test_a_blob_reads_back_whole_at_any_chunk_size(document: bytes, chunk: int) -> None:
    blob = encode_blob(document, chunk_bytes=chunk)
    assert all(len(c) <= chunk for c in blob.chunks)
    assert decode_blob(blob.head, blob.chunks, "t") == document


@settings(max_examples=300)
@given(st.binary(max_size=600), st.lists(st.binary(max_size=64), max_size=4))
def test_hostile_bytes_are_a_journal_error_or_nothing(head: bytes, chunks: list[bytes]) -> None:
    with contextlib.suppress(JournalError):
        decode_blob(head, chunks, "t")


@given(st.binary(min_size=1, max_size=2000), st.data())
def test_a_changed_byte_never_passes_for_the_document(document: bytes, data: st.DataObject) -> None:
    blob = encode_blob(document, chunk_bytes=64)
    stored = bytearray(blob.head + b"".join(blob.chunks))
    index = data.draw(st.integers(min_value=0, max_value=len(stored) - 1))
    stored[index] ^= data.draw(st.integers(min_value=1, max_value=255))
    head, chunks = bytes(stored[: len(blob.head)]), []
    rest = bytes(stored[len(blob.head) :])
    for c in blob.chunks:
        chunks.append(rest[: len(c)])
        rest = rest[len(c) :]
    with contextlib.suppress(JournalError):
        assert decode_blob(head, chunks, "t") == document


def head_of(length: int, digest: str, chunks: int = 0) -> bytes:
    fields = {"format": 1, "length": length, "sha256": digest, "chunks": chunks}
    return json.dumps(fields).encode() + b"\n"


@pytest.mark.parametrize(
    ("blob", "error"),
    [
        (Blob(b"no head line"), "no head line"),
        (Blob(b"[1]\n"), "exactly"),
        (Blob(head_of(3, "0" * 64, 1)), "0 chunk(s) where the head says 1"),
        (Blob(head_of(3, "0" * 64), (b"x",)), "stored whole"),
        (Blob(head_of(10**9, "0" * 64)), "not in 0.."),
        (Blob(head_of(3, "zz")), "not a sha256"),
        # A zip bomb: a megabyte of zeros stated as 3 bytes.
        (Blob(head_of(3, "0" * 64) + zlib.compress(bytes(10**6))), "more than the 3 bytes"),
        (Blob(head_of(3, "0" * 64) + zlib.compress(b"abc")[:-3]), "cut short"),
        (Blob(head_of(3, "0" * 64) + zlib.compress(b"abc")), "sha256 differs"),
    ],
)
def test_what_is_refused_and_why(blob: Blob, error: str) -> None:
    with pytest.raises(JournalError, match=error.replace("(", r"\(").replace(")", r"\)")):
        decode_blob(blob.head, blob.chunks, "t")


def line(seq: int, event: JournalEvent = JournalEvent.NOTE, **fields: object) -> bytes:
    record = journal_record(event, seq=seq, now=1.0, run_id="r", fields=fields)
    return journal_line(record).encode()


def test_a_record_is_one_line_with_its_own_seq() -> None:
    assert decode_record(line(3), 3, "t") == line(3)
    for bad, seq in [(line(3), 4), (line(3)[:-1], 3), (b"[]\n", 1), (b"\xff\n", 1)]:
        with pytest.raises(JournalError):
            decode_record(bad, seq, "t")


A = [line(1), line(2), line(3)]


@pytest.mark.parametrize(
    ("local", "stored", "source"),
    [
        (A, None, "local"),
        (None, A, "zookeeper"),
        ([], A, "zookeeper"),
        (A, A[:2], "local"),  # ZooKeeper missed a record: this host's copy is ahead
        (A[:1], A, "zookeeper"),  # another host resumed the run since
        (A, A, "local"),
    ],
)
def test_the_longer_copy_wins(
    local: list[bytes] | None, stored: list[bytes] | None, source: str
) -> None:
    assert choose_copy(local, stored).source == source


def test_copies_that_disagree_are_refused() -> None:
    with pytest.raises(JournalError, match="differ at record 2"):
        choose_copy(A, [A[0], line(2, JournalEvent.GATE)])
    with pytest.raises(JournalError, match="neither"):
        choose_copy(None, None)


def test_an_undone_step_is_not_finished_and_counts_its_undoing() -> None:
    records = [
        json.loads(x)
        for x in [
            line(1, JournalEvent.RUN_STARTED),
            line(2, JournalEvent.STEP_STARTED, step="0:broker-2:stop"),
            line(3, JournalEvent.STEP_FINISHED, step="0:broker-2:stop", result={"stopped": 2}),
            line(4, JournalEvent.STEP_UNDONE, step="0:broker-2:stop", reason="SIGTERM"),
            line(5, JournalEvent.RUN_HALTED, error="stopped by SIGTERM", signal="SIGTERM"),
        ]
    ]
    progress = replay(records)
    stop = progress.steps["0:broker-2:stop"]
    assert (stop.started, stop.finished, stop.undone, stop.attempts) == (False, False, 1, 1)
    assert progress.status == "halted"
    assert progress.last_error == "stopped by SIGTERM"


@pytest.mark.parametrize(
    ("local", "stored", "gap", "last", "expected"),
    [
        # ZooKeeper missed record 2 and got 3: the complete local journal is read.
        (A, A[:1], 2, 3, "local"),
        # This host has no journal, or one that stops before the gap's end: refused.
        (None, A[:1], 2, 3, "missing record 2 of 3, and this host's journal has 0 record(s)"),
        (A[:2], A[:1], 2, 3, "missing record 2 of 3, and this host's journal has 2 record(s)"),
    ],
)
def test_a_copy_with_a_gap_serves_only_beside_a_complete_local_journal(
    local: list[bytes] | None, stored: list[bytes], gap: int, last: int, expected: str
) -> None:
    if expected == "local":
        choice = choose_copy(local, stored, gap=gap, last=last)
        assert choice.source == "local"
        assert choice.lines == tuple(A)
        assert choice.reason == (
            "ZooKeeper's copy is missing record 2; the local journal is complete"
        )
        return
    with pytest.raises(JournalError, match=re.escape(expected)):
        choose_copy(local, stored, gap=gap, last=last)


@pytest.mark.parametrize("trust", ["local", "zookeeper"])
def test_copies_that_disagree_serve_once_the_operator_says_which(trust: str) -> None:
    theirs = [A[0], line(2, JournalEvent.GATE)]
    choice = choose_copy(A, theirs, trust=trust)
    assert choice.source == trust
    assert choice.lines == tuple(A if trust == "local" else theirs)
    assert choice.overruled == 2
    assert choice.reason == (
        f"the copies differ at record 2: the {trust} one, as the operator chose"
        f" (--trust-journal {trust})"
    )
    # Copies that agree need no choice, and the operator's does not change the answer.
    assert choose_copy(A, A[:2], trust=trust) == choose_copy(A, A[:2])
