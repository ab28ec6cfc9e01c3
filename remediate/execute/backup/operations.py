"""Back up, delete and restore files on a broker host, through the Transport port.

Nothing is deleted that is not in a verified backup: `backup_files` writes a tar.gz and a
sha256sum manifest on the broker and reads both back before it returns; `delete_backed_up`
removes only files whose bytes still equal the manifest; `restore_backup` verifies the archive
again and refuses any member name that could land outside the backed-up paths. Each runs the
scripts of scripts.py and judges their answers as parse.py reads them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

from remediate.errors import BackupError
from remediate.execute.backup.model import Backup, BackupEntry, check_member_names, check_path
from remediate.execute.backup.parse import (
    ReadBack,
    ScriptOutput,
    parse_backup_answer,
    parse_delete_answer,
    parse_manifest,
    parse_output,
    parse_read_back,
)
from remediate.execute.backup.scripts import (
    MODE,
    backup_script,
    delete_script,
    read_back_script,
    restore_script,
    shell_command,
)
from remediate.ports import CommandKind, CommandResult, Transport

_LABEL = re.compile(r"[A-Za-z0-9._-]+")


def backup_files(
    transport: Transport,
    files: Sequence[str],
    *,
    backup_dir: str,
    label: str,
    timeout: float = 120.0,
) -> Backup:
    """Archive the existing `files` into `<backup_dir>/<label>/<label>.tar.gz`, verified.

    Files that do not exist are recorded as missing. If the archive is already there (a
    resumed run), it is never overwritten: it is read back and returned if it holds exactly
    these files with the bytes they have now (or had before they were deleted).
    """
    for path in files:
        check_path(path, "file")
    if len(set(files)) != len(files):
        raise BackupError(f"{transport.description}: a file is listed twice in the backup request")
    check_path(backup_dir.rstrip("/") or "/", "backup_dir")
    if not _LABEL.fullmatch(label) or label in {".", ".."}:
        raise BackupError(f"backup label {label!r} must match [A-Za-z0-9._-]+")
    directory = f"{backup_dir.rstrip('/')}/{label}"
    archive, manifest = f"{directory}/{label}.tar.gz", f"{directory}/{label}.sha256"
    script = backup_script(directory, archive, manifest, files)
    what = f"backup of {len(files)} files into {archive!r}"
    out = _run(transport, script, CommandKind.BACKUP, timeout=timeout, what=what, handled={"files"})
    answer = parse_backup_answer(out)
    refused = (answer.not_regular, answer.unreadable)
    _refuse_bad_files(transport, out, refused, files, "nothing was backed up")
    if answer.archive_exists:
        return _resume(transport, files, answer.present, archive, manifest, timeout)
    missing = tuple(files[i] for i in answer.missing)
    entries = tuple(
        BackupEntry(files[i], sha, size) for i, (size, sha) in sorted(answer.present.items())
    )
    archive_sha = ""
    if entries:
        if answer.archive_sha256 is None:
            raise BackupError("the broker's answer has no 'A' record")
        archive_sha = answer.archive_sha256
    backup = Backup(archive, manifest, archive_sha, entries, missing)
    verify_backup(transport, backup, timeout=timeout)
    return backup


def _resume(
    transport: Transport,
    files: Sequence[str],
    present: Mapping[int, tuple[int, str]],
    archive: str,
    manifest: str,
    timeout: float,
) -> Backup:
    """The Backup an existing archive holds, if it is the backup of exactly `files`.

    A file may have been deleted since (the run crashed after its delete step); one that
    exists must still hold the bytes in the manifest.
    """
    host = transport.description
    rels = [path[1:] for path in files]
    readback = _read_back(transport, archive, manifest, rels, timeout=timeout)
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
    verify_backup(transport, backup, timeout=timeout)
    return backup


def verify_backup(transport: Transport, backup: Backup, *, timeout: float = 120.0) -> None:
    """Read the backup back: archive digest and mode, manifest, member names and bytes.

    Raises BackupError naming the first difference. A backup with no entries has no archive
    and nothing to verify.
    """
    if not backup.entries:
        return
    rels = [entry.path[1:] for entry in backup.entries]
    readback = _read_back(transport, backup.archive, backup.manifest, rels, timeout=timeout)
    _check(transport.description, backup, readback)


def delete_backed_up(
    transport: Transport, backup: Backup, *, timeout: float = 60.0
) -> tuple[str, ...]:
    """Delete exactly the backup's files, if each still holds the bytes that were backed up.

    All files are checked before any is removed, so a refusal deletes nothing. Files already
    gone are fine (a resumed run). Returns the paths this call removed.
    """
    if not backup.entries:
        return ()
    script = delete_script(
        backup.archive, backup.archive_sha256, [(e.sha256, e.path) for e in backup.entries]
    )
    host = transport.description
    what = f"deletion of {len(backup.entries)} backed-up files"
    out = _run(
        transport,
        script,
        CommandKind.DELETE,
        timeout=timeout,
        what=what,
        handled={"files", "archive"},
    )
    if out.failed == "archive":
        raise BackupError(
            f"{host}: backup archive {backup.archive!r} is missing or no longer has sha256"
            f" {backup.archive_sha256}; refusing to delete {len(backup.entries)} files"
        )
    answer = parse_delete_answer(out)
    paths = [entry.path for entry in backup.entries]
    for index, now in answer.changed:
        entry = backup.entries[index]
        raise BackupError(
            f"{host}: {entry.path!r} changed since the backup (sha256 now {now},"
            f" backed up {entry.sha256}); nothing was deleted"
        )
    refused = (answer.not_regular, answer.unreadable)
    _refuse_bad_files(transport, out, refused, paths, "nothing was deleted")
    remaining = [paths[i] for i in answer.remaining]
    if remaining:
        raise BackupError(f"{host}: {remaining[0]!r} still exists after it was deleted")
    return tuple(paths[i] for i in answer.deleted)


def restore_backup(
    transport: Transport, backup: Backup, *, timeout: float = 120.0
) -> tuple[str, ...]:
    """Put the backed-up files back in place from a verified archive; returns their paths.

    Existing files at those paths are replaced. Afterwards every restored file is hashed
    again and must equal the manifest.
    """
    if not backup.entries:
        return ()
    host = transport.description
    verify_backup(transport, backup, timeout=timeout)
    rels = [entry.path[1:] for entry in backup.entries]
    reason = check_member_names(rels, set(rels))
    if reason is not None:
        raise BackupError(f"{host}: refusing to restore from {backup.archive!r}: {reason}")
    script = restore_script(
        backup.archive, backup.archive_sha256, rels, [entry.path for entry in backup.entries]
    )
    what = f"restore of {len(rels)} files from {backup.archive!r}"
    out = _run(
        transport, script, CommandKind.RESTORE, timeout=timeout, what=what, handled={"archive"}
    )
    if out.failed == "archive":
        raise BackupError(
            f"{host}: backup archive {backup.archive!r} changed while it was being restored"
            f" (expected sha256 {backup.archive_sha256})"
        )
    found = out.digests("S")
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


def _read_back(
    transport: Transport,
    archive: str,
    manifest: str,
    rels: Sequence[str],
    *,
    timeout: float,
) -> ReadBack:
    script = read_back_script(archive, manifest, rels)
    out = _run(
        transport,
        script,
        CommandKind.BACKUP_READ_BACK,
        timeout=timeout,
        what=f"read-back of {archive!r}",
    )
    return parse_read_back(out)


def _check_kinds(host: str, archive: str, manifest: str, readback: ReadBack) -> None:
    for what, path, kind in (
        ("archive", archive, readback.archive_kind),
        ("manifest", manifest, readback.manifest_kind),
    ):
        if kind != "file":
            found = {"missing": "does not exist"}.get(kind, f"is a {kind}")
            raise BackupError(f"{host}: backup {what} {path!r} {found}, expected a regular file")


def _check(host: str, backup: Backup, readback: ReadBack) -> None:
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


def _run(
    transport: Transport,
    script: str,
    kind: CommandKind,
    *,
    timeout: float,
    what: str,
    handled: Collection[str] = (),
) -> ScriptOutput:
    """Run `script` (a `kind` of command) under sh and parse its records.

    Raises BackupError if it did not finish, unless it stopped at one of the `handled` steps,
    which the caller turns into a specific message.
    """
    result: CommandResult = transport.run(shell_command(script), timeout=timeout, kind=kind)
    out = parse_output(result.stdout)
    stderr = result.stderr.strip()[-500:]
    if out.failed is None and (result.exit_code != 0 or not out.complete):
        raise BackupError(
            f"{transport.description}: {what} did not complete (exit status"
            f" {result.exit_code}): {stderr or 'no error output'}"
        )
    if out.failed is not None and out.failed not in handled:
        raise BackupError(f"{transport.description}: {what} failed at {out.failed}: {stderr}")
    return out


def _refuse_bad_files(
    transport: Transport,
    out: ScriptOutput,
    refused: tuple[Sequence[int], Sequence[int]],
    paths: Sequence[str],
    after: str,
) -> None:
    """Raise for the first file the script refused: (not regular files, unreadable ones)."""
    host = transport.description
    not_regular, unreadable = refused
    for indexes, problem in (
        (not_regular, "is not a regular file"),
        (unreadable, "cannot be read"),
    ):
        for index in indexes:
            raise BackupError(f"{host}: {paths[index]!r} {problem}; {after}")
    if out.failed == "files":  # every refusal above prints a record; this is a backstop
        raise BackupError(f"{host}: a file could not be checked; {after}")
