"""What a backup is: the files it holds (`BackupEntry`), the archive and manifest on the broker
(`Backup`, recorded in the journal as JSON), and the rules its paths and members obey. Pure."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from remediate.errors import BackupError
from remediate.execute.backup.parse import SHA256_RE


@dataclass(frozen=True)
class BackupEntry:
    """One file in a backup: where it was on the broker and what it held."""

    path: str
    sha256: str
    size: int

    def __post_init__(self) -> None:
        check_path(self.path, "entry path")
        if not isinstance(self.sha256, str) or not SHA256_RE.fullmatch(self.sha256):
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
        check_path(self.archive, "archive")
        check_path(self.manifest, "manifest")
        if self.entries and not SHA256_RE.fullmatch(self.archive_sha256):
            raise BackupError(f"backup {self.archive!r}: archive_sha256 is not a sha256")
        if not self.entries and self.archive_sha256:
            raise BackupError(f"backup {self.archive!r}: no entries, so no archive_sha256")
        paths = [entry.path for entry in self.entries] + list(self.missing)
        for path in self.missing:
            check_path(path, "missing path")
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


def check_path(path: str, what: str) -> None:
    """Absolute, normalized, no NUL: the only paths that go into a backup command."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        raise BackupError(f"{what} {path!r} must be an absolute path without NUL")
    parts = path.split("/")[1:]
    if not parts or any(part in {"", ".", ".."} for part in parts):
        raise BackupError(f"{what} {path!r} must not have empty, '.' or '..' components")


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
