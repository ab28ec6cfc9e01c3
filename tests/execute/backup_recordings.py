"""Recorded answers of the backup scripts, and how to record them again.

One session on a tree of broker files: back up (a new archive, a refused file, an existing
archive), read the backup back (whole, and with its archive gone), delete (refused for a
changed file, refused for a changed archive, done), restore. Each script of
remediate/execute/backup/scripts.py runs for real under /bin/sh, and what it printed is kept
with what parse.py makes of it in tests/execute/data/backup/<step>.json.
test_backup_recorded.py reads those files: recorded output in, expected answer out.

Record them again after a change of a script or of the parsing, and read the diff (the
archive's digest changes with every recording: tar keeps the files' times):

    .venv/bin/python -m tests.execute.backup_recordings
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from remediate.execute.backup import Backup, BackupEntry
from remediate.execute.backup.parse import (
    ScriptOutput,
    parse_backup_answer,
    parse_delete_answer,
    parse_manifest,
    parse_output,
    parse_read_back,
)
from remediate.execute.backup.scripts import (
    backup_script,
    delete_script,
    read_back_script,
    restore_script,
    shell_command,
)

DATA = Path(__file__).parent / "data" / "backup"
# A fixed place, so that a new recording differs from the last only where the scripts do.
ROOT = Path("/tmp/remediate-backup-recording")
BYTES_AS = "latin-1"  # every byte one character: exact, and readable where it is ASCII
LABEL = "run-20261122T031500Z-ab12-broker-2"
# The names a broker's disk could hold that sha256sum and tar print escaped.
FILES = {
    "kafka-logs/orders-0/partition.metadata": b"version: 0\ntopic_id: J4HMUnGPS7KPVIjY6FgUvg",
    "kafka-logs/new\nline-0/partition.metadata": b"version: 0\ntopic_id: _____________________w",
    "kafka-logs/back\\slash-0/leader-epoch-checkpoint": b"0\n1\n0 0\n",
    "kafka-logs/\u00e9t\u00e9-0/partition.metadata": b"",
}
MISSING = "kafka-logs/orders-9/partition.metadata"


def _jsonable(value: Any) -> Any:
    """An answer as JSON: dataclasses as objects, bytes as latin-1 text, int keys as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return value.decode(BYTES_AS)
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_jsonable(item) for item in value]
    return value


def _read_back_answer(out: ScriptOutput) -> dict[str, Any]:
    answer = parse_read_back(out)
    return {**_jsonable(answer), "manifest_pairs": _jsonable(parse_manifest(answer.manifest))}


# What each script's answer is made of: the parse the operations use.
ANSWERS: dict[str, Callable[[ScriptOutput], Any]] = {
    "backup": lambda out: _jsonable(parse_backup_answer(out)),
    "read_back": _read_back_answer,
    "delete": lambda out: _jsonable(parse_delete_answer(out)),
    "restore": lambda out: _jsonable(out.digests("S")),
}


def answer_json(script: str, stdout: str) -> dict[str, Any]:
    """What parse.py makes of a script's stdout, as JSON (the table's expected column)."""
    out = parse_output(stdout)
    return {"failed": out.failed, "complete": out.complete, "answer": ANSWERS[script](out)}


def _run(script_text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shell_command(script_text),
        shell=True,
        executable="/bin/sh",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _step(name: str, description: str, script: str, text: str) -> dict[str, Any]:
    done = _run(text)
    return {
        "name": name,
        "description": description,
        "script": script,
        "exit_code": done.returncode,
        "stdout": done.stdout.split("\n")[:-1],
        "expected": answer_json(script, done.stdout),
    }


def record_session(root: Path) -> list[dict[str, Any]]:
    """Run the session on a fresh tree in `root`; its steps, recorded."""
    shutil.rmtree(root, ignore_errors=True)
    paths = []
    for name, data in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(str(path))
    files = [*paths, str(root / MISSING)]
    rels = [path[1:] for path in paths]
    directory = f"{root}/backups/{LABEL}"
    archive, manifest = f"{directory}/{LABEL}.tar.gz", f"{directory}/{LABEL}.sha256"
    steps = []

    refused = str(root / "kafka-logs/orders-0")  # a directory where a file should be
    steps.append(
        _step(
            "backup-refused",
            "A backup request naming a directory: O for it, then X files; nothing is written.",
            "backup",
            backup_script(
                f"{root}/refused", f"{root}/refused/a.tar.gz", f"{root}/refused/a.sha256", [refused]
            ),
        )
    )
    steps.append(
        _step(
            "backup-new",
            "A new backup of four files (names tar and sha256sum escape) and a missing one.",
            "backup",
            backup_script(directory, archive, manifest, files),
        )
    )
    steps.append(
        _step(
            "backup-exists",
            "The same request again (a resumed run): E, and the files as they are now.",
            "backup",
            backup_script(directory, archive, manifest, files),
        )
    )
    steps.append(
        _step(
            "read-back",
            "The backup read back: kinds, modes, digest, manifest, tar's listing, members.",
            "read_back",
            read_back_script(archive, manifest, rels),
        )
    )
    answer = parse_backup_answer(
        parse_output(_run(backup_script(directory, archive, manifest, files)).stdout)
    )
    read_back = parse_read_back(
        parse_output(_run(read_back_script(archive, manifest, rels)).stdout)
    )
    backup = Backup(
        archive,
        manifest,
        read_back.archive_sha256,
        tuple(
            BackupEntry(paths[i], sha, size) for i, (size, sha) in sorted(answer.present.items())
        ),
    )
    pairs = [(entry.sha256, entry.path) for entry in backup.entries]

    first = Path(paths[0])
    first.write_bytes(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    steps.append(
        _step(
            "delete-changed-file",
            "A delete after the first file changed: C with its digest now, then X files.",
            "delete",
            delete_script(archive, backup.archive_sha256, pairs),
        )
    )
    first.write_bytes(FILES["kafka-logs/orders-0/partition.metadata"])
    steps.append(
        _step(
            "delete-changed-archive",
            "A delete against another archive digest: X archive before any file is read.",
            "delete",
            delete_script(archive, "0" * 64, pairs),
        )
    )
    steps.append(
        _step(
            "delete",
            "The delete: D for each file removed.",
            "delete",
            delete_script(archive, backup.archive_sha256, pairs),
        )
    )
    steps.append(
        _step(
            "restore",
            "The restore: S with each restored file's size and digest.",
            "restore",
            restore_script(archive, backup.archive_sha256, rels, paths),
        )
    )
    os.unlink(archive)
    steps.append(
        _step(
            "read-back-missing-archive",
            "A read-back with the archive gone: KA missing, KM file, END and nothing else.",
            "read_back",
            read_back_script(archive, manifest, rels),
        )
    )
    return steps


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    try:
        steps = record_session(ROOT)
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)
    for step in steps:
        path = DATA / f"{step.pop('name')}.json"
        step["recorded_with"] = (
            "tests/execute/backup_recordings.py: the script run by /bin/sh on a tree in"
            f" {ROOT} ({shutil.which('tar')}, {shutil.which('sha256sum')})"
        )
        path.write_text(json.dumps(step, indent=1) + "\n")
        print(f"recorded {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
