"""The inventory's readers on recorded command output (tests/collect/data/inventory/): each
recording's output in, its records (the parser) and its snapshot rows (bulk reader and
general path) out, as the table says. The command is then run again on each scenario's tree
(tests/collect/inventory_recordings.py): it must still print the recorded lines."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from remediate.collect.inventory import parse_inventory, replica_rows
from remediate.collect.inventory.bulk import read_rows
from tests.collect.inventory_recordings import (
    DATA,
    SCENARIOS,
    SOURCE,
    Scenario,
    inventory_json,
    rows_json,
    run_scenario,
)

RECORDINGS = sorted(DATA.glob("*.json"))


def load(path: Path) -> tuple[str, dict[str, Any]]:
    """A recording's output as the command printed it, and the recording."""
    recorded = json.loads(path.read_text())
    return "".join(f"{line}\n" for line in recorded["output"]), recorded


def test_every_scenario_has_its_recording() -> None:
    assert [path.stem for path in RECORDINGS] == sorted(s.name for s in SCENARIOS)


@pytest.mark.parametrize("path", RECORDINGS, ids=[path.stem for path in RECORDINGS])
def test_the_parser_reads_the_recorded_records(path: Path) -> None:
    output, recorded = load(path)
    assert inventory_json(parse_inventory(output, source=SOURCE)) == recorded["records"]


@pytest.mark.parametrize("path", RECORDINGS, ids=[path.stem for path in RECORDINGS])
def test_both_readers_give_the_recorded_rows(path: Path) -> None:
    output, recorded = load(path)
    assert rows_json(output) == recorded["rows"]
    log_dirs, replicas = replica_rows(parse_inventory(output, source=SOURCE))
    general = {"log_dirs": log_dirs, "replicas": [row.to_json() for row in replicas]}
    assert general == recorded["rows"]
    bulk = read_rows(output)
    if bulk is not None:  # the bulk reader leaves uncommon outputs to the parser
        assert {"log_dirs": bulk[0], "replicas": [row.to_json() for row in bulk[1]]} == general


def test_the_common_recording_is_read_in_bulk() -> None:
    output, _ = load(DATA / "kafka-log-dir.json")
    assert read_rows(output) is not None


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_command_still_prints_the_recorded_lines(scenario: Scenario, tmp_path: Path) -> None:
    """The same lines (find may list a log dir's entries in another order), and so the same
    records; only the header's awk-nul flag belongs to the machine's awk."""
    header, *lines = run_scenario(scenario, tmp_path).split("\n")[:-1]
    recorded_header, *recorded_lines = json.loads((DATA / f"{scenario.name}.json").read_text())[
        "output"
    ]
    assert header.rsplit("=", 1)[0] == recorded_header.rsplit("=", 1)[0]
    assert Counter(lines) == Counter(recorded_lines)
