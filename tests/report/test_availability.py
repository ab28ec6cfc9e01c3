"""Per partition, the predicted against the observed unavailable phases, on hand-written
records; an older journal and plan without these fields give no rows and no section."""

from __future__ import annotations

from typing import Any

from remediate.report.availability import PartitionAvailability
from remediate.report.markdown import report_markdown
from remediate.report.model import build_report
from tests.report.records import PLAN, RESTART, Entry, records, run_start, step

PREDICTING_PLAN: dict[str, Any] = {
    **PLAN,
    "steps": [
        {**PLAN["steps"][0], "broker": 3, "predicted": {"during": ["old-0"], "after": []}},
        {
            **PLAN["steps"][0],
            "broker": 1,
            "predicted": {"during": ["old-0"], "after": ["old-1"], "last_in_isr": ["old-2"]},
        },
    ],
    "unavailable_now": ["old-1"],
}


def named_sample(at: float, offline: list[str], below: list[str] | None = None) -> Entry:
    return (
        at,
        "sample",
        {
            "under_replicated": 0,
            "offline": len(offline),
            "below_min_isr": len(below or []),
            "controller": 1,
            "brokers": [1, 2, 3],
            "offline_partitions": offline,
            "below_min_isr_partitions": below or [],
        },
    )


RUN = [
    *run_start(),
    named_sample(0.1, ["old-1"]),
    step(0.2, "step-started", "0:broker-3:stop"),
    named_sample(0.5, ["old-0", "old-1"]),
    step(1.0, "step-finished", "0:broker-3:stop", result={}),
    named_sample(1.5, ["old-1", "new-0"]),  # after step 1: the plan did not name new-0
    step(2.0, "step-started", "1:broker-1:stop"),
    named_sample(2.5, ["old-1", "old-2"], below=["old-0"]),
    step(3.0, "step-finished", "1:broker-1:stop", result={}),
    step(3.5, "step-started", "2:cluster:wait converged"),
    named_sample(3.8, []),
    step(4.0, "step-finished", "2:cluster:wait converged", result={}),
    (4.1, "run-completed", {}),
]


def test_each_partition_has_its_predicted_and_observed_phases() -> None:
    report = build_report(records(*RUN), PREDICTING_PLAN)
    assert report.availability == (
        PartitionAvailability("new-0", (), ("after step 1",)),
        PartitionAvailability("old-0", ("step 1", "step 2"), ("step 1", "step 2")),
        PartitionAvailability(
            "old-1", ("before", "after step 2"), ("before", "step 1", "after step 1", "step 2")
        ),
        PartitionAvailability("old-2", ("step 2",), ("step 2",)),
    )
    # old-1 was unavailable before the run and stays so until after step 2, as predicted.
    assert [a.partition for a in report.availability if a.unpredicted] == ["new-0"]


def test_the_report_shows_both_and_names_what_the_plan_did_not_predict() -> None:
    text = report_markdown(build_report(records(*RUN), PREDICTING_PLAN))
    assert "## Unavailable partitions" in text
    assert "| old-0 | step 1, step 2 | step 1, step 2 | as predicted |" in text
    assert "| new-0 | - | after step 1 | NOT PREDICTED: after step 1 |" in text
    assert "1 partition(s) unavailable when the plan did not predict it" in text


def test_an_older_journal_and_plan_give_no_rows() -> None:
    report = build_report(records(*RESTART), PLAN)
    assert report.availability == ()
    assert "Unavailable partitions" not in report_markdown(report)


def test_the_moves_and_the_trigger_are_steps_the_closing_wait_is_not() -> None:
    plan: dict[str, Any] = {
        **PLAN,
        "steps": [
            {"kind": "move", "predicted": {"during": ["old-0"], "after": ["old-0"]}},
            {"kind": "trigger", "predicted": {"during": ["old-0"], "after": []}},
        ],
        "unavailable_now": ["old-0"],
    }
    run = [
        *run_start(),
        step(0.2, "step-started", "0:cluster:move replicas"),
        named_sample(0.5, ["old-0"]),
        step(1.0, "step-finished", "0:cluster:move replicas", result={}),
        step(1.2, "step-started", "1:cluster:trigger reassignment"),
        named_sample(1.5, ["old-0"]),
        step(2.0, "step-finished", "1:cluster:trigger reassignment", result={}),
        step(2.5, "step-started", "2:cluster:wait converged"),
        named_sample(3.0, ["old-0"]),  # just after the trigger, whose step named it
        step(3.5, "step-finished", "2:cluster:wait converged", result={}),
        (3.6, "run-completed", {}),
    ]
    (row,) = build_report(records(*run), plan).availability
    assert row == PartitionAvailability(
        "old-0",
        ("before", "step 1", "after step 1", "step 2"),
        ("step 1", "step 2", "after step 2"),
    )
    assert row.unpredicted == ()
