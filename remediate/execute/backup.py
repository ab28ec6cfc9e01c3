"""Back up, delete and restore files on a broker host, through the Transport port.

Nothing is deleted that is not in a verified backup: `backup_files` writes a tar.gz and a
sha256sum manifest on the broker and reads both back before it returns; `delete_backed_up`
removes only files whose bytes still equal the manifest; `restore_backup` verifies the archive
again and refuses any member name that could land outside the backed-up paths.

The broker needs only POSIX sh, coreutils (sha256sum, wc, od, stat), find and GNU tar with gzip:
no Python. Every command is one `sh -c` script (so the login shell of an ssh user does not
matter), optionally under `sudo -n`. Paths are untrusted text: each reaches the script only as a
`shlex.quote`d word, and no path ever comes back in the output. Requested files are referred to
by their index, and the two things read back by name (the manifest and tar's listing) come back
as hex from `od`, so a name holding a newline or a quote cannot be misread.

Output records, one a line, space-separated (I an index into the request, N a number, H hex):
`P I N SHA` present file (size, sha256), `M I` missing, `O I` not a regular file, `U I`
unreadable, `C I SHA` changed since the backup, `D I` deleted, `R I` still there after rm,
`S I N SHA` a member or restored file read back, `E` the archive already exists,
`K[AM] KIND` and `Q[AM] MODE` type and mode of archive and manifest, `A SHA` the archive's
sha256, `H HEX` the manifest's bytes, `T STATUS HEX` tar's listing, `X STEP` failed at STEP,
and `END` last, so a script cut short is never taken for a complete answer.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from remediate.errors import BackupError
from remediate.ports import CommandResult, Transport

MODE = 0o600
_LABEL = re.compile(r"[A-Za-z0-9._-]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"(?:[0-9a-f]{2})*")

# Every script starts here: the broker's environment must not change what tar or the digests
# do (TAR_OPTIONS can add --wildcards or --transform), and LC_ALL=C keeps tar's quoting of
# names in the listing byte-exact.
_PRELUDE = """\
unset TAR_OPTIONS GZIP
LC_ALL=C
export LC_ALL
fail() { printf 'X %s\\n' "$1"; exit 1; }
hex() { od -An -tx1 -v | tr -d ' \\n'; }
"""


@dataclass(frozen=True)
class BackupEntry:
    """One file in a backup: where it was on the broker and what it held."""

    path: str
    sha256: str
    size: int

    def __post_init__(self) -> None:
        _check_path(self.path, "entry path")
        if not isinstance(self.sha256, str) or not _SHA256.fullmatch(self.sha256):
            raise BackupError(f"backup entry {self.path!r}: sha256 is not 64 lowercase hex digits")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise BackupError(f"backup entry {self.path!r}: size must be an integer >= 0")


@dataclass(frozen=True)
class Backup:
    """A backup on one broker host: the archive, its manifest and what they hold."""

    archive: str
    manifest: str
    archive_sha256: str
    entries: tuple[BackupEntry, ...]
    missing: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        _check_path(self.archive, "archive")
        _check_path(self.manifest, "manifest")
        if self.entries and not _SHA256.fullmatch(self.archive_sha256):
            raise BackupError(f"backup {self.archive!r}: archive_sha256 is not a sha256")
        if not self.entries and self.archive_sha256:
            raise BackupError(f"backup {self.archive!r}: no entries, so no archive_sha256")
        paths = [entry.path for entry in self.entries] + list(self.missing)
        for path in self.missing:
            _check_path(path, "missing path")
        if len(set(paths)) != len(paths):
            raise BackupError(f"backup {self.archive!r}: a path is listed twice")

    def to_json(self) -> dict[str, Any]:
        return {
            "archive": self.archive,
            "manifest": self.manifest,
            "archive_sha256": self.archive_sha256,
            "entries": [{"path": e.path, "sha256": e.sha256, "size": e.size} for e in self.entries],
            "missing": list(self.missing),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Backup:
        if not isinstance(doc, Mapping):
            raise BackupError("backup record: expected a JSON object")
        entries = _field(doc, "entries", list)
        parsed: list[BackupEntry] = []
        for i, item in enumerate(entries):
            if not isinstance(item, Mapping):
                raise BackupError(f"backup record: field 'entries[{i}]': expected an object")
            parsed.append(
                BackupEntry(
                    path=_field(item, "path", str, f"entries[{i}]."),
                    sha256=_field(item, "sha256", str, f"entries[{i}]."),
                    size=_field(item, "size", int, f"entries[{i}]."),
                )
            )
        missing = _field(doc, "missing", list)
        for i, path in enumerate(missing):
            if not isinstance(path, str):
                raise BackupError(f"backup record: field 'missing[{i}]': expected a string")
        return cls(
            archive=_field(doc, "archive", str),
            manifest=_field(doc, "manifest", str),
            archive_sha256=_field(doc, "archive_sha256", str),
            entries=tuple(parsed),
            missing=tuple(missing),
        )


def _field(doc: Mapping[str, Any], name: str, kind: type, prefix: str = "") -> Any:
    value = doc.get(name)
    # bool is an int in Python, never a size in JSON.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BackupError(
            f"backup record: field '{prefix}{name}': expected {kind.__name__},"
            f" got {type(value).__name__}"
        )
    return value


def check_member_names(names: Sequence[str], allowed: Collection[str]) -> str | None:
    """Why an archive with these member names must not be extracted, or None if it may.

    A member must be a non-empty relative name without a '..' component, one of `allowed`,
    and appear once: anything else could write outside the backed-up paths.
    """
    seen: set[str] = set()
    for name in names:
        if not name:
            return "an archive member has an empty name"
        if name.startswith("/"):
            return f"archive member {name!r} is an absolute path"
        if ".." in name.split("/"):
            return f"archive member {name!r} has a '..' component"
        if name not in allowed:
            return f"archive member {name!r} is not one of the backed-up files"
        if name in seen:
            return f"archive member {name!r} appears more than once"
        seen.add(name)
    return None


def backup_files(
    transport: Transport,
    files: Sequence[str],
    *,
    backup_dir: str,
    label: str,
    sudo: bool = False,
    timeout: float = 120.0,
) -> Backup:
    """Archive the existing `files` into `<backup_dir>/<label>/<label>.tar.gz`, verified.

    Files that do not exist are recorded as missing. If the archive is already there (a
    resumed run), it is never overwritten: it is read back and returned if it holds exactly
    these files with the bytes they have now (or had before they were deleted).
    """
    for path in files:
        _check_path(path, "file")
    if len(set(files)) != len(files):
        raise BackupError(f"{transport.description}: a file is listed twice in the backup request")
    _check_path(backup_dir.rstrip("/") or "/", "backup_dir")
    if not _LABEL.fullmatch(label) or label in {".", ".."}:
        raise BackupError(f"backup label {label!r} must match [A-Za-z0-9._-]+")
    directory = f"{backup_dir.rstrip('/')}/{label}"
    archive, manifest = f"{directory}/{label}.tar.gz", f"{directory}/{label}.sha256"
    q = shlex.quote
    script = (
        _PRELUDE
        + f"umask 077\nd={q(directory)}\na={q(archive)}\nm={q(manifest)}\n"
        + 'mkdir -p -- "$d" || fail mkdir\n'
        + 'exists=0\nif [ -e "$a" ] || [ -L "$a" ]; then exists=1; echo E; fi\n'
        + f"set -- {' '.join(q(path) for path in files)}\n"
        # Rotate "$@": each path is shifted off and, if it is a regular file, pushed back
        # relative to / so the same list feeds sha256sum and tar.
        + """\
n=0
bad=0
for p do
  shift
  if [ -L "$p" ] || { [ -e "$p" ] && [ ! -f "$p" ]; }; then echo "O $n"; bad=1
  elif [ -f "$p" ]; then
    if s=$(wc -c < "$p") && h=$(sha256sum < "$p"); then
      echo "P $n $s ${h%% *}"; set -- "$@" "${p#/}"
    else echo "U $n"; bad=1; fi
  else echo "M $n"; fi
  n=$((n+1))
done
[ "$bad" = 0 ] || fail files
if [ "$exists" = 1 ] || [ "$#" = 0 ]; then echo END; exit 0; fi
cd / || fail cd
sha256sum -- "$@" > "$m.partial" || fail manifest
tar --hard-dereference -czf "$a.partial" -C / -- "$@" || fail tar
chmod 0600 -- "$m.partial" "$a.partial" || fail chmod
"""
        # Written aside and renamed, manifest first: an archive under its final name is
        # always complete and has its manifest, so a resumed run may trust its presence.
        + """\
mv -f -- "$m.partial" "$m" || fail rename
mv -f -- "$a.partial" "$a" || fail rename
h=$(sha256sum < "$a") || fail hash
echo "A ${h%% *}"
echo END
"""
    )
    what = f"backup of {len(files)} files into {archive!r}"
    out = _run(transport, script, sudo=sudo, timeout=timeout, what=what, handled={"files"})
    _refuse_bad_files(transport, out, files, "nothing was backed up")
    present = {int(r[1]): (int(r[2]), _sha(r[3])) for r in out.records("P", 3)}
    if out.has("E"):
        return _resume(transport, files, present, archive, manifest, sudo, timeout)
    missing = tuple(files[int(r[1])] for r in out.records("M", 1))
    entries = tuple(BackupEntry(files[i], sha, size) for i, (size, sha) in sorted(present.items()))
    archive_sha = _sha(out.one("A")[1]) if entries else ""
    backup = Backup(archive, manifest, archive_sha, entries, missing)
    verify_backup(transport, backup, sudo=sudo, timeout=timeout)
    return backup


def _resume(
    transport: Transport,
    files: Sequence[str],
    present: Mapping[int, tuple[int, str]],
    archive: str,
    manifest: str,
    sudo: bool,
    timeout: float,
) -> Backup:
    """The Backup an existing archive holds, if it is the backup of exactly `files`.

    A file may have been deleted since (the run crashed after its delete step); one that
    exists must still hold the bytes in the manifest.
    """
    host = transport.description
    rels = [path[1:] for path in files]
    readback = _read_back(transport, archive, manifest, rels, sudo=sudo, timeout=timeout)
    _check_kinds(host, archive, manifest, readback)
    recorded = _parse_manifest(host, manifest, readback.manifest)
    refuse = f"{host}: a backup already exists at {archive!r}"
    for name in recorded:
        if name not in rels:
            raise BackupError(f"{refuse} and holds {'/' + name!r}, which was not requested")
    entries: list[BackupEntry] = []
    missing: list[str] = []
    for i, path in enumerate(files):
        now = present.get(i)
        if rels[i] not in recorded:
            if now is not None:
                raise BackupError(f"{refuse} without {path!r}, which exists now")
            missing.append(path)
        elif now is not None and now[1] != recorded[rels[i]]:
            raise BackupError(
                f"{refuse} with sha256 {recorded[rels[i]]} for {path!r}, which now has {now[1]}"
            )
        else:
            # The size comes from the archive (the file may be gone); a member that cannot
            # be read shows up as a digest mismatch in verify_backup below.
            size = readback.members.get(i, (0, ""))[0]
            entries.append(BackupEntry(path, recorded[rels[i]], size))
    backup = Backup(archive, manifest, readback.archive_sha256, tuple(entries), tuple(missing))
    verify_backup(transport, backup, sudo=sudo, timeout=timeout)
    return backup


def verify_backup(
    transport: Transport, backup: Backup, *, sudo: bool = False, timeout: float = 120.0
) -> None:
    """Read the backup back: archive digest and mode, manifest, member names and bytes.

    Raises BackupError naming the first difference. A backup with no entries has no archive
    and nothing to verify.
    """
    if not backup.entries:
        return
    rels = [entry.path[1:] for entry in backup.entries]
    readback = _read_back(
        transport, backup.archive, backup.manifest, rels, sudo=sudo, timeout=timeout
    )
    _check(transport.description, backup, readback)


def delete_backed_up(
    transport: Transport, backup: Backup, *, sudo: bool = False, timeout: float = 60.0
) -> tuple[str, ...]:
    """Delete exactly the backup's files, if each still holds the bytes that were backed up.

    All files are checked before any is removed, so a refusal deletes nothing. Files already
    gone are fine (a resumed run). Returns the paths this call removed.
    """
    if not backup.entries:
        return ()
    q = shlex.quote
    pairs = " ".join(f"{q(e.sha256)} {q(e.path)}" for e in backup.entries)
    script = (
        _PRELUDE
        + f"a={q(backup.archive)}\nwant={q(backup.archive_sha256)}\n"
        # The archive must still be the one that was verified: never delete without it.
        + 'h=$(sha256sum < "$a") && [ "${h%% *}" = "$want" ] || fail archive\n'
        + f"set -- {pairs}\n"
        + """\
n=0
bad=0
k=$#
while [ "$k" -gt 0 ]; do
  w=$1; p=$2; shift 2; k=$((k-2))
  if [ -L "$p" ] || { [ -e "$p" ] && [ ! -f "$p" ]; }; then echo "O $n"; bad=1
  elif [ -f "$p" ]; then
    if h=$(sha256sum < "$p"); then
      if [ "${h%% *}" = "$w" ]; then set -- "$@" "$n" "$p"
      else echo "C $n ${h%% *}"; bad=1; fi
    else echo "U $n"; bad=1; fi
  fi
  n=$((n+1))
done
[ "$bad" = 0 ] || fail files
while [ "$#" -gt 0 ]; do
  rm -f -- "$2" || fail rm
  if [ -e "$2" ] || [ -L "$2" ]; then echo "R $1"; else echo "D $1"; fi
  shift 2
done
echo END
"""
    )
    host = transport.description
    what = f"deletion of {len(backup.entries)} backed-up files"
    out = _run(
        transport, script, sudo=sudo, timeout=timeout, what=what, handled={"files", "archive"}
    )
    if out.failed == "archive":
        raise BackupError(
            f"{host}: backup archive {backup.archive!r} is missing or no longer has sha256"
            f" {backup.archive_sha256}; refusing to delete {len(backup.entries)} files"
        )
    paths = [entry.path for entry in backup.entries]
    for record in out.records("C", 2):
        entry = backup.entries[int(record[1])]
        raise BackupError(
            f"{host}: {entry.path!r} changed since the backup (sha256 now {record[2]},"
            f" backed up {entry.sha256}); nothing was deleted"
        )
    _refuse_bad_files(transport, out, paths, "nothing was deleted")
    remaining = [paths[int(r[1])] for r in out.records("R", 1)]
    if remaining:
        raise BackupError(f"{host}: {remaining[0]!r} still exists after it was deleted")
    return tuple(paths[int(r[1])] for r in out.records("D", 1))


def restore_backup(
    transport: Transport, backup: Backup, *, sudo: bool = False, timeout: float = 120.0
) -> tuple[str, ...]:
    """Put the backed-up files back in place from a verified archive; returns their paths.

    Existing files at those paths are replaced. Afterwards every restored file is hashed
    again and must equal the manifest.
    """
    if not backup.entries:
        return ()
    host = transport.description
    verify_backup(transport, backup, sudo=sudo, timeout=timeout)
    rels = [entry.path[1:] for entry in backup.entries]
    reason = check_member_names(rels, set(rels))
    if reason is not None:
        raise BackupError(f"{host}: refusing to restore from {backup.archive!r}: {reason}")
    q = shlex.quote
    script = (
        _PRELUDE
        + f"a={q(backup.archive)}\nwant={q(backup.archive_sha256)}\n"
        # Checked again here: the archive verified a moment ago must be the one extracted.
        + 'h=$(sha256sum < "$a") && [ "${h%% *}" = "$want" ] || fail archive\n'
        + f'tar -xpzf "$a" -C / -- {" ".join(q(rel) for rel in rels)} || fail extract\n'
        + f"set -- {' '.join(q(entry.path) for entry in backup.entries)}\n"
        + """\
n=0
for p do
  if [ -f "$p" ] && [ ! -L "$p" ] && s=$(wc -c < "$p") && h=$(sha256sum < "$p"); then
    echo "S $n $s ${h%% *}"
  else echo "M $n"; fi
  n=$((n+1))
done
echo END
"""
    )
    what = f"restore of {len(rels)} files from {backup.archive!r}"
    out = _run(transport, script, sudo=sudo, timeout=timeout, what=what, handled={"archive"})
    if out.failed == "archive":
        raise BackupError(
            f"{host}: backup archive {backup.archive!r} changed while it was being restored"
            f" (expected sha256 {backup.archive_sha256})"
        )
    found = {int(r[1]): (int(r[2]), _sha(r[3])) for r in out.records("S", 3)}
    for i, entry in enumerate(backup.entries):
        got = found.get(i)
        if got is None:
            raise BackupError(f"{host}: {entry.path!r} is not a regular file after the restore")
        if got != (entry.size, entry.sha256):
            raise BackupError(
                f"{host}: restored {entry.path!r} has sha256 {got[1]} and {got[0]} bytes,"
                f" expected {entry.sha256} and {entry.size} bytes from the manifest"
            )
    return tuple(entry.path for entry in backup.entries)


# --- reading a backup back ---------------------------------------------------------------


@dataclass(frozen=True)
class _ReadBack:
    archive_kind: str
    manifest_kind: str
    archive_mode: int
    manifest_mode: int
    archive_sha256: str
    manifest: bytes
    list_status: int
    listing: tuple[str, ...]
    members: Mapping[int, tuple[int, str]]  # index of the requested member -> (size, sha256)


def _read_back(
    transport: Transport,
    archive: str,
    manifest: str,
    rels: Sequence[str],
    *,
    sudo: bool,
    timeout: float,
) -> _ReadBack:
    q = shlex.quote
    script = (
        _PRELUDE
        + f"a={q(archive)}\nm={q(manifest)}\n"
        + """\
kind() {
  if [ -L "$1" ]; then echo symlink
  elif [ -f "$1" ]; then echo file
  elif [ -e "$1" ]; then echo other
  else echo missing; fi
}
ka=$(kind "$a"); km=$(kind "$m")
echo "KA $ka"
echo "KM $km"
if [ "$ka" != file ] || [ "$km" != file ]; then echo END; exit 0; fi
echo "QA $(stat -c %a -- "$a")"
echo "QM $(stat -c %a -- "$m")"
h=$(sha256sum < "$a") || fail hash
echo "A ${h%% *}"
echo "H $(hex < "$m")"
l=$(tar --quoting-style=escape -tzf "$a")
st=$?
echo "T $st $(printf '%s' "$l" | hex)"
"""
        + f"set -- {' '.join(q(rel) for rel in rels)}\n"
        # tar's complaints go into the digest: a failed extraction can never pass for an
        # empty file. Each member is extracted twice (size, digest); archives here are small.
        + """\
n=0
for r do
  s=$(tar -xzOf "$a" -- "$r" 2>&1 | wc -c)
  h=$(tar -xzOf "$a" -- "$r" 2>&1 | sha256sum)
  echo "S $n $s ${h%% *}"
  n=$((n+1))
done
echo END
"""
    )
    out = _run(transport, script, sudo=sudo, timeout=timeout, what=f"read-back of {archive!r}")
    archive_kind, manifest_kind = out.one("KA")[1], out.one("KM")[1]
    if archive_kind != "file" or manifest_kind != "file":
        return _ReadBack(archive_kind, manifest_kind, -1, -1, "", b"", -1, (), {})
    status, *listing = out.one("T")[1:]
    return _ReadBack(
        archive_kind=archive_kind,
        manifest_kind=manifest_kind,
        archive_mode=int(out.one("QA")[1], 8),
        manifest_mode=int(out.one("QM")[1], 8),
        archive_sha256=_sha(out.one("A")[1]),
        manifest=_unhex(out.one("H")[1:]),
        list_status=int(status),
        listing=parse_tar_listing(_unhex(listing)),
        members={int(r[1]): (int(r[2]), _sha(r[3])) for r in out.records("S", 3)},
    )


def _check_kinds(host: str, archive: str, manifest: str, readback: _ReadBack) -> None:
    for what, path, kind in (
        ("archive", archive, readback.archive_kind),
        ("manifest", manifest, readback.manifest_kind),
    ):
        if kind != "file":
            found = {"missing": "does not exist"}.get(kind, f"is a {kind}")
            raise BackupError(f"{host}: backup {what} {path!r} {found}, expected a regular file")


def _check(host: str, backup: Backup, readback: _ReadBack) -> None:
    """Raise BackupError naming the first way `readback` differs from `backup`."""
    archive = backup.archive
    _check_kinds(host, archive, backup.manifest, readback)
    if readback.archive_sha256 != backup.archive_sha256:
        raise BackupError(
            f"{host}: backup archive {archive!r} has sha256 {readback.archive_sha256},"
            f" expected {backup.archive_sha256}: it changed after the backup was made"
        )
    for what, path, mode in (
        ("archive", archive, readback.archive_mode),
        ("manifest", backup.manifest, readback.manifest_mode),
    ):
        if mode != MODE:
            raise BackupError(
                f"{host}: backup {what} {path!r} has mode {mode:04o}, expected {MODE:04o}"
            )
    expected = {entry.path[1:]: entry.sha256 for entry in backup.entries}
    recorded = _parse_manifest(host, backup.manifest, readback.manifest)
    if recorded != expected:
        differing = sorted(set(recorded.items()) ^ set(expected.items()))
        raise BackupError(
            f"{host}: manifest {backup.manifest!r} does not match the backup"
            f" (first difference: {'/' + differing[0][0]!r})"
        )
    if readback.list_status != 0:
        raise BackupError(
            f"{host}: backup archive {archive!r} cannot be listed (tar exit status"
            f" {readback.list_status}): it is damaged"
        )
    reason = check_member_names(readback.listing, expected)
    if reason is not None:
        raise BackupError(f"{host}: backup archive {archive!r} refused: {reason}")
    for i, entry in enumerate(backup.entries):
        if entry.path[1:] not in readback.listing:
            raise BackupError(f"{host}: backup archive {archive!r} does not hold {entry.path!r}")
        got = readback.members.get(i)
        if got != (entry.size, entry.sha256):
            size, sha = got if got is not None else (-1, "")
            raise BackupError(
                f"{host}: backup archive {archive!r} holds {entry.path!r} with sha256 {sha}"
                f" and {size} bytes, expected {entry.sha256} and {entry.size} bytes"
            )


# --- pure parsers of what the broker printed ----------------------------------------------

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
        if not _SHA256.fullmatch(digest.decode("ascii", "replace")) or sep not in (b"  ", b" *"):
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


def _parse_manifest(host: str, path: str, data: bytes) -> dict[str, str]:
    try:
        pairs = parse_manifest(data)
    except BackupError as exc:
        raise BackupError(f"{host}: manifest {path!r} cannot be read: {exc}") from exc
    recorded = dict(pairs)
    if len(recorded) != len(pairs):
        raise BackupError(f"{host}: manifest {path!r} names a file more than once")
    return recorded


# --- running scripts ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Output:
    lines: tuple[tuple[str, ...], ...]
    failed: str | None

    def records(self, tag: str, fields: int) -> Iterator[tuple[str, ...]]:
        return (line for line in self.lines if line[0] == tag and len(line) == fields + 1)

    def has(self, tag: str) -> bool:
        return any(line[0] == tag for line in self.lines)

    def one(self, tag: str) -> tuple[str, ...]:
        for line in self.lines:
            if line[0] == tag:
                return line
        raise BackupError(f"the broker's answer has no {tag!r} record")


def _run(
    transport: Transport,
    script: str,
    *,
    sudo: bool,
    timeout: float,
    what: str,
    handled: Collection[str] = (),
) -> _Output:
    """Run `script` under sh (and sudo) and parse its records.

    Raises BackupError if it did not finish, unless it stopped at one of the `handled` steps,
    which the caller turns into a specific message.
    """
    prefix = "sudo -n sh -c " if sudo else "sh -c "
    result: CommandResult = transport.run(prefix + shlex.quote(script), timeout=timeout)
    lines = tuple(tuple(line.split()) for line in result.stdout.splitlines() if line.split())
    failed = next((line[1] for line in lines if line[0] == "X" and len(line) == 2), None)
    stderr = result.stderr.strip()[-500:]
    if failed is None and (result.exit_code != 0 or ("END",) not in lines):
        raise BackupError(
            f"{transport.description}: {what} did not complete (exit status"
            f" {result.exit_code}): {stderr or 'no error output'}"
        )
    if failed is not None and failed not in handled:
        raise BackupError(f"{transport.description}: {what} failed at {failed}: {stderr}")
    return _Output(lines, failed)


def _refuse_bad_files(transport: Transport, out: _Output, paths: Sequence[str], after: str) -> None:
    host = transport.description
    for tag, problem in (("O", "is not a regular file"), ("U", "cannot be read")):
        for record in out.records(tag, 1):
            raise BackupError(f"{host}: {paths[int(record[1])]!r} {problem}; {after}")
    if out.failed == "files":  # every refusal above prints a record; this is a backstop
        raise BackupError(f"{host}: a file could not be checked; {after}")


def _check_path(path: str, what: str) -> None:
    """Absolute, normalized, no NUL: the only paths that go into a backup command."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        raise BackupError(f"{what} {path!r} must be an absolute path without NUL")
    parts = path.split("/")[1:]
    if not parts or any(part in {"", ".", ".."} for part in parts):
        raise BackupError(f"{what} {path!r} must not have empty, '.' or '..' components")


def _sha(text: str) -> str:
    if not _SHA256.fullmatch(text):
        raise BackupError(f"the broker printed {text!r} where a sha256 was expected")
    return text


def _unhex(fields: Sequence[str]) -> bytes:
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
