"""How long a plan will take (remediate/plan/estimate.py): restarts as earlier runs' journals
show them, a batch as long as its slowest broker, and the report's comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from remediate.plan.estimate import (
    ObservedRestarts,
    estimate_s,
    observed_restarts,
    restart_durations,
)
from remediate.workflows import past_restarts


def record(event: str, ts: float, step: str | None = None) -> dict[str, Any]:
    return {"event": event, "ts": ts, **({"step": step} if step else {})}


def run(*restarts: tuple[int, float, float], end: str = "run-completed") -> list[dict[str, Any]]:
    """A run's records: each (broker, stopped at, in sync at), then `end`."""
    records = [record("run-started", 0.0)]
    for index, (broker, stopped, in_sync) in enumerate(restarts):
        key = f"{index}:broker-{broker}"
        records += [
            record("step-started", stopped - 1, f"{key}:gate restart-safety"),
            record("step-started", stopped, f"{key}:stop"),
            record("step-finished", stopped + 3, f"{key}:stop"),
            record("step-started", in_sync - 20, f"{key}:wait in-sync"),
            record("step-finished", in_sync, f"{key}:wait in-sync"),
        ]
    records.append(record(end, 999.0))
    return [{**r, "seq": seq} for seq, r in enumerate(records, 1)]


def test_a_restart_lasts_from_its_stop_to_its_broker_back_in_sync() -> None:
    assert restart_durations(run((1, 10, 52), (3, 60, 90))) == {1: 42.0, 3: 30.0}


@pytest.mark.parametrize("end", ["run-halted", "run-resumed"])
def test_a_run_that_halted_or_resumed_says_nothing_of_restart_times(end: str) -> None:
    records = run((1, 10, 52))
    records.insert(3, {**record(end, 20.0), "seq": 0})
    assert restart_durations(records) == {}
    assert restart_durations(run((1, 10, 52), end="run-halted")) == {}


def test_the_median_of_each_brokers_last_runs() -> None:
    journals = [run((1, 0, 100))] + [run((1, 0, 40), (2, 0, 20)) for _ in range(5)]
    found = observed_restarts(journals)
    assert found == ObservedRestarts({1: 40.0, 2: 20.0}, runs=6)
    assert observed_restarts([run((1, 0, 30)), run((1, 0, 50))]).seconds == {1: 40.0}


def test_a_batch_takes_as_long_as_its_slowest_broker() -> None:
    seen = ObservedRestarts({1: 40.0, 2: 25.0, 3: 90.0}, runs=2)
    batches = [(1, 2), (4,), (3,)]
    assert estimate_s(batches, restart_s=70, restores=0, restore_s=15, observed=seen) == 200.0
    assert estimate_s(batches, restart_s=70, restores=2, restore_s=15) == 240.0
    note = seen.note(70)
    assert note is not None and "2 run(s)" in note and "25 to 90 s" in note and "70 s" in note
    assert ObservedRestarts().note(70) is None


def test_the_journal_dir_of_earlier_runs(tmp_path: Path) -> None:
    for name, records in (
        ("20261101T000000Z-aaaaaa", run((1, 0, 30))),
        ("20261102T000000Z-bbbbbb", run((1, 0, 50), (2, 0, 10))),
        ("20261103T000000Z-cccccc", run((1, 0, 999), end="run-halted")),
    ):
        (tmp_path / name).mkdir()
        lines = "".join(json.dumps(r) + "\n" for r in records)
        (tmp_path / name / "journal.jsonl").write_text(lines + '{"torn')
    assert past_restarts(tmp_path) == ObservedRestarts({1: 40.0, 2: 10.0}, runs=2)
    assert past_restarts(tmp_path / "none") == ObservedRestarts()
