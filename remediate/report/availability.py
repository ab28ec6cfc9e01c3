"""Per partition, the unavailable phases the plan predicted against those the run observed.
Pure.

Phases are named as the plan names them: "step N" (while step N ran), "after step N" (once it
had finished, until the next step started) and "before" (before the first step). Predicted
phases come from each step's `predicted` in plan.json; observed ones from the health samples
the executor journals, each placed in the phase its time falls in. Journals and plans older
than these fields give no rows: the section is then left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from remediate.execute.journal import STEP_EVENTS, JournalEvent
from remediate.execute.steps import RunAction, StepKey

BEFORE = "before"


@dataclass(frozen=True)
class PartitionAvailability:
    partition: str
    predicted: tuple[str, ...]
    observed: tuple[str, ...]

    @property
    def unpredicted(self) -> tuple[str, ...]:
        """Observed phases the plan did not name. A partition predicted unavailable while
        step N runs may take a moment after it to recover ("after step N" is allowed too), one
        predicted unavailable after step N became so while it ran, and one unavailable before
        the run stays so until the last phase the plan names for it."""
        allowed = (
            set(self.predicted)
            | {f"after {p}" for p in self.predicted if p.startswith("step ")}
            | {p.removeprefix("after ") for p in self.predicted if p.startswith("after ")}
        )
        last = max((phase_order(p) for p in self.predicted), default=(0, 0))
        broken_before = BEFORE in self.predicted
        return tuple(
            p
            for p in self.observed
            if p != BEFORE and p not in allowed and not (broken_before and phase_order(p) <= last)
        )


def phase_order(phase: str) -> tuple[int, int]:
    """ "before" < "step 1" < "after step 1" < "step 2" ..."""
    after = phase.startswith("after ")
    number = phase.rsplit(" ", 1)[-1]
    return (int(number) if number.isdigit() else 0, 1 if after else 0)


@dataclass(frozen=True)
class Window:
    number: int  # 1-based, as the plan's phases count
    start: int  # positions in the journal (timestamps can tie; the order cannot)
    end: int


def predicted_phases(plan: Mapping[str, Any]) -> dict[str, list[str]]:
    """Partition -> the phases the plan predicts it unavailable in, in step order."""
    found: dict[str, list[str]] = {}
    steps = plan.get("steps")
    for number, step in enumerate(steps if isinstance(steps, list) else [], start=1):
        predicted = step.get("predicted") if isinstance(step, Mapping) else None
        if not isinstance(predicted, Mapping):
            continue
        during = set(_names(predicted.get("during"))) | set(_names(predicted.get("last_in_isr")))
        for name in sorted(during):
            _add(found, name, f"step {number}")
        for name in _names(predicted.get("after")):
            _add(found, name, f"after step {number}")
    for name in _names(plan.get("unavailable_now")):
        found.setdefault(name, []).insert(0, BEFORE)
    return found


def step_windows(records: Iterable[Mapping[str, Any]]) -> list[Window]:
    """When each plan step ran: from its first action's start to its last action's end, as
    positions in the journal."""
    spans: dict[int, list[int]] = {}
    for position, record in enumerate(records):
        if record.get("event") not in STEP_EVENTS:
            continue
        try:
            key = StepKey.parse(str(record.get("step", "")))
        except ValueError:
            continue
        # The run's closing convergence wait is no plan step (the moves' and the trigger's
        # actions are: their target is the cluster too).
        if key.index is None or key.rollback or key.action == RunAction.CONVERGE:
            continue
        span = spans.setdefault(key.index, [position, position])
        span[1] = position
    return sorted((Window(i + 1, s, e) for i, (s, e) in spans.items()), key=lambda w: w.start)


def phase_at(windows: Sequence[Window], position: int) -> str:
    """The phase the record at `position` falls in."""
    current = BEFORE
    for window in windows:
        if window.start <= position <= window.end:
            return f"step {window.number}"
        if window.end < position:
            current = f"after step {window.number}"
    return current


def observed_phases(records: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Partition -> the phases a health sample saw it offline or under min ISR in."""
    windows = step_windows(records)
    found: dict[str, list[str]] = {}
    for position, record in enumerate(records):
        if record.get("event") != JournalEvent.SAMPLE:
            continue
        names = _names(record.get("offline_partitions")) + _names(
            record.get("below_min_isr_partitions")
        )
        if not names:
            continue
        phase = phase_at(windows, position)
        for name in sorted(set(names)):
            _add(found, name, phase)
    return found


def availability(
    records: Sequence[Mapping[str, Any]], plan: Mapping[str, Any]
) -> tuple[PartitionAvailability, ...]:
    predicted = predicted_phases(plan)
    observed = observed_phases(records)
    return tuple(
        PartitionAvailability(name, tuple(predicted.get(name, ())), tuple(observed.get(name, ())))
        for name in sorted(set(predicted) | set(observed))
    )


def _add(found: dict[str, list[str]], name: str, phase: str) -> None:
    phases = found.setdefault(name, [])
    if phase not in phases:
        phases.append(phase)


def _names(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []
