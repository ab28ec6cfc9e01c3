"""`remediate report` on a hand-written journal: where it writes, what it prints, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.execute.sandbox_tools import run_cli
from tests.report.records import BLOCKED, RESTART, RUN, write_run


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "cluster": "prod-eu-1",
                "zookeeper": {"connect": "127.0.0.1:1"},
                "brokers": [{"id": 3, "host": "b3", "transport": "local", "log_dirs": ["/d"]}],
                "service": {"stop": "stop", "start": "start"},
                "journal_dir": str(tmp_path / "journal"),
            }
        )
    )
    return path


def test_html_goes_beside_the_journal_and_its_path_is_printed(config: Path, tmp_path: Path) -> None:
    run = write_run(tmp_path / "journal", RESTART)
    done = run_cli("report", "-c", str(config), "--run", RUN)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{run / 'report.html'}\n"
    page = (run / "report.html").read_text()
    assert "<svg" in page and RUN in page


def test_the_latest_run_is_the_default_and_o_chooses_the_file(config: Path, tmp_path: Path) -> None:
    write_run(tmp_path / "journal", BLOCKED)
    target = tmp_path / "out" / "r.html"
    done = run_cli("report", "-c", str(config), "-o", str(target))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{target}\n" and "BLOCKED" in target.read_text()


def test_markdown_goes_to_stdout_or_to_o(config: Path, tmp_path: Path) -> None:
    run = write_run(tmp_path / "journal", RESTART)
    done = run_cli("report", "-c", str(config), "--run", RUN, "--format", "markdown")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"# Run report: {RUN} on prod-eu-1\n")
    assert not (run / "report.html").exists()
    target = tmp_path / "ticket.md"
    written = run_cli("report", "-c", str(config), "--format", "markdown", "-o", str(target))
    assert written.returncode == 0 and written.stdout == f"{target}\n"
    assert target.read_text() == done.stdout


def test_json_is_one_document_of_what_the_report_is_made_of(config: Path, tmp_path: Path) -> None:
    run = write_run(tmp_path / "journal", RESTART)
    done = run_cli("report", "-c", str(config), "--run", RUN, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["run_id"] == RUN and document["cluster"] == "prod-eu-1"
    assert document["duration_s"] >= 0
    assert [s["kind"] for s in document["steps"]] == ["restart"]
    assert document["actions"] and {"key", "outcome", "started"} <= set(document["actions"][0])
    assert not (run / "report.html").exists()
    target = tmp_path / "report.json"
    written = run_cli("report", "-c", str(config), "--run", RUN, "--json", "-o", str(target))
    assert written.returncode == 0 and written.stdout == f"{target}\n"
    assert json.loads(target.read_text()) == document


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 4, "no run in"),
        (["--run", "20990101T000000Z-ffffff"], 3, "no journal for run"),
        (["--run", "../etc"], 3, "invalid run id"),
    ],
    ids=["no-runs", "unknown-run", "unsafe-run-id"],
)
def test_a_missing_run_is_an_error_not_a_report(
    config: Path, args: list[str], code: int, message: str
) -> None:
    done = run_cli("report", "-c", str(config), *args)
    assert done.returncode == code, done.stderr
    assert message in done.stderr and done.stdout == ""


def test_the_approver_under_sudo_is_the_person_who_ran_sudo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from remediate.cli.apply import _identity  # noqa: PLC0415

    monkeypatch.setenv("SUDO_USER", "alice")
    assert _identity().startswith("alice@")
    monkeypatch.delenv("SUDO_USER")
    assert not _identity().startswith("alice@")
