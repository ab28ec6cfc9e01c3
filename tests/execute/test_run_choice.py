"""Which run a command is about: the one named, else the latest; refused when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from remediate.errors import RefusedError
from remediate.execute.journal import Journal, new_run_id, run_or_latest


def test_the_named_run_else_the_latest(tmp_path: Path) -> None:
    older = new_run_id(1_700_000_000.0, entropy="aaaaaa")
    newer = new_run_id(1_700_000_060.0, entropy="bbbbbb")
    for run_id in (newer, older):
        Journal.create(tmp_path, run_id, {"digest": "d"}, now=0.0)
    assert run_or_latest(tmp_path, None) == newer
    assert run_or_latest(tmp_path, older) == older


def test_no_run_at_all_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RefusedError, match="no run in"):
        run_or_latest(tmp_path / "journal", None)
