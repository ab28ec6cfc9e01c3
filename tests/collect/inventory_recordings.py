"""Recorded broker inventories: the trees they were recorded on, and how to record them again.

Each scenario builds a directory tree, runs the real inventory command on it (`/bin/sh`, the
machine's find and awk) and keeps what it printed, with the records the parser makes of it and
the snapshot rows, in tests/collect/data/inventory/<name>.json. test_inventory_recorded.py reads
those files: recorded output in, expected records out. It also runs every scenario again and
holds the recording to what the command prints today.

Record them again after a change of the command or the format, and read the diff:

    .venv/bin/python -m tests.collect.inventory_recordings
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remediate.collect.inventory import (
    FileState,
    Inventory,
    inventory_command,
    inventory_rows,
    parse_inventory,
)
from tests.collect.test_inventory import (
    DANGLING,
    DIRECTORY,
    EPOCHS,
    FIFO,
    LINK_TO_VALID,
    LONG_EPOCHS,
    METADATA,
    UNIQUE,
    make_partition,
    make_root_files,
)

DATA = Path(__file__).parent / "data" / "inventory"
SOURCE = "broker-1"
# Bytes are kept as latin-1 text: every byte is one character, exact and reversible, and the
# common (ASCII) content stays readable.
BYTES_AS = "latin-1"
OTHER_ID = "_____________________w"
MISMATCH_28 = (
    "[2026-11-22 03:15:00,123] ERROR [Broker id=1] Topic Id in memory: J4HMUnGPS7KPVIjY6FgUvg"
    f" does not match the topic Id for partition orders-0 provided in the request: {OTHER_ID}."
    " (state.change.logger)"
)
MISMATCH_34 = (
    "[2026-11-22 03:16:00,456] ERROR [Broker id=1] Topic ID in memory: J4HMUnGPS7KPVIjY6FgUvg"
    f" does not match the topic ID for partition orders-1 received: {OTHER_ID}."
    " (state.change.logger)"
)


@dataclass(frozen=True)
class Scenario:
    """A tree under a fresh directory, and the command's arguments, relative to it (so the
    output does not depend on where the tree was built)."""

    name: str
    description: str
    build: Callable[[Path], None]
    log_dirs: tuple[str, ...]
    state_change_log: str | None = None
    options: dict[str, int] = field(default_factory=dict)


def _kafka_log_dir(root: Path) -> None:
    data = root / "data"
    data.mkdir()
    make_root_files(data)
    for name in (b"orders-0", b"orders-1", b"__consumer_offsets-49"):
        make_partition(
            data, name, {"partition.metadata": METADATA, "leader-epoch-checkpoint": EPOCHS}
        )
    make_partition(data, b"orders-2", {"leader-epoch-checkpoint": EPOCHS})  # no file yet
    make_partition(data, f"orders-3.{UNIQUE}-delete".encode(), {"partition.metadata": METADATA})
    make_partition(data, f"orders-4.{UNIQUE}-future".encode(), {})
    (root / "not-a-dir").write_bytes(b"a file where a log dir should be")
    log = root / "state-change.log"
    log.write_text(f"[2026-11-22 03:14:00,000] TRACE unrelated\n{MISMATCH_28}\n{MISMATCH_34}\n")


def _hostile_log_dir(root: Path) -> None:
    data = root / "data"
    data.mkdir()
    make_partition(data, b"sp ace-0", {"partition.metadata": METADATA})
    make_partition(data, b"new\nline-0", {"partition.metadata": METADATA})
    make_partition(data, b"t\xff-0", {"partition.metadata": METADATA})
    make_partition(data, b"crlf-0", {"partition.metadata": METADATA.replace(b"\n", b"\r\n")})
    make_partition(data, b"binary-0", {"partition.metadata": b"\xff\xfe\x80version: 0\x7f"})
    make_partition(data, b"empty-0", {"partition.metadata": b"", "leader-epoch-checkpoint": b""})
    make_partition(data, b"dir-0", {"partition.metadata": DIRECTORY})
    make_partition(data, b"dangling-0", {"partition.metadata": DANGLING})
    make_partition(data, b"linked-0", {"leader-epoch-checkpoint": LINK_TO_VALID})
    make_partition(data, b"fifo-0", {"partition.metadata": FIFO})
    make_partition(data, b"long-epochs-0", {"leader-epoch-checkpoint": LONG_EPOCHS})
    make_partition(data, b"lost+found", {})
    (root / "state-change.log").mkdir()  # not a regular file: "unreadable"


def _limits(root: Path) -> None:
    data = root / "data"
    data.mkdir()
    make_partition(
        data, b"t-0", {"partition.metadata": METADATA, "leader-epoch-checkpoint": LONG_EPOCHS}
    )
    make_partition(data, b"t-1", {"leader-epoch-checkpoint": b"0\n" + b"9" * 50 + b"\n"})
    lines = [f"[2026-11-22 03:{m:02d}:00,000] TRACE filler line {m}" for m in range(40)]
    (root / "state-change.log").write_text("\n".join([*lines, MISMATCH_28, MISMATCH_34]) + "\n")


def _nothing(root: Path) -> None:
    del root


SCENARIOS = [
    Scenario(
        "kafka-log-dir",
        "A Kafka log dir (plain records only), a missing log dir, a file given as a log dir,"
        " and a state-change log with one 2.8 and one 3.x mismatch line.",
        _kafka_log_dir,
        ("data", "gone", "not-a-dir"),
        state_change_log="state-change.log",
    ),
    Scenario(
        "hostile-log-dir",
        "Names that are not plain (hex records), contents that are not plain text, files that"
        " are not regular, truncated files, and a state-change log that is a directory.",
        _hostile_log_dir,
        ("data",),
        state_change_log="state-change.log",
    ),
    Scenario(
        "limits",
        "Small bounds: 15 bytes of content, no epoch tail lines, the last 200 bytes of the"
        " state-change log (cut: its first line dropped).",
        _limits,
        ("data",),
        state_change_log="state-change.log",
        options={"max_content_bytes": 15, "epoch_tail_lines": 0, "state_change_tail_bytes": 200},
    ),
    Scenario(
        "no-log-dirs",
        "No log dir at all, and a state-change log that does not exist.",
        _nothing,
        (),
        state_change_log="missing.log",
    ),
]


def command(scenario: Scenario) -> str:
    return inventory_command(
        list(scenario.log_dirs), state_change_log=scenario.state_change_log, **scenario.options
    )


def run_scenario(scenario: Scenario, root: Path, env: dict[str, str] | None = None) -> str:
    """Build the scenario's tree in `root` (empty) and run the command there; its stdout."""
    scenario.build(root)
    proc = subprocess.run(
        command(scenario),
        shell=True,
        executable="/bin/sh",
        capture_output=True,
        cwd=root,
        env=env,
        timeout=60,
        check=True,
    )
    return proc.stdout.decode("ascii")


def as_text(data: bytes | None) -> str | None:
    return None if data is None else data.decode(BYTES_AS)


def file_json(state: FileState) -> dict[str, Any]:
    return {
        "state": state.state,
        "content": as_text(state.content),
        "truncated": state.truncated,
        "line_count": state.line_count,
        "reason": state.reason,
    }


def inventory_json(inventory: Inventory) -> dict[str, Any]:
    """The parser's records as JSON: names as `os.fsdecode` gives them, bytes as latin-1."""
    tail = inventory.state_change
    return {
        "awk_keeps_nul": inventory.awk_keeps_nul,
        "log_dirs": [
            {
                "path": info.path,
                "state": info.state,
                "entries": [
                    {
                        "log_dir": entry.log_dir,
                        "name": entry.name,
                        "partition": None
                        if entry.partition is None
                        else {
                            "topic": entry.partition.topic,
                            "partition": entry.partition.partition,
                            "kind": entry.partition.kind,
                        },
                        "name_problem": entry.name_problem,
                        "metadata": file_json(entry.metadata),
                        "epoch_checkpoint": file_json(entry.epoch_checkpoint),
                    }
                    for entry in info.entries
                ],
            }
            for info in inventory.log_dirs
        ],
        "state_change": None
        if tail is None
        else {
            "state": tail.state,
            "lines": [as_text(line) for line in tail.lines],
            "tail_status": tail.tail_status,
            "cut": tail.cut,
        },
    }


def rows_json(output: str) -> dict[str, Any]:
    """The snapshot rows `inventory_rows` makes of an output (replicas.jsonl's contract)."""
    log_dirs, replicas, _tail = inventory_rows(output, source=SOURCE)
    return {"log_dirs": log_dirs, "replicas": [row.to_json() for row in replicas]}


def recording(scenario: Scenario, output: str) -> dict[str, Any]:
    return {
        "description": scenario.description,
        "recorded_with": (
            f"tests/collect/inventory_recordings.py: inventory_command({list(scenario.log_dirs)!r},"
            f" state_change_log={scenario.state_change_log!r}, **{scenario.options!r}),"
            f" run by /bin/sh in the scenario's tree on {platform.system()}"
            f" ({os.environ.get('REMEDIATE_AWK') or shutil.which('mawk') or shutil.which('awk')})"
        ),
        "bytes_as": BYTES_AS,
        "output": output.split("\n")[:-1],
        "records": inventory_json(parse_inventory(output, source=SOURCE)),
        "rows": rows_json(output),
    }


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS:
        with tempfile.TemporaryDirectory(prefix="inventory-recording-") as tmp:
            output = run_scenario(scenario, Path(tmp))
        path = DATA / f"{scenario.name}.json"
        path.write_text(json.dumps(recording(scenario, output), indent=1) + "\n")
        print(f"recorded {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
