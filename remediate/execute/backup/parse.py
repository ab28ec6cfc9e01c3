"""What the backup scripts print (scripts.py), parsed: their records into typed answers, and
the two things read back by name, a sha256sum manifest and tar's listing. Pure: text in,
frozen answers out; BackupError for what the scripts never print."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from remediate.errors import BackupError

SHA256_RE = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"(?:[0-9a-f]{2})*")

# A file's index in the request -> (size, sha256).
Digests = Mapping[int, tuple[int, str]]


@dataclass(frozen=True)
class ScriptOutput:
    """A script's stdout as records (the fields of each non-blank line). `failed` is the step
    its X record names; `complete` says END was printed (a script cut short never is)."""

    lines: tuple[tuple[str, ...], ...]
    failed: str | None

    @property
    def complete(self) -> bool:
        return ("END",) in self.lines

    def records(self, tag: str, fields: int) -> Iterator[tuple[str, ...]]:
        return (line for line in self.lines if line[0] == tag and len(line) == fields + 1)

    def has(self, tag: str) -> bool:
        return any(line[0] == tag for line in self.lines)

    def one(self, tag: str) -> tuple[str, ...]:
        for line in self.lines:
            if line[0] == tag:
                return line
        raise BackupError(f"the broker's answer has no {tag!r} record")

    def indexes(self, tag: str) -> tuple[int, ...]:
        """The indexes of the `tag I` records, in order."""
        return tuple(int(record[1]) for record in self.records(tag, 1))

    def digests(self, tag: str) -> dict[int, tuple[int, str]]:
        """The `tag I N SHA` records: index -> (size, sha256)."""
        return {int(r[1]): (int(r[2]), sha(r[3])) for r in self.records(tag, 3)}


def parse_output(stdout: str) -> ScriptOutput:
    lines = tuple(tuple(line.split()) for line in stdout.splitlines() if line.split())
    failed = next((line[1] for line in lines if line[0] == "X" and len(line) == 2), None)
    return ScriptOutput(lines, failed)


@dataclass(frozen=True)
class BackupAnswer:
    """What the backup script said of the requested files: P (present: size and sha256),
    M (missing), O (not a regular file), U (unreadable); E (the archive existed already),
    and A (the new archive's sha256, when one was written)."""

    present: Digests
    missing: tuple[int, ...]
    not_regular: tuple[int, ...]
    unreadable: tuple[int, ...]
    archive_exists: bool
    archive_sha256: str | None


def parse_backup_answer(out: ScriptOutput) -> BackupAnswer:
    archive = next(out.records("A", 1), None)
    return BackupAnswer(
        present=out.digests("P"),
        missing=out.indexes("M"),
        not_regular=out.indexes("O"),
        unreadable=out.indexes("U"),
        archive_exists=out.has("E"),
        archive_sha256=None if archive is None else sha(archive[1]),
    )


@dataclass(frozen=True)
class DeleteAnswer:
    """What the delete script said: C (changed since the backup: its sha256 now), O, U, and
    for each file it removed D (deleted) or R (still there)."""

    changed: tuple[tuple[int, str], ...]
    not_regular: tuple[int, ...]
    unreadable: tuple[int, ...]
    deleted: tuple[int, ...]
    remaining: tuple[int, ...]


def parse_delete_answer(out: ScriptOutput) -> DeleteAnswer:
    return DeleteAnswer(
        changed=tuple((int(r[1]), r[2]) for r in out.records("C", 2)),
        not_regular=out.indexes("O"),
        unreadable=out.indexes("U"),
        deleted=out.indexes("D"),
        remaining=out.indexes("R"),
    )


@dataclass(frozen=True)
class ReadBack:
    """A backup as the read-back script found it. The modes, digests, manifest and listing
    are only there (else -1, "", b"", ()) when archive and manifest are both regular files."""

    archive_kind: str
    manifest_kind: str
    archive_mode: int
    manifest_mode: int
    archive_sha256: str
    manifest: bytes
    list_status: int
    listing: tuple[str, ...]
    members: Digests  # index of the requested member -> (size, sha256)


def parse_read_back(out: ScriptOutput) -> ReadBack:
    archive_kind, manifest_kind = out.one("KA")[1], out.one("KM")[1]
    if archive_kind != "file" or manifest_kind != "file":
        return ReadBack(archive_kind, manifest_kind, -1, -1, "", b"", -1, (), {})
    status, *listing = out.one("T")[1:]
    return ReadBack(
        archive_kind=archive_kind,
        manifest_kind=manifest_kind,
        archive_mode=int(out.one("QA")[1], 8),
        manifest_mode=int(out.one("QM")[1], 8),
        archive_sha256=sha(out.one("A")[1]),
        manifest=unhex(out.one("H")[1:]),
        list_status=int(status),
        listing=parse_tar_listing(unhex(listing)),
        members=out.digests("S"),
    )


_TAR_ESCAPES = {
    ord("\\"): b"\\",
    ord("n"): b"\n",
    ord("t"): b"\t",
    ord("r"): b"\r",
    ord("f"): b"\f",
    ord("v"): b"\v",
    ord("a"): b"\a",
    ord("b"): b"\b",
}
_OCTAL = re.compile(rb"\\([0-7]{3})")


def parse_tar_listing(data: bytes) -> tuple[str, ...]:
    """Member names from `tar --quoting-style=escape -t` output (C locale), one a line.

    Raises BackupError on an escape tar does not produce or a name that is not UTF-8.
    """
    names: list[str] = []
    for line in data.split(b"\n") if data else []:
        name = bytearray()
        i = 0
        while i < len(line):
            byte = line[i]
            if byte != ord("\\"):
                name.append(byte)
                i += 1
            elif octal := _OCTAL.match(line, i):
                name.append(int(octal.group(1), 8) & 0xFF)
                i += 4
            elif i + 1 < len(line) and line[i + 1] in _TAR_ESCAPES:
                name += _TAR_ESCAPES[line[i + 1]]
                i += 2
            else:
                raise BackupError(f"tar listing: unexpected escape in {bytes(line)!r}")
        names.append(_utf8(bytes(name), "tar listing"))
    return tuple(names)


def parse_manifest(data: bytes) -> list[tuple[str, str]]:
    """(name, sha256) pairs from sha256sum output, including GNU's escaped-name lines."""
    pairs: list[tuple[str, str]] = []
    for line in data.split(b"\n"):
        if not line:
            continue
        escaped = line.startswith(b"\\")
        body = line[1:] if escaped else line
        digest, sep, name = body[:64], body[64:66], body[66:]
        if not SHA256_RE.fullmatch(digest.decode("ascii", "replace")) or sep not in (b"  ", b" *"):
            raise BackupError(f"manifest: line {bytes(line)!r} is not sha256sum output")
        if escaped:
            name = _unescape_sha256sum(name)
        pairs.append((_utf8(name, "manifest"), digest.decode("ascii")))
    return pairs


def _unescape_sha256sum(name: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(name):
        if name[i] != ord("\\"):
            out.append(name[i])
            i += 1
            continue
        escape = name[i + 1 : i + 2]
        if escape not in (b"\\", b"n", b"r"):
            raise BackupError(f"manifest: unexpected escape in {name!r}")
        out += {b"\\": b"\\", b"n": b"\n", b"r": b"\r"}[escape]
        i += 2
    return bytes(out)


def sha(text: str) -> str:
    """`text` if it is a sha256 as sha256sum prints it; BackupError otherwise."""
    if not SHA256_RE.fullmatch(text):
        raise BackupError(f"the broker printed {text!r} where a sha256 was expected")
    return text


def unhex(fields: Sequence[str]) -> bytes:
    """The bytes of an optional hex field (od prints nothing for an empty file)."""
    text = fields[0] if fields else ""
    if not _HEX.fullmatch(text):
        raise BackupError("the broker printed malformed hex")
    return bytes.fromhex(text)


def _utf8(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BackupError(f"{source}: name {data!r} is not UTF-8") from exc
