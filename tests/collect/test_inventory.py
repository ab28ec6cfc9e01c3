"""The broker inventory: a real `sh`/`find`/`awk` run on trees built here, and its parser.

Every awk found on the machine is used: the system's, mawk, gawk, the one-true-awk
(`original-awk`) and busybox's, plus a run where sh, find and awk all come from busybox.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remediate.collect.inventory import (
    DEFAULT_MAX_CONTENT_BYTES,
    FORMAT_VERSION,
    DirEntry,
    FileState,
    Inventory,
    LogDirInfo,
    MetadataFinding,
    classify_metadata,
    inventory_command,
    parse_inventory,
)
from remediate.errors import FormatError
from remediate.formats.logdir import EpochEntry, PartitionDir, parse_leader_epoch_checkpoint

SOURCE = "broker-1"
TOPIC_ID = "J4HMUnGPS7KPVIjY6FgUvg"
METADATA = f"version: 0\ntopic_id: {TOPIC_ID}".encode()  # Kafka's exact bytes
EPOCHS = b"0\n2\n0 0\n3 1500\n"
UNIQUE = "0123456789abcdef0123456789abcdef"
ROOT_FILES = {
    "meta.properties": b"#\n#Sat Jan 01 00:00:00 UTC 2022\nbroker.id=1\nversion=0\n",
    "replication-offset-checkpoint": b"0\n1\norders 0 42\n",
    "recovery-point-offset-checkpoint": b"0\n1\norders 0 42\n",
    "log-start-offset-checkpoint": b"0\n1\norders 0 0\n",
    "cleaner-offset-checkpoint": b"0\n0\n",
    ".lock": b"",
    ".kafka_cleanshutdown": b"",
    "t-9": b"a regular file with a partition's name is not reported",
}


# -- running the command -----------------------------------------------------------------------


def run(cmd: str, *, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run the command as a remote shell would (`/bin/sh -c <command>`); its stdout."""
    proc = subprocess.run(
        cmd, shell=True, executable="/bin/sh", capture_output=True, env=env, cwd=cwd, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b"", proc.stderr
    # Printable ASCII, line ends and the tabs before a plain file record's content lines.
    assert all(byte in (0x09, 0x0A) or 0x20 <= byte <= 0x7E for byte in proc.stdout)
    return proc.stdout.decode("ascii")


def inventory(
    log_dirs: list[Path | str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    epoch_tail_lines: int = 3,
) -> Inventory:
    command = inventory_command(
        [str(d) for d in log_dirs],
        max_content_bytes=max_content_bytes,
        epoch_tail_lines=epoch_tail_lines,
    )
    output = run(command, env=env, cwd=cwd)
    return parse_inventory(output, source=SOURCE)


def by_name(info: LogDirInfo) -> dict[bytes, DirEntry]:
    entries = {os.fsencode(e.name): e for e in info.entries}
    assert len(entries) == len(info.entries)
    return entries


# -- building trees ----------------------------------------------------------------------------

# What to put in a partition directory: bytes for a regular file, or one of these markers.
DIRECTORY = "directory"
DANGLING = "dangling symlink"
LINK_TO_VALID = "symlink to a valid file"
FIFO = "fifo"
Content = bytes | str


def make_file(path: bytes, content: Content) -> None:
    if isinstance(content, bytes):
        with open(path, "wb") as handle:
            handle.write(content)
    elif content == DIRECTORY:
        os.mkdir(path)
    elif content == DANGLING:
        os.symlink(b"does-not-exist", path)
    elif content == LINK_TO_VALID:
        target = path + b".target"
        with open(target, "wb") as handle:
            handle.write(METADATA)
        os.symlink(os.path.basename(target), path)
    elif content == FIFO:
        os.mkfifo(path)
    else:  # pragma: no cover
        raise AssertionError(content)


def make_partition(log_dir: Path, name: bytes, files: dict[str, Content]) -> None:
    directory = os.path.join(os.fsencode(log_dir), name)
    os.mkdir(directory)
    for file_name, content in files.items():
        make_file(os.path.join(directory, file_name.encode()), content)


def make_root_files(log_dir: Path) -> None:
    for name, content in ROOT_FILES.items():
        (log_dir / name).write_bytes(content)


# -- the table ---------------------------------------------------------------------------------


def present(content: bytes, lines: int | None, *, truncated: bool = False) -> FileState:
    return FileState("present", content, truncated, lines)


def unreadable(reason: str) -> FileState:
    return FileState("unreadable", None, reason=reason)


ABSENT = FileState("absent", None)
KAFKA_METADATA = present(METADATA, 2)
KAFKA_EPOCHS = present(b"0\n2\n0 0\n3 1500", 4)
GARBAGE = b"\x00\xff\xfeversion\x00: 0\n\x80topic_id:\x00 \xc3(" + bytes(range(256))
LONG_EPOCHS = b"0\n10\n" + b"".join(f"{e} {e * 100}\n".encode() for e in range(10))
HUGE_LINE = METADATA + b"\n" + b"x" * 10_000
LONG_FIRST_LINE = b"x" * 10_000 + b"\n" + METADATA
MANY_LINES = b"version: 0\n" * 2000


@dataclass(frozen=True)
class Case:
    """One directory of the table log dir and everything the inventory must say about it."""

    id: str
    name: bytes
    files: dict[str, Content]
    metadata: FileState | Callable[[FileState], bool]
    epoch: FileState = ABSENT
    finding: str = "ok"
    partition: PartitionDir | None = None
    problem: str | None = None  # a fragment of name_problem, for names that are not partitions


def truncated_to_limit(state: FileState) -> bool:
    return (
        state.state == "present"
        and state.truncated
        and state.line_count is None
        and state.content is not None
        and len(state.content) <= DEFAULT_MAX_CONTENT_BYTES
    )


def garbage_read(state: FileState) -> bool:
    # mawk and gawk keep NUL bytes (compared exactly below); C-string awks lose or split them.
    return state.state == "present" and not state.truncated and state.content is not None


CASES = [
    Case(
        "kafka-partition",
        b"orders-0",
        {"partition.metadata": METADATA, "leader-epoch-checkpoint": EPOCHS},
        KAFKA_METADATA,
        KAFKA_EPOCHS,
        partition=PartitionDir("orders-0", "orders", 0),
    ),
    Case(
        "dots-and-dashes",
        b"my.topic-with-dash-12",
        {"partition.metadata": METADATA, "leader-epoch-checkpoint": EPOCHS},
        KAFKA_METADATA,
        KAFKA_EPOCHS,
        partition=PartitionDir("my.topic-with-dash-12", "my.topic-with-dash", 12),
    ),
    Case(
        "internal-topic",
        b"__consumer_offsets-49",
        {"partition.metadata": METADATA},
        KAFKA_METADATA,
        partition=PartitionDir("__consumer_offsets-49", "__consumer_offsets", 49),
    ),
    Case(
        "no-partition-metadata",
        b"orders-1",
        {"leader-epoch-checkpoint": EPOCHS, "00000000000000000000.log": b""},
        ABSENT,
        KAFKA_EPOCHS,
        finding="missing",
        partition=PartitionDir("orders-1", "orders", 1),
    ),
    Case(
        "empty-partition-dir",
        b"orders-2",
        {},
        ABSENT,
        finding="missing",
        partition=PartitionDir("orders-2", "orders", 2),
    ),
    Case(
        "zero-id",
        b"zero-0",
        {"partition.metadata": b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA"},
        present(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2),
        finding="corrupt",
        partition=PartitionDir("zero-0", "zero", 0),
    ),
    Case(
        "wrong-version",
        b"version-0",
        {"partition.metadata": f"version: 1\ntopic_id: {TOPIC_ID}".encode()},
        present(f"version: 1\ntopic_id: {TOPIC_ID}".encode(), 2),
        finding="corrupt",
        partition=PartitionDir("version-0", "version", 0),
    ),
    Case(
        "binary-garbage",
        b"garbage-0",
        {"partition.metadata": GARBAGE},
        garbage_read,
        finding="corrupt",
        partition=PartitionDir("garbage-0", "garbage", 0),
    ),
    Case(
        "empty-file",
        b"empty-0",
        {"partition.metadata": b""},
        present(b"", 0),
        finding="corrupt",
        partition=PartitionDir("empty-0", "empty", 0),
    ),
    Case(
        "only-newline",
        b"newline-0",
        {"partition.metadata": b"\n"},
        present(b"", 1),
        finding="corrupt",
        partition=PartitionDir("newline-0", "newline", 0),
    ),
    Case(
        "huge-line",
        b"huge-0",
        {"partition.metadata": HUGE_LINE},
        present(HUGE_LINE[:DEFAULT_MAX_CONTENT_BYTES], None, truncated=True),
        # Kafka reads the first two lines and never what follows: the file is a good one.
        finding="ok",
        partition=PartitionDir("huge-0", "huge", 0),
    ),
    Case(
        "long-first-line",
        b"long-0",
        {"partition.metadata": LONG_FIRST_LINE},
        present(LONG_FIRST_LINE[:DEFAULT_MAX_CONTENT_BYTES], None, truncated=True),
        finding="corrupt",
        partition=PartitionDir("long-0", "long", 0),
    ),
    Case(
        "many-lines",
        b"many-0",
        {"partition.metadata": MANY_LINES},
        truncated_to_limit,
        finding="corrupt",
        partition=PartitionDir("many-0", "many", 0),
    ),
    Case(
        "metadata-is-a-directory",
        b"dir-0",
        {"partition.metadata": DIRECTORY, "leader-epoch-checkpoint": DIRECTORY},
        unreadable("directory"),
        unreadable("directory"),
        finding="unreadable",
        partition=PartitionDir("dir-0", "dir", 0),
    ),
    Case(
        "dangling-symlink",
        b"dangling-0",
        {"partition.metadata": DANGLING, "leader-epoch-checkpoint": DANGLING},
        unreadable("symlink"),
        unreadable("symlink"),
        finding="unreadable",
        partition=PartitionDir("dangling-0", "dangling", 0),
    ),
    Case(
        "symlink-not-followed",
        b"linked-0",
        {"partition.metadata": LINK_TO_VALID},
        unreadable("symlink"),
        finding="unreadable",
        partition=PartitionDir("linked-0", "linked", 0),
    ),
    Case(
        "fifo-never-opened",
        b"fifo-0",
        {"partition.metadata": FIFO, "leader-epoch-checkpoint": FIFO},
        unreadable("special"),
        unreadable("special"),
        finding="unreadable",
        partition=PartitionDir("fifo-0", "fifo", 0),
    ),
    Case(
        "crlf-is-accepted-like-kafka",
        b"crlf-0",
        {"partition.metadata": f"version: 0\r\ntopic_id: {TOPIC_ID}\r\n".encode()},
        present(f"version: 0\r\ntopic_id: {TOPIC_ID}\r".encode(), 2),
        partition=PartitionDir("crlf-0", "crlf", 0),
    ),
    Case(
        "final-newline-is-not-seen",
        b"final-0",
        {"partition.metadata": METADATA + b"\n"},
        KAFKA_METADATA,
        partition=PartitionDir("final-0", "final", 0),
    ),
    Case(
        "long-epoch-checkpoint",
        b"epochs-0",
        {"partition.metadata": METADATA, "leader-epoch-checkpoint": LONG_EPOCHS},
        KAFKA_METADATA,
        present(b"0\n10\n7 700\n8 800\n9 900", 12, truncated=True),
        partition=PartitionDir("epochs-0", "epochs", 0),
    ),
    Case(
        "delete-dir",
        f"orders-6.{UNIQUE}-delete".encode(),
        {"partition.metadata": METADATA},
        KAFKA_METADATA,
        partition=PartitionDir(f"orders-6.{UNIQUE}-delete", "orders", 6, "delete"),
    ),
    Case(
        "future-dir",
        f"orders-7.{UNIQUE}-future".encode(),
        {"partition.metadata": METADATA},
        KAFKA_METADATA,
        partition=PartitionDir(f"orders-7.{UNIQUE}-future", "orders", 7, "future"),
    ),
    Case(
        "stray-dir",
        f"orders-8.{UNIQUE}-stray".encode(),
        {},
        ABSENT,
        finding="missing",
        partition=PartitionDir(f"orders-8.{UNIQUE}-stray", "orders", 8, "stray"),
    ),
    Case("lost+found", b"lost+found", {}, ABSENT, finding="missing", problem="directory name"),
    Case("foo", b"foo", {}, ABSENT, finding="missing", problem="directory name"),
    Case(
        "illegal-topic",
        b"t@x-0",
        {"partition.metadata": METADATA},
        KAFKA_METADATA,
        problem="topic name contains characters",
    ),
    Case(
        "not-a-number",
        b"orders-x",
        {"partition.metadata": METADATA},
        KAFKA_METADATA,
        problem="partition: expected an integer",
    ),
    Case(
        "dir-named-partition.metadata",
        b"partition.metadata",
        {"partition.metadata": METADATA},
        KAFKA_METADATA,
        problem="directory name",
    ),
    Case(
        "nested-dirs-not-reported",
        b"nested-0",
        {"sub": DIRECTORY, "sub/partition.metadata": b"nested", "sub/nested-1": DIRECTORY},
        ABSENT,
        finding="missing",
        partition=PartitionDir("nested-0", "nested", 0),
    ),
]
CASE_NAMES = {case.name for case in CASES}
assert len(CASE_NAMES) == len(CASES)


@pytest.fixture(scope="module")
def table(
    tool_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Inventory]:
    log_dir = tmp_path_factory.mktemp("table")
    make_root_files(log_dir)
    (log_dir / "link-0").symlink_to(log_dir / "orders-0")  # symlinks to directories: not listed
    for case in CASES:
        make_partition(log_dir, case.name, case.files)
    return log_dir, inventory([log_dir], env=tool_env)


def test_table_lists_exactly_the_child_directories(table: tuple[Path, Inventory]) -> None:
    log_dir, result = table
    assert [(info.path, info.state) for info in result.log_dirs] == [(str(log_dir), "present")]
    entries = result.log_dirs[0].entries
    assert {os.fsencode(e.name) for e in entries} == CASE_NAMES
    assert [os.fsencode(e.name) for e in entries] == sorted(CASE_NAMES)
    assert all(e.log_dir == str(log_dir) for e in entries)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_table(case: Case, table: tuple[Path, Inventory]) -> None:
    _, result = table
    entry = by_name(result.log_dirs[0])[case.name]
    if callable(case.metadata):
        assert case.metadata(entry.metadata), entry.metadata
    else:
        assert entry.metadata == case.metadata
    assert entry.epoch_checkpoint == case.epoch
    finding = classify_metadata(entry)
    assert finding.state == case.finding, finding
    if case.finding == "ok":
        assert finding == MetadataFinding("ok", TOPIC_ID, None)
    assert entry.partition == case.partition
    if case.problem is None:
        assert entry.name_problem is None
    else:
        assert entry.partition is None
        assert entry.name_problem is not None
        assert case.problem in entry.name_problem


def test_table_binary_garbage_is_exact_where_awk_keeps_nul(table: tuple[Path, Inventory]) -> None:
    _, result = table
    state = by_name(result.log_dirs[0])[b"garbage-0"].metadata
    if result.awk_keeps_nul:
        assert state == present(GARBAGE, 3)


def test_table_findings_explain_corruption(table: tuple[Path, Inventory]) -> None:
    _, result = table
    entries = by_name(result.log_dirs[0])
    zero = classify_metadata(entries[b"zero-0"])
    assert zero.problem is not None and "non-zero" in zero.problem
    assert "zero-0/partition.metadata" in zero.problem
    version = classify_metadata(entries[b"version-0"])
    assert version.problem is not None and "version" in version.problem
    assert classify_metadata(entries[b"huge-0"]).problem is None  # Kafka reads two lines
    long = classify_metadata(entries[b"long-0"])
    assert long.problem is not None and "within what the inventory reads" in long.problem
    assert classify_metadata(entries[b"dir-0"]).problem == (
        "partition.metadata could not be read (directory)"
    )


def test_epoch_checkpoint_content_parses(table: tuple[Path, Inventory]) -> None:
    _, result = table
    entry = by_name(result.log_dirs[0])[b"orders-0"]
    content = entry.epoch_checkpoint.content
    assert content is not None
    assert parse_leader_epoch_checkpoint(content, source="x") == [
        EpochEntry(0, 0),
        EpochEntry(3, 1500),
    ]


# -- log dirs ----------------------------------------------------------------------------------


def test_several_log_dirs_in_one_command(tool_env: dict[str, str], tmp_path: Path) -> None:
    first, second = tmp_path / "data1", tmp_path / "data2"
    for log_dir, topic in ((first, "a"), (second, "b")):
        log_dir.mkdir()
        make_root_files(log_dir)
        make_partition(log_dir, f"{topic}-0".encode(), {"partition.metadata": METADATA})
    plain_file = tmp_path / "file"
    plain_file.write_bytes(b"not a directory")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "linked").symlink_to(second)
    relative = tmp_path / "-rel dir"
    relative.mkdir()
    make_partition(relative, b"c-0", {})
    dirs: list[Path | str] = [
        first,
        tmp_path / "missing",
        plain_file,
        second,
        tmp_path / "dangling",
        tmp_path / "linked",
        "-rel dir",
        str(first) + "/",
    ]
    result = inventory(dirs, env=tool_env, cwd=tmp_path)
    assert [(info.path, info.state) for info in result.log_dirs] == [
        (str(first), "present"),
        (str(tmp_path / "missing"), "missing"),
        (str(plain_file), "not_a_directory"),
        (str(second), "present"),
        (str(tmp_path / "dangling"), "not_a_directory"),
        (str(tmp_path / "linked"), "present"),
        ("-rel dir", "present"),
        (str(first) + "/", "present"),
    ]
    names = [[e.name for e in info.entries] for info in result.log_dirs]
    assert names == [["a-0"], [], [], ["b-0"], [], ["b-0"], ["c-0"], ["a-0"]]
    assert result.log_dirs[6].entries[0].log_dir == "-rel dir"


def test_no_log_dirs(tool_env: dict[str, str]) -> None:
    assert inventory([], env=tool_env).log_dirs == ()


def test_limits(tool_env: dict[str, str], tmp_path: Path) -> None:
    make_partition(
        tmp_path, b"t-0", {"partition.metadata": METADATA, "leader-epoch-checkpoint": LONG_EPOCHS}
    )
    make_partition(tmp_path, b"t-1", {"leader-epoch-checkpoint": b"0\n" + b"9" * 50 + b"\n"})
    small = inventory([tmp_path], env=tool_env, max_content_bytes=15, epoch_tail_lines=0)
    entries = by_name(small.log_dirs[0])
    assert entries[b"t-0"].metadata == present(b"version: 0\ntopi", None, truncated=True)
    assert entries[b"t-0"].epoch_checkpoint == present(b"0\n10", 12, truncated=True)
    assert entries[b"t-1"].epoch_checkpoint == present(b"0\n" + b"9" * 15, 2, truncated=True)
    exact = inventory(
        [tmp_path], env=tool_env, max_content_bytes=len(METADATA), epoch_tail_lines=10
    )
    entries = by_name(exact.log_dirs[0])
    assert entries[b"t-0"].metadata == KAFKA_METADATA
    assert entries[b"t-0"].epoch_checkpoint == present(LONG_EPOCHS[:-1], 12)


def test_failing_listing_makes_the_log_dir_unreadable(tmp_path: Path) -> None:
    """find's exit status reaches the output: here an awk that fails while listing."""
    awk = shutil.which("awk")
    assert awk is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "awk"
    wrapper.write_text(
        f'#!/bin/sh\n{shlex.quote(awk)} "$@"; rc=$?\n'
        'for a in "$@"; do [ "$a" = m=D ] && exit 3; done\nexit $rc\n'
    )
    wrapper.chmod(0o755)
    log_dir = tmp_path / "data"
    log_dir.mkdir()
    make_partition(log_dir, b"t-0", {"partition.metadata": METADATA})
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", REMEDIATE_AWK="awk")
    result = inventory([log_dir], env=env)
    assert result.log_dirs[0].state == "unreadable"
    assert [e.name for e in result.log_dirs[0].entries] == ["t-0"]


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory that an unprivileged user can reach (pytest's tmp_path is private)."""
    directory = Path(tempfile.mkdtemp(prefix="inventory-"))
    directory.chmod(0o755)
    yield directory
    for path in directory.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(directory)


def test_permissions_as_an_unprivileged_user(shared_tmp: Path) -> None:
    """What root can never see: unreadable log dirs, partition dirs and files."""
    locked = shared_tmp / "locked"
    locked.mkdir()
    readable = shared_tmp / "data"
    readable.mkdir()
    make_partition(readable, b"t-0", {"partition.metadata": METADATA})
    make_partition(readable, b"t-1", {"partition.metadata": METADATA})
    (readable / "t-1" / "partition.metadata").chmod(0)
    for path in (shared_tmp, readable, readable / "t-0", readable / "t-1"):
        path.chmod(0o755)
    (readable / "t-0" / "partition.metadata").chmod(0o644)
    locked.chmod(0)
    unlistable = shared_tmp / "unlistable"
    unlistable.mkdir()
    unlistable.chmod(0o755)
    make_partition(unlistable, b"u-0", {})
    (unlistable / "u-0").chmod(0)
    cmd = inventory_command([str(readable), str(locked), str(unlistable)])
    if os.geteuid() == 0:
        cmd = f"setpriv --reuid=65534 --regid=65534 --clear-groups {cmd}"
    proc = subprocess.run(cmd, shell=True, executable="/bin/sh", capture_output=True, timeout=60)
    assert proc.returncode == 0
    assert b"Permission denied" in proc.stderr  # find's complaint about u-0
    result = parse_inventory(proc.stdout.decode("ascii"), source=SOURCE)
    assert [(info.path, info.state) for info in result.log_dirs] == [
        (str(readable), "present"),
        (str(locked), "unreadable"),
        (str(unlistable), "unreadable"),
    ]
    entries = by_name(result.log_dirs[0])
    assert entries[b"t-0"].metadata == KAFKA_METADATA
    assert entries[b"t-1"].metadata == unreadable("error")
    assert classify_metadata(entries[b"t-1"]).state == "unreadable"
    assert [e.name for e in result.log_dirs[2].entries] == ["u-0"]


# -- hostile names -----------------------------------------------------------------------------


MARKER = f"PWNED_{uuid.uuid4().hex}"
HOSTILE_NAMES = [
    b"with space-0",
    b"it's-0",
    b'say "hi"-0',
    b"$(touch " + MARKER.encode() + b")-0",
    b"`touch " + MARKER.encode() + b"`",
    b"$(touch${IFS}" + MARKER.encode() + b")",
    b";rm -rf x-0",
    b"&& touch " + MARKER.encode(),
    b"| touch " + MARKER.encode(),
    b"a\nb-0",
    b"\n",
    b"\nend 0\n",
    b"L 0 00 present",
    b"tab\there-0",
    b"back\\slash-0",
    b"\\",
    b"*",
    b"star*-0",
    b"?",
    b"[a-z]-0",
    b"-rf",
    b"--help",
    b"-",
    b"-v",
    b"-exec",
    b"{}",
    b"+",
    b"!",
    b"(",
    b"\\(",
    b"%s%d%n-0",
    b"a=b",
    b"m=F",
    b"$P",
    b"${IFS}",
    b"~",
    b"..-0",
    b"...",
    b".hidden-0",
    b" ",
    b"\r",
    b"\x1b[31mred",
    b"\x7f",
    b"t\xff-0",
    b"\x80\x81\xfe\xff",
    "été-0".encode(),
    b"x" * 255,
    b"partition.metadata",
    b"leader-epoch-checkpoint",
    b"x\npartition.metadata",
]


def test_hostile_names(tool_env: dict[str, str], tmp_path: Path) -> None:
    log_dir = tmp_path / f"log $(touch {MARKER}) `touch {MARKER}` 'dir'"
    log_dir.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for name in HOSTILE_NAMES:
        make_partition(
            log_dir, name, {"partition.metadata": METADATA, "leader-epoch-checkpoint": EPOCHS}
        )
    result = inventory([log_dir], env=tool_env, cwd=cwd)
    info = result.log_dirs[0]
    assert info.path == str(log_dir)
    entries = by_name(info)
    assert set(entries) == set(HOSTILE_NAMES)
    for name, entry in entries.items():
        assert entry.metadata == KAFKA_METADATA, name
        assert entry.epoch_checkpoint == KAFKA_EPOCHS, name
    assert entries[b"t\xff-0"].name == "t\udcff-0"
    assert entries[b"t\xff-0"].partition is None
    assert entries["été-0".encode()].partition is None  # not ASCII: not a legal topic
    assert entries[b"with space-0"].name_problem is not None
    assert entries[b"..-0"].partition is None
    assert "'.' or '..'" in (entries[b"..-0"].name_problem or "")
    assert not list(tmp_path.rglob(MARKER))
    assert not list(Path.cwd().glob(MARKER))


def test_every_byte_in_a_name(tool_env: dict[str, str], tmp_path: Path) -> None:
    names = {b"b" + bytes([k]) + b"-0" for k in range(1, 256) if k != 0x2F}
    for name in names:
        os.mkdir(os.path.join(os.fsencode(tmp_path), name))
    result = inventory([tmp_path], env=tool_env)
    assert set(by_name(result.log_dirs[0])) == names


def test_hostile_log_dir_paths(tool_env: dict[str, str], tmp_path: Path) -> None:
    weird = os.path.join(
        os.fsencode(tmp_path), b"a 'b' \"c\" $(touch " + MARKER.encode() + b")\n\xff"
    )
    os.mkdir(weird)
    make_partition(Path(os.fsdecode(weird)), b"t-0", {})
    path = os.fsdecode(weird)
    result = inventory([path], env=tool_env, cwd=tmp_path)
    assert result.log_dirs[0].path == path
    assert os.fsencode(result.log_dirs[0].path) == weird
    assert [e.name for e in result.log_dirs[0].entries] == ["t-0"]
    assert not list(tmp_path.rglob(MARKER))


def _legal_name(raw: bytes) -> bool:
    return b"\0" not in raw and b"/" not in raw and raw not in (b".", b"..")


@pytest.mark.fault(
    "Bad input",
    "Directory names on a broker with any bytes: shell metacharacters, newlines, invalid UTF-8 "
    "(fuzzed)",
    "Listed exactly by one quoted remote command and reported as they are; a name that is not a"
    " legal partition is never acted on",
)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(min_size=1, max_size=60).filter(_legal_name))
def test_any_name_round_trips(raw: bytes, tmp_path: Path) -> None:
    log_dir = os.fsencode(tempfile.mkdtemp(dir=tmp_path))
    os.mkdir(os.path.join(log_dir, raw))
    with open(os.path.join(log_dir, raw, b"partition.metadata"), "wb") as handle:
        handle.write(METADATA)
    result = inventory([os.fsdecode(log_dir)], cwd=tmp_path)
    (entry,) = result.log_dirs[0].entries
    assert os.fsencode(entry.name) == raw
    assert entry.metadata == KAFKA_METADATA
    assert not list(tmp_path.rglob(MARKER))


# -- scale -------------------------------------------------------------------------------------


@pytest.mark.fault(
    "Bad input",
    "A huge inventory: 5,000 partition directories in one log dir",
    "Collected by one remote command per broker; every directory and file is listed",
)
def test_five_thousand_partitions_in_one_command(tmp_path: Path) -> None:
    make_root_files(tmp_path)
    expected = set()
    for number in range(5000):
        name = f"topic-{number % 50}-{number // 50}"
        expected.add(name)
        directory = tmp_path / name
        directory.mkdir()
        (directory / "partition.metadata").write_bytes(METADATA)
        (directory / "leader-epoch-checkpoint").write_bytes(EPOCHS)
        (directory / "00000000000000000000.log").write_bytes(b"")
    result = inventory([tmp_path])
    entries = result.log_dirs[0].entries
    assert {e.name for e in entries} == expected
    assert all(classify_metadata(e).topic_id == TOPIC_ID for e in entries)
    assert all(e.epoch_checkpoint == KAFKA_EPOCHS for e in entries)


def test_kafka_partitions_take_one_line_per_file(tool_env: dict[str, str], tmp_path: Path) -> None:
    """A Kafka partition directory (a plain name, plain-text files) is one `d` line and one `f`
    line per file, its lines after tabs, with every awk; anything else takes the hex records."""
    make_partition(
        tmp_path,
        b"orders-0",
        {"partition.metadata": METADATA, "leader-epoch-checkpoint": EPOCHS},
    )
    make_partition(tmp_path, b"crlf-0", {"partition.metadata": METADATA.replace(b"\n", b"\r\n")})
    make_partition(tmp_path, b"sp ace-0", {"partition.metadata": METADATA})
    command = inventory_command([str(tmp_path)], epoch_tail_lines=1)
    output = run(command, env=tool_env)
    lines = output.splitlines()
    assert "d 0 orders-0" in lines
    assert f"f 0 orders-0 metadata present 2 2 0\tversion: 0\ttopic_id: {TOPIC_ID}" in lines
    assert "f 0 orders-0 epoch present 3 4 1\t0\t2\t3 1500" in lines
    # A line with "\r" is not plain text, a name with a space is not plain: hex for both.
    assert "d 0 crlf-0" in lines
    assert f"F 0 {b'crlf-0'.hex()} metadata present 2 2 0" in lines
    assert f"D 0 {b'sp ace-0'.hex()}" in lines
    assert f"F 0 {b'sp ace-0'.hex()} metadata present 2 2 0" in lines
    entries = by_name(parse_inventory(output, source=SOURCE).log_dirs[0])
    assert entries[b"orders-0"].metadata == KAFKA_METADATA
    assert entries[b"orders-0"].epoch_checkpoint == present(b"0\n2\n3 1500", 4, truncated=True)
    assert entries[b"crlf-0"].metadata == present(METADATA.replace(b"\n", b"\r\n"), 2)
    assert entries[b"sp ace-0"].metadata == KAFKA_METADATA


# -- the command string ------------------------------------------------------------------------


def test_command_shape() -> None:
    dirs = ["/var/lib/kafka/data", "/data/it's here", "-x"]
    command = inventory_command(dirs)
    words = shlex.split(command)
    # At a lower priority: on a busy broker, the broker's own work comes first.
    assert words[:5] == ["nice", "-n", "10", "sh", "-c"]
    assert words[6:] == ["sh", "", *dirs]  # no state-change log
    with_log = shlex.split(inventory_command(dirs, state_change_log="/var/log/kafka/sc.log"))
    assert with_log[6:] == ["sh", "/var/log/kafka/sc.log", *dirs]
    assert f"x={DEFAULT_MAX_CONTENT_BYTES} -v t=3 " in words[5]
    assert "x=100 -v t=7 " in inventory_command(dirs, max_content_bytes=100, epoch_tail_lines=7)


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ("/data", {}, TypeError),
        ([""], {}, ValueError),
        (["/a\0b"], {}, ValueError),
        (["/data"], {"max_content_bytes": 0}, ValueError),
        (["/data"], {"epoch_tail_lines": -1}, ValueError),
        (["/data"], {"state_change_log": ""}, ValueError),
        (["/data"], {"state_change_log": "/a\0b"}, ValueError),
        (["/data"], {"state_change_tail_bytes": 0}, ValueError),
    ],
)
def test_command_rejects(
    args: object, kwargs: dict[str, int | str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        inventory_command(args, **kwargs)  # type: ignore[arg-type]


# -- the parser on its own ---------------------------------------------------------------------


def hexs(raw: bytes) -> str:
    return raw.hex()


HEADER = f"remediate-inventory {FORMAT_VERSION} awk-nul=1"
LD = f"L 0 {hexs(b'/data')} present"
GOOD = "\n".join(
    [
        HEADER,
        LD,
        f"F 0 {hexs(b't-0')} metadata present 2 2 0",
        f"T {hexs(b'version: 0')}",
        f"T {hexs(f'topic_id: {TOPIC_ID}'.encode())}",
        f"D 0 {hexs(b't-0')}",
        f"F 0 {hexs(b't-0')} epoch present 1 1 0",
        "T",
        f"D 0 {hexs(b'foo')}",
        f"F 0 {hexs(b'foo')} metadata unreadable symlink",
        "Z 0 0",
        f"L 1 {hexs(b'/gone')} missing",
        "end 2",
        "",
    ]
)


PLAIN_GOOD = "\n".join(
    [
        HEADER,
        LD,
        f"f 0 t-0 metadata present 2 2 0\tversion: 0\ttopic_id: {TOPIC_ID}",
        "d 0 t-0",
        "f 0 t-0 epoch present 1 1 0\t",
        "d 0 u.v_w-1",
        "f 0 u.v_w-1 epoch present 0 0 0",
        "f 0 u.v_w-1 metadata unreadable directory",
        f"D 0 {hexs(b'x y')}",
        f"F 0 {hexs(b'x y')} metadata present 1 1 0",
        "T " + hexs(b"a\tb"),
        "Z 0 0",
        f"L 1 {hexs(b'/gone')} missing",
        "end 2",
        "",
    ]
)


def test_parse_plain_records() -> None:
    """The one-line records read as the hex ones do: same entries, same file states."""
    data, _gone = parse_inventory(PLAIN_GOOD, source=SOURCE).log_dirs
    entries = by_name(data)
    assert sorted(entries) == [b"t-0", b"u.v_w-1", b"x y"]
    assert entries[b"t-0"].metadata == KAFKA_METADATA
    assert entries[b"t-0"].epoch_checkpoint == present(b"", 1)  # one empty line
    assert entries[b"u.v_w-1"].epoch_checkpoint == present(b"", 0)  # no line at all
    assert entries[b"u.v_w-1"].metadata == unreadable("directory")
    assert entries[b"x y"].metadata == present(b"a\tb", 1)
    hex_only = parse_inventory(GOOD, source=SOURCE).log_dirs[0].entries
    plain_t0 = entries[b"t-0"]
    assert [(e.metadata, e.epoch_checkpoint) for e in hex_only if e.name == "t-0"] == [
        (plain_t0.metadata, plain_t0.epoch_checkpoint)
    ]


def plain_replace(old: str, new: str) -> str:
    assert old in PLAIN_GOOD
    return PLAIN_GOOD.replace(old, new, 1)


PLAIN_MALFORMED = [
    ("too-few-inline", plain_replace("present 2 2 0\t", "present 3 3 0\t"), 3, "3 content line"),
    ("too-many-inline", plain_replace("present 1 1 0\t", "present 0 1 0\t"), 5, "0 content line"),
    ("inline-not-text", plain_replace("version: 0", "version:\x7f0"), 3, "plain text"),
    (
        "content-on-unreadable",
        plain_replace("unreadable directory", "unreadable directory\tx"),
        8,
        "no content",
    ),
    ("dot-plain-name", plain_replace("d 0 u.v_w-1", "d 0 .."), 6, "not '.'"),
    ("space-in-plain", plain_replace("d 0 u.v_w-1", "d 0 u v"), 6, "plain name"),
    ("slash-in-plain", plain_replace("d 0 u.v_w-1", "d 0 u/v"), 6, "plain name"),
    ("plain-duplicate", plain_replace("d 0 u.v_w-1", "d 0 t-0"), 6, "once"),
    ("hex-in-plain-D", plain_replace("d 0 t-0", f"D 0 {hexs(b't-0')}\nd 0 t-0"), 5, "once"),
    (
        "tab-on-hex-record",
        plain_replace("metadata present 1 1 0", "metadata present 1 1 0\tT"),
        10,
        "metadata|epoch",
    ),
]


@pytest.mark.parametrize(
    ("output", "line", "fragment"),
    [m[1:] for m in PLAIN_MALFORMED],
    ids=[m[0] for m in PLAIN_MALFORMED],
)
def test_parse_malformed_plain_records(output: str, line: int, fragment: str) -> None:
    with pytest.raises(FormatError) as info:
        parse_inventory(output, source=SOURCE)
    assert info.value.field == f"line {line}"
    assert fragment in str(info.value)


def test_parse_handcrafted() -> None:
    result = parse_inventory(GOOD, source=SOURCE)
    assert result.awk_keeps_nul
    data, gone = result.log_dirs
    assert (data.path, data.state, gone) == ("/data", "present", LogDirInfo("/gone", "missing", ()))
    foo, t0 = data.entries
    assert foo.metadata == unreadable("symlink")
    assert foo.epoch_checkpoint == ABSENT
    assert t0.metadata == KAFKA_METADATA
    assert t0.epoch_checkpoint == present(b"", 1)
    assert parse_inventory(GOOD.rstrip("\n"), source=SOURCE) == result


def replace(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


MALFORMED = [
    ("empty", "", 1, "header"),
    ("other-tool", "hello\n", 1, "header"),
    ("future-version", replace(HEADER, "remediate-inventory 3 awk-nul=1"), 1, "format version"),
    ("unknown-record", replace(LD, LD + "\nQ 0 00"), 3, "a record"),
    ("blank-line", replace(LD, LD + "\n"), 3, "a record"),
    ("odd-hex", replace(f"D 0 {hexs(b'foo')}", "D 0 666f6"), 9, "hex name"),
    ("uppercase-hex", replace(f"D 0 {hexs(b'foo')}", "D 0 666F6F"), 9, "hex name"),
    ("non-hex", replace(f"D 0 {hexs(b'foo')}", "D 0 zz"), 9, "hex name"),
    ("awk-missing-table", replace(f"D 0 {hexs(b'foo')}", "D 0 66??"), 9, "hex name"),
    ("empty-name", replace(f"D 0 {hexs(b'foo')}", "D 0 "), 9, "hex name"),
    ("slash-in-name", replace(f"D 0 {hexs(b'foo')}", f"D 0 {hexs(b'a/b')}"), 9, "no '/'"),
    ("dot-name", replace(f"D 0 {hexs(b'foo')}", f"D 0 {hexs(b'.')}"), 9, "not '.'"),
    ("nul-name", replace(f"D 0 {hexs(b'foo')}", "D 0 6100"), 9, "no NUL"),
    ("duplicate-dir", replace(f"D 0 {hexs(b'foo')}", f"D 0 {hexs(b't-0')}"), 9, "once"),
    ("duplicate-file", replace("epoch present 1 1 0", "metadata present 1 1 0"), 7, "second"),
    ("file-without-dir", replace(f"D 0 {hexs(b'foo')}\n", ""), 10, "listed"),
    ("wrong-index", replace(f"D 0 {hexs(b'foo')}", f"D 1 {hexs(b'foo')}"), 9, "log dir 0"),
    ("record-before-any-log-dir", replace(LD, f"D 0 {hexs(b'x')}\n{LD}"), 2, "after 'L"),
    ("record-for-a-missing-dir", replace("end 2", f"D 1 {hexs(b'x')}\nend 2"), 13, "after 'L"),
    ("log-dir-skipped", replace("L 1 ", "L 2 "), 12, "log dir 1"),
    ("no-Z", replace("Z 0 0\n", ""), 11, "'Z 0"),
    ("no-Z-at-end", replace("Z 0 0\nL 1 2f676f6e65 missing\n", ""), 11, "'Z 0"),
    ("bad-state", replace(" missing", " gone"), 12, "<state>"),
    ("too-few-lines", replace("metadata present 2 2 0", "metadata present 3 3 0"), 6, "T"),
    ("stray-content-line", replace("Z 0 0", "T 00\nZ 0 0"), 11, "content line"),
    ("count-below-shown", replace("metadata present 2 2 0", "metadata present 2 1 0"), 3, "total"),
    ("unknown-total", replace("metadata present 2 2 0", "metadata present 2 - 0"), 3, "total"),
    ("huge-number", replace("Z 0 0", "Z 0 " + "9" * 5000), 11, "status"),
    ("bad-reason", replace("unreadable symlink", "unreadable maybe"), 10, "metadata|epoch"),
    ("wrong-count", replace("end 2", "end 3"), 13, "end 2"),
    ("after-trailer", GOOD + "L 2 00 missing\n", 14, "nothing after"),
    ("crlf", GOOD.replace("\n", "\r\n"), 1, "header"),
    ("non-ascii", replace("end 2", "end ２"), 13, "end <count>"),
]


@pytest.mark.parametrize(
    ("output", "line", "fragment"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_parse_malformed(output: str, line: int, fragment: str) -> None:
    with pytest.raises(FormatError) as info:
        parse_inventory(output, source=SOURCE)
    assert info.value.source == SOURCE
    assert info.value.field == f"line {line}"
    assert str(info.value).startswith(f"{SOURCE}: line {line}: expected ")
    assert fragment in str(info.value)


def test_truncated_outputs_are_detected(tool_env: dict[str, str], tmp_path: Path) -> None:
    for case in CASES[:6]:
        make_partition(tmp_path, case.name, case.files)
    output = run(inventory_command([str(tmp_path), str(tmp_path / "missing")]), env=tool_env)
    lines = output.splitlines(keepends=True)
    assert len(lines) > 10
    for drop in range(1, len(lines)):
        with pytest.raises(FormatError, match="trailer") as info:
            parse_inventory("".join(lines[:-drop]), source=SOURCE)
        assert info.value.source == SOURCE
        assert info.value.field == f"line {len(lines) - drop + 1}"


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_parser_on_any_text(text: str) -> None:
    message = f"{SOURCE}: line "
    try:
        parse_inventory(text, source=SOURCE)
    except FormatError as exc:
        message = str(exc)
    assert message.startswith(f"{SOURCE}: line ")


Edit = tuple[str, int, int, str]


def mutated(document: str, edits: list[Edit]) -> str:
    """`document` with each of its lines edited: dropped, duplicated, swapped with another,
    split in two, or a character of it replaced (`poke`)."""
    lines = document.split("\n")
    for op, i, j, char in edits:
        i, j = i % len(lines), j % len(lines)
        if op == "drop":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "split" and lines[i]:
            k = j % len(lines[i])
            lines[i : i + 1] = [lines[i][:k], lines[i][k:]]
        elif lines[i]:
            k = j % len(lines[i])
            lines[i] = lines[i][:k] + char + lines[i][k + 1 :]
        if not lines:
            lines.append("")
    return "\n".join(lines)


@settings(max_examples=300, deadline=None)
@given(
    document=st.sampled_from([GOOD, PLAIN_GOOD]),
    edits=st.lists(
        st.tuples(
            st.sampled_from(["drop", "duplicate", "swap", "poke"]),
            st.integers(0, 100),
            st.integers(0, 100),
            st.characters(codec="ascii"),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_parser_on_mutated_output(document: str, edits: list[tuple[str, int, int, str]]) -> None:
    try:
        result = parse_inventory(mutated(document, edits), source=SOURCE)
    except FormatError as exc:
        message = str(exc)
    else:
        message = f"{SOURCE}: line "
        for info in result.log_dirs:
            for entry in info.entries:
                classify_metadata(entry)
    assert message.startswith(f"{SOURCE}: line ")


# -- classification on its own -----------------------------------------------------------------


def entry_with(metadata: FileState, name: str = "t-0") -> DirEntry:
    return DirEntry("/data", name, None, None, metadata, ABSENT)


@pytest.mark.parametrize(
    ("metadata", "state", "topic_id", "problem"),
    [
        (KAFKA_METADATA, "ok", TOPIC_ID, None),
        (present(f"version: 0\ntopic_id: {TOPIC_ID}==\nextra".encode(), 3), "ok", TOPIC_ID, None),
        (ABSENT, "missing", None, None),
        (unreadable("error"), "unreadable", None, "partition.metadata could not be read (error)"),
        # Cut where the inventory stopped reading: judged on the two lines if they ended there.
        (present(METADATA, None, truncated=True), "corrupt", None, "inventory reads"),
        (present(METADATA + b"\njunk", None, truncated=True), "ok", TOPIC_ID, None),
        (present(b"\xff\xfe", 1), "corrupt", None, "UTF-8"),
        (present(b"version:0\ntopic_id: x", 2), "corrupt", None, "version"),
        (present(b"", 0), "corrupt", None, "/data/t-0/partition.metadata: version"),
    ],
)
def test_classify_metadata(
    metadata: FileState, state: str, topic_id: str | None, problem: str | None
) -> None:
    finding = classify_metadata(entry_with(metadata))
    assert (finding.state, finding.topic_id) == (state, topic_id)
    if problem is None:
        assert finding.problem is None
    else:
        assert finding.problem is not None and problem in finding.problem


def test_classify_metadata_names_hostile_paths_printably() -> None:
    finding = classify_metadata(entry_with(present(b"", 0), name="a\nb\udcff"))
    assert finding.problem is not None
    assert "\n" not in finding.problem
    assert finding.problem.isprintable()


@pytest.mark.fault(
    "Bad input",
    "partition.metadata with any content, truncated or binary (fuzzed)",
    "Classified by Kafka's own acceptance rules (METADATA_CORRUPT with the reason), never a crash",
)
@settings(max_examples=200, deadline=None)
@given(content=st.binary(max_size=200), truncated=st.booleans())
def test_classify_any_content(content: bytes, truncated: bool) -> None:
    finding = classify_metadata(entry_with(present(content, 1, truncated=truncated)))
    assert finding.state in ("ok", "corrupt")
    assert (finding.topic_id is None) == (finding.state == "corrupt")


def test_the_command_prefers_mawk_and_can_be_pinned(tmp_path: Path) -> None:
    awk = shutil.which("awk")
    assert awk is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    used = tmp_path / "mawk-was-used"
    wrapper = bin_dir / "mawk"
    wrapper.write_text(f'#!/bin/sh\n: > {shlex.quote(str(used))}\nexec {shlex.quote(awk)} "$@"\n')
    wrapper.chmod(0o755)
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    make_partition(log_dir, b"t-0", {"partition.metadata": METADATA})
    env = {k: v for k, v in os.environ.items() if k != "REMEDIATE_AWK"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    assert parse_inventory(run(inventory_command([str(log_dir)]), env=env), source="t").log_dirs
    assert used.exists()
    used.unlink()
    pinned = {**env, "REMEDIATE_AWK": "awk"}
    assert parse_inventory(run(inventory_command([str(log_dir)]), env=pinned), source="t").log_dirs
    assert not used.exists()
