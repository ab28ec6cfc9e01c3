"""Backups on a broker host, run for real through /bin/sh: round trip, hostile names,
tampering, planted archives, resume. Only the pure parts run without a shell."""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.errors import BackupError, HaltedError
from remediate.execute.backup import (
    Backup,
    BackupEntry,
    backup_files,
    check_member_names,
    delete_backed_up,
    parse_manifest,
    parse_tar_listing,
    restore_backup,
    verify_backup,
)
from remediate.transport import LocalTransport

LABEL = "run-20261122T031500Z-ab12-broker-2"
PWNED_ENV = "REMEDIATE_TEST_PWNED"
# Directory and file names a broker's disk could hold; each would run `touch` if a path ever
# reached the shell unquoted.
HOSTILE = [
    "with space",
    "single'quote",
    'double"quote',
    f'$(touch "${PWNED_ENV}")',
    f'`touch "${PWNED_ENV}"`',
    f';touch "${PWNED_ENV}";',
    "new\nline",
    "-leading-dash",
    "back\\slash",
    "tab\tand\rcr",
    "glob*?[a]",
    "ünïcødé",
]


@pytest.fixture
def transport() -> LocalTransport:
    return LocalTransport("broker-2 (local)")


@pytest.fixture
def pwned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file an injected command would create; it must never appear."""
    target = tmp_path / "pwned"
    monkeypatch.setenv(PWNED_ENV, str(target))
    return target


def write(path: Path, data: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return str(path)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_round_trip_backs_up_deletes_and_restores_exactly_the_files(
    tmp_path: Path, transport: LocalTransport
) -> None:
    log_dir = tmp_path / "kafka-logs"
    contents = {
        "orders-0/partition.metadata": b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",
        "orders-1/partition.metadata": b"version: 0\ntopic_id: BBBBBBBBBBBBBBBBBBBBBB\n",
        "orders-2/leader-epoch-checkpoint": b"",
    }
    files = [write(log_dir / name, data) for name, data in contents.items()]
    absent = str(log_dir / "orders-3/partition.metadata")
    bystander = write(log_dir / "orders-0/00000000000000000000.log", b"records")

    backup = backup_files(
        transport, [files[0], absent, *files[1:]], backup_dir=str(tmp_path / "backups"), label=LABEL
    )

    directory = tmp_path / "backups" / LABEL
    assert backup.archive == str(directory / f"{LABEL}.tar.gz")
    assert backup.manifest == str(directory / f"{LABEL}.sha256")
    assert backup.missing == (absent,)
    assert backup.entries == tuple(
        BackupEntry(path, sha(data), len(data))
        for path, data in zip(files, contents.values(), strict=True)
    )
    assert backup.archive_sha256 == sha(Path(backup.archive).read_bytes())
    assert (mode(backup.archive), mode(backup.manifest), mode(str(directory))) == (
        0o600,
        0o600,
        0o700,
    )
    # The manifest is plain sha256sum output, relative to /, and `sha256sum -c` accepts it.
    manifest = Path(backup.manifest).read_bytes()
    assert parse_manifest(manifest) == [
        (path[1:], sha(data)) for path, data in zip(files, contents.values(), strict=True)
    ]
    check = subprocess.run(["sha256sum", "-c", backup.manifest], cwd="/", capture_output=True)
    assert check.returncode == 0, check.stdout
    with tarfile.open(backup.archive) as archive:
        assert archive.getnames() == [path[1:] for path in files]

    assert delete_backed_up(transport, backup) == tuple(files)
    assert not any(Path(path).exists() for path in files)
    assert Path(bystander).read_bytes() == b"records"
    assert not Path(absent).exists()

    assert restore_backup(transport, backup) == tuple(files)
    assert [Path(path).read_bytes() for path in files] == list(contents.values())
    assert not Path(absent).exists()


@pytest.mark.fault(
    "Security",
    "Hostile file names in a backup, delete and restore",
    "Every name is quoted and passed after `--`: exactly those files are archived, deleted and "
    "restored",
)
def test_hostile_names_survive_backup_delete_and_restore(
    tmp_path: Path, transport: LocalTransport, pwned: Path
) -> None:
    root = tmp_path / "data dir"
    originals: dict[str, bytes] = {}
    for number, name in enumerate(HOSTILE):
        data = f"file {number}: {name}\n".encode()
        originals[write(root / name / name, data)] = data
        originals[write(root / name / "partition.metadata", data + b"\n")] = data + b"\n"
    files = list(originals)
    backup_dir = tmp_path / "back'ups $(x)"

    backup = backup_files(transport, files, backup_dir=str(backup_dir), label=LABEL)
    assert [entry.path for entry in backup.entries] == files
    assert [entry.sha256 for entry in backup.entries] == [sha(d) for d in originals.values()]
    # The newline and backslash names force sha256sum's escaped form, which is read back.
    assert any(line.startswith(b"\\") for line in Path(backup.manifest).read_bytes().split(b"\n"))
    with tarfile.open(backup.archive) as archive:
        assert archive.getnames() == [path[1:] for path in files]

    assert delete_backed_up(transport, backup) == tuple(files)
    assert not any(Path(path).exists() for path in files)
    assert all((root / name).is_dir() for name in HOSTILE)  # only files, never their dirs

    assert restore_backup(transport, backup) == tuple(files)
    assert {path: Path(path).read_bytes() for path in files} == originals
    assert not pwned.exists()
    assert not Path("/pwned").exists()


def test_a_backup_of_nothing_creates_no_archive(tmp_path: Path, transport: LocalTransport) -> None:
    absent = [str(tmp_path / "a" / "partition.metadata"), str(tmp_path / "b")]
    backup = backup_files(transport, absent, backup_dir=str(tmp_path / "backups"), label=LABEL)
    assert (backup.entries, backup.missing, backup.archive_sha256) == ((), tuple(absent), "")
    assert not Path(backup.archive).exists()
    assert not Path(backup.manifest).exists()
    verify_backup(transport, backup)
    assert delete_backed_up(transport, backup) == ()
    assert restore_backup(transport, backup) == ()
    assert (
        backup_files(transport, absent, backup_dir=str(tmp_path / "backups"), label=LABEL) == backup
    )


@pytest.fixture
def made(tmp_path: Path, transport: LocalTransport) -> tuple[Backup, list[str]]:
    files = [
        write(tmp_path / "logs" / f"t-{n}" / "partition.metadata", f"id {n}\n".encode())
        for n in range(3)
    ]
    backup = backup_files(transport, files, backup_dir=str(tmp_path / "backups"), label=LABEL)
    return backup, files


def test_an_archive_changed_after_the_backup_fails_verification(
    made: tuple[Backup, list[str]], transport: LocalTransport
) -> None:
    backup, _ = made
    with open(backup.archive, "ab") as archive:
        archive.write(b"\0")
    with pytest.raises(
        BackupError, match=f"archive {re.escape(repr(backup.archive))} has sha256 .* changed"
    ):
        verify_backup(transport, backup)
    assert issubclass(BackupError, HaltedError)


def test_a_forged_archive_with_its_digest_recorded_fails_on_the_member_bytes(
    made: tuple[Backup, list[str]], transport: LocalTransport
) -> None:
    backup, files = made
    forged = io.BytesIO()
    with tarfile.open(fileobj=forged, mode="w:gz") as archive:
        for number, path in enumerate(files):
            data = b"id 9\n" if number == 1 else f"id {number}\n".encode()
            info = tarfile.TarInfo(path[1:])
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    Path(backup.archive).write_bytes(forged.getvalue())
    recorded = Backup(
        backup.archive, backup.manifest, sha(forged.getvalue()), backup.entries, backup.missing
    )
    forged_sha = sha(b"id 9\n")
    with pytest.raises(
        BackupError, match=re.escape(f"holds {files[1]!r} with sha256 {forged_sha}")
    ):
        verify_backup(transport, recorded)


def test_an_edited_manifest_fails_verification(
    made: tuple[Backup, list[str]], transport: LocalTransport
) -> None:
    backup, files = made
    manifest = Path(backup.manifest)
    manifest.write_bytes(manifest.read_bytes().replace(files[2][1:].encode(), b"tmp/other"))
    with pytest.raises(
        BackupError, match=re.escape(f"manifest {backup.manifest!r} does not match")
    ):
        verify_backup(transport, backup)


@pytest.mark.fault(
    "Security",
    "A backup archive or manifest readable by others",
    "Archives and manifests are written 0600 (umask 077); one with another mode fails "
    "verification and blocks the delete",
)
@pytest.mark.parametrize("which", ["archive", "manifest"])
def test_a_readable_archive_or_manifest_fails_verification(
    made: tuple[Backup, list[str]], transport: LocalTransport, which: str
) -> None:
    backup, _ = made
    os.chmod(getattr(backup, which), 0o644)
    with pytest.raises(BackupError, match=f"backup {which} .* has mode 0644, expected 0600"):
        verify_backup(transport, backup)


def test_a_missing_archive_fails_verification_and_blocks_deletion(
    made: tuple[Backup, list[str]], transport: LocalTransport
) -> None:
    backup, files = made
    os.remove(backup.archive)
    with pytest.raises(BackupError, match=re.escape(f"archive {backup.archive!r} does not exist")):
        verify_backup(transport, backup)
    with pytest.raises(BackupError, match="refusing to delete 3 files"):
        delete_backed_up(transport, backup)
    assert all(Path(path).exists() for path in files)


def test_a_file_changed_since_the_backup_is_not_deleted_and_neither_are_the_others(
    made: tuple[Backup, list[str]], transport: LocalTransport
) -> None:
    backup, files = made
    Path(files[2]).write_bytes(b"id from zookeeper\n")
    with pytest.raises(BackupError, match=re.escape(f"{files[2]!r} changed since the backup")):
        delete_backed_up(transport, backup)
    assert [Path(path).read_bytes() for path in files] == [
        b"id 0\n",
        b"id 1\n",
        b"id from zookeeper\n",
    ]


def test_resume_returns_the_same_backup_and_never_overwrites_it(
    made: tuple[Backup, list[str]], tmp_path: Path, transport: LocalTransport
) -> None:
    backup, files = made
    before = os.stat(backup.archive)
    again = backup_files(transport, files, backup_dir=str(tmp_path / "backups"), label=LABEL)
    assert again == backup
    after = os.stat(backup.archive)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    assert delete_backed_up(transport, backup) == tuple(files)
    assert delete_backed_up(transport, backup) == ()
    # A run that crashed after deleting backs up again: the archive is the backup.
    resumed = backup_files(transport, files, backup_dir=str(tmp_path / "backups"), label=LABEL)
    assert resumed == backup
    assert restore_backup(transport, backup) == tuple(files)
    assert [Path(path).read_bytes() for path in files] == [b"id 0\n", b"id 1\n", b"id 2\n"]


def test_resume_refuses_an_existing_archive_that_differs_from_the_files(
    made: tuple[Backup, list[str]], tmp_path: Path, transport: LocalTransport
) -> None:
    backup, files = made
    archived = Path(backup.archive).read_bytes()
    backup_dir = str(tmp_path / "backups")
    Path(files[0]).write_bytes(b"rewritten\n")
    with pytest.raises(
        BackupError, match=re.escape(f"already exists at {backup.archive!r} with sha256")
    ):
        backup_files(transport, files, backup_dir=backup_dir, label=LABEL)
    Path(files[0]).write_bytes(b"id 0\n")
    extra = write(tmp_path / "logs" / "t-9" / "partition.metadata", b"id 9\n")
    with pytest.raises(BackupError, match=re.escape(f"without {extra!r}, which exists now")):
        backup_files(transport, [*files, extra], backup_dir=backup_dir, label=LABEL)
    with pytest.raises(
        BackupError, match=re.escape(f"holds {files[0]!r}, which was not requested")
    ):
        backup_files(transport, files[1:], backup_dir=backup_dir, label=LABEL)
    assert Path(backup.archive).read_bytes() == archived


@pytest.mark.parametrize("make", [os.mkdir, lambda p: os.symlink("/etc/hostname", p)])
def test_a_path_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, transport: LocalTransport, make: object
) -> None:
    regular = write(tmp_path / "t-0" / "partition.metadata", b"id\n")
    odd = tmp_path / "t-1" / "partition.metadata"
    odd.parent.mkdir()
    make(str(odd))  # type: ignore[operator]
    with pytest.raises(
        BackupError, match=re.escape(f"{str(odd)!r} is not a regular file; nothing was backed up")
    ):
        backup_files(transport, [regular, str(odd)], backup_dir=str(tmp_path / "b"), label=LABEL)
    assert not (tmp_path / "b" / LABEL / f"{LABEL}.tar.gz").exists()


@pytest.mark.parametrize(
    ("files", "label", "message"),
    [
        (["relative/partition.metadata"], LABEL, "must be an absolute path"),
        (["/var/kafka/../etc/shadow"], LABEL, "'..' components"),
        (["/var//kafka"], LABEL, "empty, '.' or '..'"),
        (["/var/./kafka"], LABEL, "empty, '.' or '..'"),
        (["/"], LABEL, "empty, '.' or '..'"),
        (["/var/kafka\0x"], LABEL, "without NUL"),
        (["/var/a", "/var/a"], LABEL, "listed twice"),
        (["/var/a"], "../up", "must match"),
        (["/var/a"], "a b", "must match"),
        (["/var/a"], "..", "must match"),
        (["/var/a"], "", "must match"),
    ],
)
def test_bad_requests_are_refused_before_anything_runs(
    tmp_path: Path, transport: LocalTransport, files: list[str], label: str, message: str
) -> None:
    with pytest.raises(BackupError, match=message):
        backup_files(transport, files, backup_dir=str(tmp_path / "backups"), label=label)
    assert not (tmp_path / "backups").exists()


@pytest.mark.parametrize(
    ("names", "reason"),
    [
        (["a/b", "c"], None),
        ([], None),
        (["/etc/passwd"], "archive member '/etc/passwd' is an absolute path"),
        (["../x"], "archive member '../x' has a '..' component"),
        (["a/../../b"], "archive member 'a/../../b' has a '..' component"),
        (["a/.."], "archive member 'a/..' has a '..' component"),
        (["a/b", "z"], "archive member 'z' is not one of the backed-up files"),
        (["a/b", "a/b"], "archive member 'a/b' appears more than once"),
        ([""], "an archive member has an empty name"),
    ],
)
def test_check_member_names(names: list[str], reason: str | None) -> None:
    allowed = {"a/b", "c", "/etc/passwd", "../x", "a/../../b", "a/.."}
    assert check_member_names(names, allowed) == reason


# Arbitrary text, and text built from the pieces that make a name dangerous.
NAME = st.one_of(
    st.text(),
    st.lists(st.sampled_from(["a", "/", ".", "..", "-", " ", "\n"]), max_size=8).map("".join),
)


@settings(max_examples=500)
@given(names=st.lists(NAME, max_size=6), extra=st.lists(NAME, max_size=6), data=st.data())
def test_accepted_member_names_are_allowed_relative_and_have_no_dotdot(
    names: list[str], extra: list[str], data: st.DataObject
) -> None:
    # Allow some of the names themselves, so that None is a frequent answer.
    chosen = data.draw(st.lists(st.sampled_from(names))) if names else []
    allowed = set(extra) | set(chosen)
    if check_member_names(names, allowed) is None:
        assert len(set(names)) == len(names)
        for name in names:
            assert name in allowed
            assert name and not name.startswith("/")
            assert ".." not in name.split("/")


@pytest.mark.fault(
    "Security",
    "A rollback archive holding an absolute path, `..` or a member outside its manifest",
    "Refused before anything is written",
)
@pytest.mark.parametrize(
    ("planted", "reason"),
    [
        ("../evil", "archive member '../evil' has a '..' component"),
        ("{rel}/logs/../evil", "has a '..' component"),
        ("{abs}/abs_evil", "is an absolute path"),
    ],
)
def test_restore_refuses_a_planted_member_and_writes_nothing(
    tmp_path: Path, transport: LocalTransport, planted: str, reason: str
) -> None:
    good = tmp_path / "logs" / "t-0" / "partition.metadata"
    data = b"id 0\n"
    name = planted.format(rel=str(tmp_path)[1:], abs=tmp_path)
    archive, manifest = tmp_path / "b" / "x.tar.gz", tmp_path / "b" / "x.sha256"
    archive.parent.mkdir()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member in (str(good)[1:], name):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive.write_bytes(buffer.getvalue())
    manifest.write_bytes(f"{sha(data)}  {str(good)[1:]}\n".encode())
    archive.chmod(0o600)
    manifest.chmod(0o600)
    backup = Backup(
        str(archive),
        str(manifest),
        sha(buffer.getvalue()),
        (BackupEntry(str(good), sha(data), len(data)),),
    )
    before = sorted(tmp_path.rglob("*"))

    with pytest.raises(
        BackupError, match=f"archive {re.escape(repr(str(archive)))} refused: .*{re.escape(reason)}"
    ):
        restore_backup(transport, backup)
    assert sorted(tmp_path.rglob("*")) == before
    assert not good.exists()
    assert not Path("/evil").exists()


def test_a_backup_cannot_even_name_a_path_outside_its_files() -> None:
    with pytest.raises(BackupError, match=re.escape("'..' components")):
        BackupEntry("/var/kafka/../../evil", "0" * 64, 1)


def test_backup_json_round_trip_and_field_errors() -> None:
    backup = Backup(
        "/b/r/r.tar.gz",
        "/b/r/r.sha256",
        "a" * 64,
        (
            BackupEntry("/l/t-0/partition.metadata", "b" * 64, 42),
            BackupEntry("/l/x y", "c" * 64, 0),
        ),
        ("/l/t-1/partition.metadata",),
    )
    doc = backup.to_json()
    assert Backup.from_json(doc) == backup
    assert doc["entries"][0] == {
        "path": "/l/t-0/partition.metadata",
        "sha256": "b" * 64,
        "size": 42,
    }

    cases: list[tuple[Callable[[dict[str, Any]], object], str]] = [
        (lambda d: d.update(archive=7), "archive"),
        (lambda d: d.pop("manifest"), "manifest"),
        (lambda d: d.update(entries="x"), "entries"),
        (lambda d: d["entries"][1].update(size="0"), "entries[1].size"),
        (lambda d: d["entries"][0].update(size=True), "entries[0].size"),
        (lambda d: d["entries"][0].update(sha256=None), "entries[0].sha256"),
        (lambda d: d.update(missing=[3]), "missing[0]"),
    ]
    for mutate, field in cases:
        broken = backup.to_json()
        mutate(broken)
        with pytest.raises(BackupError, match=re.escape(f"field '{field}'")):
            Backup.from_json(broken)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"%s  var/a b\n", [("var/a b", "%s")]),
        (b"%s *var/bin\n", [("var/bin", "%s")]),
        (b"\\%s  var/new\\nline\\\\x\\r\n", [("var/new\nline\\x\r", "%s")]),
    ],
)
def test_parse_manifest(line: bytes, expected: list[tuple[str, str]]) -> None:
    digest = "d" * 64
    assert parse_manifest(line.replace(b"%s", digest.encode())) == [
        (name, digest) for name, _ in expected
    ]


@pytest.mark.parametrize(
    "bad", [b"nothex  a\n", b"\\" + b"d" * 64 + b"  a\\q\n", b"d" * 64 + b"-a\n"]
)
def test_parse_manifest_refuses_what_sha256sum_never_writes(bad: bytes) -> None:
    with pytest.raises(BackupError):
        parse_manifest(bad)


def test_parse_tar_listing_reads_gnu_tars_escapes(tmp_path: Path) -> None:
    names = ["plain", "new\nline", "back\\slash", "ctl\a\b\f\v\t\r\x01\x7f", "ünï €"]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for name in names:
            tar.addfile(tarfile.TarInfo(name), io.BytesIO())
    (tmp_path / "n.tar.gz").write_bytes(buffer.getvalue())
    listing = subprocess.run(
        ["tar", "--quoting-style=escape", "-tzf", str(tmp_path / "n.tar.gz")],
        capture_output=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    ).stdout
    assert listing.count(b"\n") == len(names)  # one line per name, whatever the name holds
    assert parse_tar_listing(listing.rstrip(b"\n")) == tuple(names)
    with pytest.raises(BackupError, match="not UTF-8"):
        parse_tar_listing(b"bad\\377")
    with pytest.raises(BackupError, match="unexpected escape"):
        parse_tar_listing(b"bad\\q")
