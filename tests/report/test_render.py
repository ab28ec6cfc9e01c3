"""The report model -> markdown and HTML, on hand-written runs."""

from __future__ import annotations

import re
from typing import Any

import pytest

from remediate.report.files import render_html
from remediate.report.markdown import cell, report_markdown
from remediate.report.model import RunReport, build_report
from remediate.report.summary import Code, duration, result_text
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
    Entry,
    records,
)

RUNS = {
    "restart": RESTART,
    "halted-then-resumed": HALTED_THEN_RESUMED,
    "blocked": BLOCKED,
    "crashed": CRASHED_WHILE_DOWN,
    "restore": RESTORE_AND_ORDER,
}


def report_of(entries: list[Entry], plan: dict[str, Any] = PLAN) -> RunReport:
    return build_report(records(*entries), plan)


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of every table row (an escaped pipe stays inside its cell)."""
    return [
        [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in markdown.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]


@pytest.mark.parametrize("entries", RUNS.values(), ids=RUNS.keys())
def test_markdown_has_every_step_and_every_gate_decision(entries: list[Entry]) -> None:
    journal = records(*entries)
    rows = table_rows(report_markdown(build_report(journal, PLAN)))
    step_rows = [r for r in rows if r[0].startswith("`") and r[0].count(":") >= 2]
    attempts = [r["step"] for r in journal if r["event"] == "step-started"]
    assert [r[0].strip("`") for r in step_rows] == attempts
    gate_rows = [r for r in rows if len(r) == 4 and r[2] in ("passed", "BLOCKED")]
    gates = [r for r in journal if r["event"] == "gate"]
    assert len(gate_rows) == len(gates)
    for row, gate in zip(gate_rows, gates, strict=True):
        assert row[1].strip("`") == gate["step"]
        assert row[2] == ("BLOCKED" if gate["blocker"] else "passed")
        reason = gate["blocker"] or gate.get("decision")
        if reason:
            assert row[3] == reason


def test_markdown_names_the_plan_digest_the_approver_and_the_backups() -> None:
    text = report_markdown(report_of(RESTART))
    assert text.startswith("# Run report: 20261122T103400Z-abc123 on prod-eu-1\n")
    assert f"**plan digest**: `{DIGEST}`" in text
    assert "**approved by**: alice@ops-1 (fix --yes) at 2026-11-22T10:34:00.010Z" in text
    assert f"`{ARCHIVE}` | `{'ac' * 32}`" in text
    for path in FILES:
        assert f"deleted {path}" in text
    assert "**under-replicated partitions**: 0 at start, at most 3, 0 at end" in text
    assert "broker 3: verified=3; without_file_yet=[]" in text
    assert "broker 1 left out: nothing to fix" in text
    # A pipe in a note or an error does not break the table.
    assert "note: a \\| note" in text


def test_markdown_of_a_blocked_run_says_what_blocked_it() -> None:
    text = report_markdown(report_of(BLOCKED))
    assert "| BLOCKED | payments-0 would drop to isr 1 |" in text
    assert "**status**: halted" in text
    assert "no file was backed up or deleted" in text


def test_markdown_shows_the_scan_after_the_run_when_recorded() -> None:
    checked: Entry = (
        9.0,
        "checked",
        {"status": "OK", "summary": "OK: 9 replicas checked", "counts": {"OK": 9}},
    )
    text = report_markdown(report_of([*RESTART, checked]))
    assert "**scan after the run**: OK: 9 replicas checked" in text
    assert "**findings after**: OK=9" in text


def test_markdown_says_when_nothing_was_approved() -> None:
    text = report_markdown(report_of(RESTART[:1]))
    assert "**approved by**: not recorded in the journal" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a | b", "a \\| b"),
        ("two\nlines", "two lines"),
        (Code("/x|y"), "`/x\\|y`"),
        (Code("a`b"), "``a`b``"),
        (Code(""), ""),
    ],
)
def test_markdown_cells(text: str, expected: str) -> None:
    assert cell(text) == expected


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.04, "0.0 s"), (7.5, "7.5 s"), (59.94, "59.9 s"), (125, "2 min 5 s")]
)
def test_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(
    ("result", "text"),
    [
        ({}, ""),
        ({"stopped": 3}, "stopped=3"),
        ({"deleted": ["/a", "/b"]}, "deleted 2 file(s)"),
        ({"backup": {"archive": "/b.tgz", "entries": [{}, {}]}}, "2 file(s) into /b.tgz"),
        ({"x": "y" * 300}, 'x="' + "y" * 154 + "..."),
    ],
)
def test_results_in_one_line(result: dict[str, Any], text: str) -> None:
    assert result_text(result) == text


@pytest.mark.parametrize("entries", RUNS.values(), ids=RUNS.keys())
def test_html_is_one_self_contained_page_with_the_picture(entries: list[Entry]) -> None:
    page = render_html(report_of(entries))
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>Run report: 20261122T103400Z-abc123 on prod-eu-1</title>" in page
    assert page.count("<svg") == 1 and '<figure id="timeline">' in page
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    # Nothing is loaded from anywhere: no script, no link, no external reference.
    assert "<script" not in page and "<link" not in page
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", page)
    assert "url(http" not in page and "@import" not in page
    assert "Content-Security-Policy" in page


def test_html_escapes_what_the_journal_says() -> None:
    plan = {**PLAN, "cluster": "<b>prod</b>"}
    page = render_html(report_of(BLOCKED, plan))
    assert "<b>prod</b>" not in page and "&lt;b&gt;prod&lt;/b&gt;" in page
    assert '<tr class="blocked">' in page


def test_html_is_the_same_for_the_same_journal() -> None:
    assert render_html(report_of(RESTART)) == render_html(report_of(RESTART))
