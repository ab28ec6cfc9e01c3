"""How the journal's records and plan are stored in ZooKeeper: each one a small blob.

A znode holds at most 1 MB (`jute.maxbuffer`), and a plan for a large cluster, or a record
naming thousands of files, may be bigger. So every stored document is a blob: its bytes
compressed (zlib), then cut into chunks of at most `CHUNK_BYTES`. The head, which goes in
the document's own znode, is one line of JSON saying how many chunks there are, how long the
document is and its sha256, followed by the compressed bytes themselves when they fit in one
chunk (the usual case: a record is a few hundred bytes); otherwise the chunks go in znodes of
their own, written before the head, so a head that can be read has all its chunks.

Decoding trusts nothing it reads: ZooKeeper is shared, and anyone with write access to the
path can put anything there. A head that does not parse, a chunk count that does not match,
a document that decompresses to more than its stated length (a zip bomb), or bytes whose
sha256 differs from the head's are each a JournalError naming what is wrong; nothing else is
ever raised.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from remediate.errors import JournalError

FORMAT = 1
# Well below ZooKeeper's default 1 MB znode limit, with room for the head and the request.
CHUNK_BYTES = 512 * 1024
# A document larger than this is refused, written or read (a plan of 64 MB is no plan).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
# Chunks of a stored blob, at most (64 MB compressed in 512 KB chunks, with margin).
MAX_CHUNKS = 256
_HEAD_KEYS = frozenset({"format", "length", "sha256", "chunks"})


@dataclass(frozen=True)
class Blob:
    """A document as stored: the head znode's data and the chunks' (none when it fits)."""

    head: bytes
    chunks: tuple[bytes, ...] = ()


def encode_blob(document: bytes, *, chunk_bytes: int = CHUNK_BYTES) -> Blob:
    """`document` compressed and, if it does not fit in one znode, chunked."""
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be positive")
    if len(document) > MAX_DOCUMENT_BYTES:
        raise JournalError(
            f"a journal document of {len(document)} bytes is over {MAX_DOCUMENT_BYTES}"
        )
    packed = zlib.compress(document, 6)
    chunks = (
        ()
        if len(packed) <= chunk_bytes
        else tuple(packed[i : i + chunk_bytes] for i in range(0, len(packed), chunk_bytes))
    )
    head = {
        "format": FORMAT,
        "length": len(document),
        "sha256": hashlib.sha256(document).hexdigest(),
        "chunks": len(chunks),
    }
    line = json.dumps(head, sort_keys=True).encode("ascii") + b"\n"
    return Blob(line + (b"" if chunks else packed), chunks)


@dataclass(frozen=True)
class _Head:
    length: int
    sha256: str
    chunks: int


def blob_chunks(head: bytes, source: str) -> int:
    """How many chunk znodes the blob whose head is `head` has (read them, then decode)."""
    return _parse_head(head, source)[0].chunks


def decode_blob(head: bytes, chunks: Sequence[bytes], source: str) -> bytes:
    """The document stored as `head` and `chunks`; JournalError if they are not one."""
    fields, inline = _parse_head(head, source)
    count = fields.chunks
    if count == 0:
        if chunks:
            raise JournalError(f"{source}: {len(chunks)} chunk(s) for a blob stored whole")
        packed = inline
    else:
        if inline:
            raise JournalError(f"{source}: data after the head of a chunked blob")
        if len(chunks) != count:
            raise JournalError(f"{source}: {len(chunks)} chunk(s) where the head says {count}")
        packed = b"".join(chunks)
    length = fields.length
    inflater = zlib.decompressobj()
    try:
        document = inflater.decompress(packed, length + 1)
    except zlib.error as error:
        raise JournalError(f"{source}: not zlib data: {error}") from error
    if len(document) > length or inflater.unconsumed_tail:
        raise JournalError(f"{source}: more than the {length} bytes its head states")
    if not inflater.eof:
        raise JournalError(f"{source}: compressed data cut short")
    if inflater.unused_data:
        raise JournalError(f"{source}: data after the compressed document")
    if len(document) != length:
        raise JournalError(f"{source}: {len(document)} bytes where its head states {length}")
    if hashlib.sha256(document).hexdigest() != fields.sha256:
        raise JournalError(f"{source}: sha256 differs from its head's")
    return document


def _parse_head(head: bytes, source: str) -> tuple[_Head, bytes]:
    line, newline, rest = head.partition(b"\n")
    if not newline:
        raise JournalError(f"{source}: not a journal blob (no head line)")
    try:
        fields = json.loads(line.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as error:
        raise JournalError(f"{source}: head is not JSON: {error}") from error
    if not isinstance(fields, dict) or set(fields) != _HEAD_KEYS:
        raise JournalError(f"{source}: head must hold exactly {sorted(_HEAD_KEYS)}")
    if fields["format"] != FORMAT:
        raise JournalError(f"{source}: format {fields['format']!r}, this version reads {FORMAT}")
    for name, limit in (("length", MAX_DOCUMENT_BYTES), ("chunks", MAX_CHUNKS)):
        value = fields[name]
        if type(value) is not int or not 0 <= value <= limit:
            raise JournalError(f"{source}: head's {name} {value!r} is not in 0..{limit}")
    digest = fields["sha256"]
    if not isinstance(digest, str) or len(digest) != 64 or digest.strip("0123456789abcdef"):
        raise JournalError(f"{source}: head's sha256 {digest!r} is not a sha256")
    return _Head(fields["length"], digest, fields["chunks"]), rest


def decode_record(document: bytes, seq: int, source: str) -> bytes:
    """`document` if it is journal record `seq` as journal.jsonl holds it (one JSON object
    on one line, its newline included); JournalError otherwise."""
    if not document.endswith(b"\n") or b"\n" in document[:-1]:
        raise JournalError(f"{source}: a record is one line ending in a newline")
    try:
        record = json.loads(document.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise JournalError(f"{source}: record is not JSON: {error}") from error
    if not isinstance(record, dict):
        raise JournalError(f"{source}: record is not a JSON object")
    if record.get("seq") != seq or type(record.get("seq")) is not int:
        raise JournalError(f"{source}: record's seq is {record.get('seq')!r}, expected {seq}")
    return document
