"""Journal records -> the report model, on hand-written records."""

from __future__ import annotations

from typing import Any

import pytest

from remediate.errors import JournalError
from remediate.report.model import FAILED, FINISHED, IN_FLIGHT, build_report, split_key
from tests.report.records import (
    ARCHIVE,
    BLOCKED,
    CRASHED_WHILE_DOWN,
    DIGEST,
    FILES,
    HALTED_THEN_RESUMED,
    PLAN,
    RESTART,
    RESTORE_AND_ORDER,
    T0,
    Entry,
    action,
    records,
    run_start,
    sample,
)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("3:broker-2:stop", (3, "broker-2", "stop")),
        ("0:broker-2:gate restart-safety", (0, "broker-2", "gate restart-safety")),
        ("0:topic-orders:zk-write topic-id", (0, "topic-orders", "zk-write topic-id")),
        ("rollback0:broker-3:restore", (-1, "broker-3", "restore")),
        ("broker-3:pre-gate", (-1, "broker-3", "pre-gate")),
        ("odd", (-1, "", "odd")),
    ],
)
def test_step_keys_split_into_index_target_and_action(
    key: str, expected: tuple[int, str, str]
) -> None:
    assert split_key(key) == expected


@pytest.mark.parametrize(
    ("entries", "status", "outcomes"),
    [
        (
            RESTART,
            "completed",
            [
                ("0:broker-3:gate restart-safety", FINISHED),
                ("0:broker-3:stop", FINISHED),
                ("0:broker-3:backup", FINISHED),
                ("0:broker-3:delete", FINISHED),
                ("0:broker-3:start", FINISHED),
                ("0:broker-3:wait registered", FINISHED),
                ("0:broker-3:wait in-sync", FINISHED),
                ("0:broker-3:verify topic-ids", FINISHED),
            ],
        ),
        (
            HALTED_THEN_RESUMED,
            "completed",
            [
                ("0:broker-2:gate restart-safety", FINISHED),
                ("0:broker-2:stop", FINISHED),
                ("0:broker-2:start", FINISHED),
                ("0:broker-2:wait registered", FINISHED),
                ("0:broker-2:wait in-sync", FAILED),
                ("0:broker-2:wait in-sync", FINISHED),
            ],
        ),
        (BLOCKED, "halted", [("0:broker-1:gate restart-safety", FAILED)]),
        (
            CRASHED_WHILE_DOWN,
            "running",
            [("0:broker-2:stop", FINISHED), ("0:broker-2:delete", IN_FLIGHT)],
        ),
    ],
    ids=["restart", "halted-then-resumed", "blocked", "crashed"],
)
def test_every_attempt_of_every_action_is_kept_in_order(
    entries: list[Entry], status: str, outcomes: list[tuple[str, str]]
) -> None:
    report = build_report(records(*entries), PLAN)
    assert report.status == status
    assert [(a.key, a.outcome) for a in report.actions] == outcomes


def test_an_attempt_carries_its_times_result_and_error() -> None:
    report = build_report(records(*HALTED_THEN_RESUMED), PLAN)
    failed, again = [a for a in report.actions if a.name == "wait in-sync"]
    assert failed.started_ts == T0 + 2.5 and failed.ended_ts == T0 + 10.0
    assert failed.duration_s == pytest.approx(7.5)
    assert failed.error == "timed out | after 7s"
    assert again.result == {"in_sync_after_s": 1.0} and again.error is None
    assert report.last_error == "timed out | after 7s"


def test_an_action_started_again_without_an_end_closes_the_earlier_attempt_as_in_flight() -> None:
    entries: list[Entry] = [
        *run_start(),
        (1.0, "step-started", {"step": "0:broker-2:stop", "resumed": False}),
        (5.0, "run-resumed", {"by": "bob"}),
        (5.1, "step-started", {"step": "0:broker-2:stop", "resumed": True}),
        (6.0, "step-finished", {"step": "0:broker-2:stop", "result": {"stopped": 2}}),
    ]
    first, second = build_report(records(*entries), PLAN).actions
    assert (first.outcome, first.ended_ts, first.resumed) == (IN_FLIGHT, None, False)
    assert (second.outcome, second.resumed) == (FINISHED, True)


@pytest.mark.parametrize(
    ("entries", "gates"),
    [
        (RESTART, [("broker-3:pre-gate", True, "no blocker: every check passed")]),
        (BLOCKED, [("broker-1:pre-gate", False, "payments-0 would drop to isr 1")]),
        (
            RESTORE_AND_ORDER,
            [
                ("topic-orders:agreement", True, "no blocker: every check passed"),
                ("1:broker-1:order", True, "broker 1 is now the active controller: it goes last"),
            ],
        ),
    ],
    ids=["passed", "blocked", "decision"],
)
def test_gate_decisions_keep_their_reason(
    entries: list[Entry], gates: list[tuple[str, bool, str]]
) -> None:
    report = build_report(records(*entries), PLAN)
    assert [(g.step, g.passed, g.reason) for g in report.gates] == gates


def test_approval_digest_and_plan_come_from_the_journal_and_plan() -> None:
    report = build_report(records(*RESTART), PLAN)
    assert report.run_id == "20261122T103400Z-abc123"
    assert report.cluster == "prod-eu-1" and report.host == "ops-1"
    assert report.digest == DIGEST and report.digest_matches
    assert [(a.by, a.digest) for a in report.approvals] == [("alice@ops-1 (fix --yes)", DIGEST)]
    assert [(s.number, s.target, s.partitions) for s in report.steps] == [
        (1, "broker 3", ("payments-0",))
    ]
    assert report.skipped == ((1, "nothing to fix: 3 replica(s) agree with ZooKeeper"),)
    assert report.brokers == (1, 2, 3)
    assert report.duration_s == pytest.approx(7.7)


def test_a_run_started_with_another_digest_is_shown_as_such() -> None:
    report = build_report(records(*run_start(digest="ff" * 32)), PLAN)
    assert not report.digest_matches and report.journal_digest == "ff" * 32


def test_backups_and_deleted_files_come_from_the_action_results() -> None:
    report = build_report(records(*RESTART), PLAN)
    (backup,) = report.backups
    assert (backup.target, backup.archive, backup.archive_sha256) == (
        "broker-3",
        ARCHIVE,
        "ac" * 32,
    )
    assert [(f.path, f.sha256, f.size) for f in backup.files] == [
        (FILES[0], "0a" * 32, 43),
        (FILES[1], "0b" * 32, 28),
    ]
    assert report.deleted == FILES


def test_samples_are_read_in_order() -> None:
    report = build_report(records(*RESTART), PLAN)
    assert [s.under_replicated for s in report.samples] == [0, 3, 2, 0, 0]
    assert report.samples[1].brokers == (1, 2, 3) and report.samples[1].controller == 1


def test_the_scan_after_the_run_is_read_when_recorded() -> None:
    checked: Entry = (
        9.0,
        "checked",
        {"status": "OK", "summary": "OK: 9 replicas checked", "counts": {"OK": 9}},
    )
    report = build_report(records(*RESTART, checked), PLAN)
    assert report.check is not None
    assert (report.check.status, dict(report.check.counts)) == ("OK", {"OK": 9})
    assert build_report(records(*RESTART), PLAN).check is None


@pytest.mark.parametrize(
    "extra",
    [
        (1.0, "something-new", {"step": 7}),
        (1.0, "sample", {"under_replicated": "many", "brokers": "1,2"}),
        (1.0, "gate", {}),
    ],
    ids=["unknown-event", "odd-sample", "bare-gate"],
)
def test_records_of_unknown_or_odd_shape_do_not_break_the_report(
    extra: tuple[float, str, dict[str, Any]],
) -> None:
    report = build_report(records(*run_start(), sample(0.5), extra), {})
    assert report.status == "running" and report.cluster == ""


def test_an_empty_journal_has_no_report() -> None:
    with pytest.raises(JournalError):
        build_report([], PLAN)


def test_notes_and_retries_are_shown_in_order_with_what_was_retried() -> None:
    entries: list[Entry] = [
        *CRASHED_WHILE_DOWN,
        (
            1.3,
            "retry",
            {"what": "broker 2's stop command", "attempt": 1, "error": "TransportError: lost"},
        ),
        (1.4, "zookeeper", {"session": "SUSPENDED", "observed": T0 + 1.35}),
    ]
    report = build_report(records(*entries), PLAN)
    assert [(n.step, n.text) for n in report.notes] == [
        ("0:broker-2:delete", "deleting 2 files"),
        ("", "retried broker 2's stop command (attempt 1): TransportError: lost"),
        ("", "the operator's ZooKeeper session: SUSPENDED"),
    ]


def test_an_action_left_out_is_shown_with_the_reason() -> None:
    entries: list[Entry] = [
        *run_start(),
        (1.0, "run-resumed", {"by": "oncall"}),
        (
            1.1,
            "step-skipped",
            {"step": "0:broker-3:stop", "reason": "finished earlier in this run: not repeated"},
        ),
    ]
    report = build_report(records(*entries), PLAN)
    assert [(n.step, n.text) for n in report.notes] == [
        ("0:broker-3:stop", "not carried out: finished earlier in this run: not repeated")
    ]
    assert report.actions == ()


def test_files_gone_before_a_resumed_delete_count_as_deleted() -> None:
    entries: list[Entry] = [
        *run_start(),
        *action(1.0, 1.1, "0:broker-3:delete", deleted=[FILES[1]], already_gone=[FILES[0]]),
    ]
    assert build_report(records(*entries), PLAN).deleted == (FILES[1], FILES[0])
