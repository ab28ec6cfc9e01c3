"""The report model -> what the timeline picture draws: one row per broker (and per restored
topic), spans of what was being done, and the health counts over time. Pure.

Times are seconds since the run's first record, so the picture and the tests need no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from remediate.execute.journal import JournalEvent, RunStatus
from remediate.execute.steps import Decision, RunAction
from remediate.playbook import Action
from remediate.report.model import FAILED, FINISHED, IN_FLIGHT, Attempt, RunReport

# Action name (as in the playbook and the step key) -> the phase the picture shows. Registration
# is part of starting: the broker is not back until ZooKeeper lists it.
PHASES: dict[str, str] = {
    Action.GATE_RESTART_SAFETY: "gate",
    Action.GATE_AGREEMENT: "gate",
    Action.STOP: "stopping",
    Action.BACKUP: "backing up",
    Action.DELETE: "deleting",
    Action.START: "starting",
    Action.WAIT_REGISTERED: "starting",
    Action.WAIT_IN_SYNC: "waiting for ISR",
    Action.VERIFY_TOPIC_IDS: "verifying",
    RunAction.CONVERGE: "waiting for ISR",
    Action.ZK_WRITE_TOPIC_ID: "writing ZooKeeper",
    Action.ZK_WRITE_CONTROLLER_ELECTION: "controller election",
    Action.GATE_MOVE_SAFETY: "gate",
    Action.GATE_SWAPPED: "gate",
    Action.THROTTLE_SET: "throttle",
    Action.THROTTLE_REMOVE: "throttle",
    Action.MOVE_REPLICAS: "moving replicas",
    Action.WAIT_MOVED: "moving replicas",
    Action.TRIGGER_REASSIGNMENT: "reassigning",
    RunAction.RESTORE_BACKUP: "rolling back",
    Decision.ROLLBACK: "rolling back",
}
# Drawn under the action bars: from the broker's stop until it is registered again.
STOPPED = "stopped"
# Legend order: the order a restart goes through.
PHASE_ORDER = (
    STOPPED,
    "gate",
    "stopping",
    "backing up",
    "deleting",
    "starting",
    "waiting for ISR",
    "verifying",
    "writing ZooKeeper",
    "controller election",
    "throttle",
    "moving replicas",
    "reassigning",
    "rolling back",
)
# Actions after which a stopped broker is back (the last one present in the run counts).
_BACK = (Action.WAIT_REGISTERED, Action.START)
# The executor samples about once a second while it waits, and not between waits: a longer
# gap is drawn as unknown rather than as the last count held.
SAMPLE_GAP_S = 3.0


@dataclass(frozen=True)
class Span:
    row: str  # "broker 3", "topic orders"
    phase: str
    start: float  # seconds since the run's first record
    end: float
    outcome: str  # finished | failed | in flight
    label: str  # the action as journaled, for tooltips and tables

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Marker:
    """A moment across the whole picture: a halt, a resume, the end of the run."""

    at: float
    event: str
    detail: str


@dataclass(frozen=True)
class HealthPoint:
    at: float
    under_replicated: int
    offline: int
    below_min_isr: int


@dataclass(frozen=True)
class RunTimeline:
    rows: tuple[str, ...]  # top to bottom
    spans: tuple[Span, ...]
    health: tuple[HealthPoint, ...]
    unsampled: tuple[tuple[float, float], ...]  # (from, to): no health sample in between
    markers: tuple[Marker, ...]
    length: float  # seconds from the first record to the last


def row_name(target: str) -> str:
    """The step key's target ("broker-3", "topic-orders", "cluster" for the moves and the
    trigger) as a row label."""
    for prefix, word in (("broker-", "broker"), ("topic-", "topic")):
        if target.startswith(prefix):
            return f"{word} {target.removeprefix(prefix)}"
    return target


def timeline(report: RunReport) -> RunTimeline:
    origin = report.started_ts
    spans = list(action_spans(report.actions, origin, report.ended_ts))
    spans += stopped_spans(report.actions, origin, report.ended_ts)
    spans += rollback_spans(report, origin)
    health = tuple(
        HealthPoint(s.ts - origin, s.under_replicated, s.offline, s.below_min_isr)
        for s in report.samples
    )
    return RunTimeline(
        rows=rows(report, spans),
        spans=tuple(sorted(spans, key=lambda s: (s.start, s.phase != STOPPED))),
        health=health,
        unsampled=unsampled(health),
        markers=tuple(
            Marker(e.ts - origin, e.event, e.detail)
            for e in report.events
            if e.event in (JournalEvent.RUN_HALTED, JournalEvent.RUN_RESUMED, JournalEvent.CHECKED)
        ),
        length=report.duration_s,
    )


def unsampled(health: tuple[HealthPoint, ...]) -> tuple[tuple[float, float], ...]:
    """The stretches between two samples more than SAMPLE_GAP_S apart."""
    return tuple((a.at, b.at) for a, b in pairwise(health) if b.at - a.at > SAMPLE_GAP_S)


def action_spans(actions: Iterable[Attempt], origin: float, end: float) -> list[Span]:
    """One span per attempt; an attempt still open runs to the end of the journal."""
    return [
        Span(
            row=row_name(a.target),
            phase=PHASES.get(a.name, a.name),
            start=a.started_ts - origin,
            end=(a.ended_ts if a.ended_ts is not None else end) - origin,
            outcome=a.outcome,
            label=a.key,
        )
        for a in actions
    ]


def stopped_spans(actions: Iterable[Attempt], origin: float, end: float) -> list[Span]:
    """When each broker was down: from its stop finishing until it was back (registered, or
    started where the playbook does not wait for registration), or the journal's end."""
    spans: list[Span] = []
    down_since: dict[str, tuple[float, str]] = {}
    every = list(actions)
    # A run that waits for registration is back only then, even if that wait never finished.
    back_names = {a.target: next((n for n in _BACK if _has(every, a.target, n)), "") for a in every}
    for action in (a for a in every if a.outcome == FINISHED):
        if action.name == Action.STOP and action.ended_ts is not None:
            down_since.setdefault(action.target, (action.ended_ts, action.key))
        elif action.name == back_names.get(action.target) and action.target in down_since:
            since, key = down_since.pop(action.target)
            assert action.ended_ts is not None  # finished actions have an end
            spans.append(
                Span(
                    row_name(action.target),
                    STOPPED,
                    since - origin,
                    action.ended_ts - origin,
                    FINISHED,
                    f"{key} .. {action.key}",
                )
            )
    for target, (since, key) in down_since.items():
        spans.append(Span(row_name(target), STOPPED, since - origin, end - origin, IN_FLIGHT, key))
    return spans


def rollback_spans(report: RunReport, origin: float) -> list[Span]:
    """rollback-started .. rollback-finished per broker, for a journal whose rollback has no
    step records of its own (written before a rollback's actions were journaled one by one:
    those are drawn as actions)."""
    if any(a.rollback for a in report.actions):
        return []
    spans: list[Span] = []
    open_since: dict[str, float] = {}
    for event in report.events:
        row = event.detail  # "broker N"
        if event.event == JournalEvent.ROLLBACK_STARTED:
            open_since[row] = event.ts
        elif event.event == JournalEvent.ROLLBACK_FINISHED and row in open_since:
            start = open_since.pop(row)
            spans.append(
                Span(row, "rolling back", start - origin, event.ts - origin, FINISHED, "rollback")
            )
    for row, start in open_since.items():
        outcome = FAILED if report.status != RunStatus.RUNNING else IN_FLIGHT
        spans.append(
            Span(row, "rolling back", start - origin, report.ended_ts - origin, outcome, "rollback")
        )
    return spans


def rows(report: RunReport, spans: Iterable[Span]) -> tuple[str, ...]:
    """Brokers in id order (every broker the run knew of: one row each), then topics."""
    names = {s.row for s in spans} | {f"broker {b}" for b in report.brokers}

    def order(name: str) -> tuple[int, int, str]:
        word, _, rest = name.partition(" ")
        if word == "broker" and rest.lstrip("-").isdigit():
            return (0, int(rest), "")
        return (1, 0, name)

    return tuple(sorted(names, key=order))


def _has(actions: Iterable[Attempt], target: str, name: str) -> bool:
    return any(a.target == target and a.name == name for a in actions)
