"""The report model -> timeline spans, rows, health points and markers, on hand-written runs."""

from __future__ import annotations

import pytest

from remediate.report.model import FAILED, FINISHED, IN_FLIGHT, build_report
from remediate.report.timeline import STOPPED, Span, row_name, timeline
from tests.report.records import (
    BLOCKED,
    CRASHED_WHILE_DOWN,
    HALTED_THEN_RESUMED,
    PLAN,
    RESTART,
    RESTORE_AND_ORDER,
    Entry,
    records,
    run_start,
    sample,
)

Expected = tuple[str, str, float, float, str]


def action(start: float, end: float, key: str) -> list[Entry]:
    return [
        (start, "step-started", {"step": key, "resumed": False}),
        (end, "step-finished", {"step": key, "result": {}}),
    ]


def spans(entries: list[Entry]) -> list[Expected]:
    line = timeline(build_report(records(*entries), PLAN))
    return [(s.row, s.phase, round(s.start, 3), round(s.end, 3), s.outcome) for s in line.spans]


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        (
            RESTART,
            [
                ("broker 3", "gate", 0.03, 0.05, FINISHED),
                ("broker 3", "stopping", 0.05, 1.0, FINISHED),
                # Stopped from the end of the stop until the broker registered again.
                ("broker 3", STOPPED, 1.0, 4.0, FINISHED),
                ("broker 3", "backing up", 1.0, 1.5, FINISHED),
                ("broker 3", "deleting", 1.5, 2.0, FINISHED),
                ("broker 3", "starting", 2.0, 3.0, FINISHED),
                ("broker 3", "starting", 3.0, 4.0, FINISHED),
                ("broker 3", "waiting for ISR", 4.0, 7.0, FINISHED),
                ("broker 3", "verifying", 7.0, 7.5, FINISHED),
            ],
        ),
        (
            HALTED_THEN_RESUMED,
            [
                ("broker 2", "gate", 0.03, 0.05, FINISHED),
                ("broker 2", "stopping", 0.05, 1.0, FINISHED),
                ("broker 2", STOPPED, 1.0, 2.5, FINISHED),
                ("broker 2", "starting", 1.0, 2.0, FINISHED),
                ("broker 2", "starting", 2.0, 2.5, FINISHED),
                ("broker 2", "waiting for ISR", 2.5, 10.0, FAILED),
                ("broker 2", "waiting for ISR", 20.02, 21.0, FINISHED),
            ],
        ),
        (BLOCKED, [("broker 1", "gate", 0.03, 0.05, FAILED)]),
        (
            # The journal ends while the broker is down and its delete unfinished.
            CRASHED_WHILE_DOWN,
            [
                ("broker 2", "stopping", 0.05, 1.0, FINISHED),
                ("broker 2", STOPPED, 1.0, 1.2, IN_FLIGHT),
                ("broker 2", "deleting", 1.0, 1.2, IN_FLIGHT),
            ],
        ),
        (
            RESTORE_AND_ORDER,
            [
                ("topic orders", "gate", 0.03, 0.05, FINISHED),
                ("topic orders", "writing ZooKeeper", 0.05, 0.2, FINISHED),
                ("topic orders", "controller election", 0.2, 1.2, FINISHED),
            ],
        ),
        (
            [
                *run_start(),
                (1.0, "rollback-started", {"step": "rollback0:broker-3:rollback", "broker": 3}),
                (2.0, "gate", {"step": "rollback0:broker-3:gate", "blocker": None}),
                (3.0, "rollback-restored", {"step": "rollback0:broker-3:restore", "restored": []}),
                (4.0, "rollback-finished", {"step": "rollback0:broker-3:rollback", "broker": 3}),
            ],
            [("broker 3", "rolling back", 1.0, 4.0, FINISHED)],
        ),
        (
            # A rollback whose actions are journaled one by one: drawn as actions.
            [
                *run_start(),
                (1.0, "rollback-started", {"step": "rollback0:broker-3:rollback", "broker": 3}),
                *action(1.0, 1.1, "rollback0:broker-3:gate restart-safety"),
                *action(1.1, 2.0, "rollback0:broker-3:stop"),
                *action(2.0, 3.0, "rollback0:broker-3:restore"),
                *action(3.0, 3.5, "rollback0:broker-3:start"),
                *action(3.5, 4.0, "rollback0:broker-3:wait registered"),
                (4.0, "rollback-finished", {"step": "rollback0:broker-3:rollback", "broker": 3}),
            ],
            [
                ("broker 3", "gate", 1.0, 1.1, FINISHED),
                ("broker 3", "stopping", 1.1, 2.0, FINISHED),
                ("broker 3", STOPPED, 2.0, 4.0, FINISHED),
                ("broker 3", "rolling back", 2.0, 3.0, FINISHED),
                ("broker 3", "starting", 3.0, 3.5, FINISHED),
                ("broker 3", "starting", 3.5, 4.0, FINISHED),
            ],
        ),
    ],
    ids=[
        "restart",
        "halted-then-resumed",
        "blocked",
        "crashed-while-down",
        "restore",
        "rollback",
        "rollback-by-action",
    ],
)
def test_spans_show_what_each_broker_was_doing(
    entries: list[Entry], expected: list[Expected]
) -> None:
    assert spans(entries) == expected


def test_a_playbook_without_a_registration_wait_is_back_once_started() -> None:
    entries: list[Entry] = [
        *run_start(),
        (0.1, "step-started", {"step": "0:broker-2:stop", "resumed": False}),
        (1.0, "step-finished", {"step": "0:broker-2:stop", "result": {}}),
        (1.0, "step-started", {"step": "0:broker-2:start", "resumed": False}),
        (2.0, "step-finished", {"step": "0:broker-2:start", "result": {}}),
    ]
    assert ("broker 2", STOPPED, 1.0, 2.0, FINISHED) in spans(entries)


def test_a_broker_whose_registration_wait_failed_is_still_down_at_the_end() -> None:
    entries: list[Entry] = [
        *run_start(),
        (0.1, "step-started", {"step": "0:broker-2:stop", "resumed": False}),
        (1.0, "step-finished", {"step": "0:broker-2:stop", "result": {}}),
        (1.0, "step-started", {"step": "0:broker-2:start", "resumed": False}),
        (2.0, "step-finished", {"step": "0:broker-2:start", "result": {}}),
        (2.0, "step-started", {"step": "0:broker-2:wait registered", "resumed": False}),
        (9.0, "step-failed", {"step": "0:broker-2:wait registered", "error": "timed out"}),
        (9.1, "run-halted", {"error": "timed out"}),
    ]
    assert ("broker 2", STOPPED, 1.0, 9.1, IN_FLIGHT) in spans(entries)


@pytest.mark.parametrize(
    ("entries", "rows"),
    [
        # Every broker the run knew of has a row, even those it never touched.
        (RESTART, ("broker 1", "broker 2", "broker 3")),
        (RESTORE_AND_ORDER, ("broker 1", "broker 2", "broker 3", "topic orders")),
    ],
    ids=["brokers", "brokers-then-topics"],
)
def test_one_row_per_broker_in_id_order_then_topics(
    entries: list[Entry], rows: tuple[str, ...]
) -> None:
    assert timeline(build_report(records(*entries), PLAN)).rows == rows


def test_broker_rows_sort_by_number_not_text() -> None:
    plan = {**PLAN, "fingerprint": {"brokers": [10, 9, 101]}}
    line = timeline(build_report(records(*run_start()), plan))
    # Broker 3 comes from the plan's step.
    assert line.rows == ("broker 3", "broker 9", "broker 10", "broker 101")


def test_health_points_are_seconds_since_the_start() -> None:
    line = timeline(build_report(records(*RESTART), PLAN))
    assert [(round(p.at, 2), p.under_replicated) for p in line.health] == [
        (0.02, 0),
        (4.1, 3),
        (5.1, 2),
        (6.1, 0),
        (7.6, 0),
    ]
    assert line.length == pytest.approx(7.7)


@pytest.mark.parametrize(
    ("entries", "gaps"),
    [
        ([*run_start(), sample(0.0), sample(1.0), sample(2.0)], []),
        ([*run_start(), sample(0.0), sample(1.0), sample(9.0), sample(10.0)], [(1.0, 9.0)]),
        ([*run_start()], []),
    ],
    ids=["every-second", "a-gap", "no-samples"],
)
def test_stretches_without_samples_are_marked_unknown(
    entries: list[Entry], gaps: list[tuple[float, float]]
) -> None:
    line = timeline(build_report(records(*entries), PLAN))
    assert [(round(a, 2), round(b, 2)) for a, b in line.unsampled] == gaps


def test_halts_and_resumes_are_markers() -> None:
    line = timeline(build_report(records(*HALTED_THEN_RESUMED), PLAN))
    assert [(m.event, round(m.at, 2)) for m in line.markers] == [
        ("run-halted", 10.01),
        ("run-resumed", 20.0),
    ]


@pytest.mark.parametrize(
    ("target", "row"),
    [("broker-3", "broker 3"), ("topic-my-topic", "topic my-topic"), ("other", "other")],
)
def test_row_names(target: str, row: str) -> None:
    assert row_name(target) == row


def test_span_duration() -> None:
    assert Span("broker 1", "stopping", 1.0, 3.5, FINISHED, "k").duration == 2.5
