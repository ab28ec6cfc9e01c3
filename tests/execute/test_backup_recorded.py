"""The backup scripts' answers parsed from recorded output (tests/execute/data/backup/, made by
tests/execute/backup_recordings.py from real runs): each recording's stdout in, the answer
parse.py gives out, as the table says. test_backup.py runs the scripts themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.execute.backup_recordings import ANSWERS, DATA, answer_json

RECORDINGS = sorted(DATA.glob("*.json"))


def test_every_script_has_recorded_answers() -> None:
    assert {json.loads(path.read_text())["script"] for path in RECORDINGS} == set(ANSWERS)


@pytest.mark.parametrize("path", RECORDINGS, ids=[path.stem for path in RECORDINGS])
def test_a_recorded_answer_parses_as_recorded(path: Path) -> None:
    recorded = json.loads(path.read_text())
    stdout = "".join(f"{line}\n" for line in recorded["stdout"])
    parsed = answer_json(recorded["script"], stdout)
    assert parsed == recorded["expected"]
    # A script that stopped at a step (X) exits 1 without END; one that finished exits 0.
    assert (recorded["exit_code"] == 0) == parsed["complete"] == (parsed["failed"] is None)
