"""The report of a real run: `fix --yes` repairs a planted mismatch on the sandbox, then its
report is checked against its journal and rendered in headless Chromium. (One sandbox, one
repair; `apply --json` is checked on the healed cluster with an empty plan.)"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image, ImageStat

from remediate.execute.journal import list_runs
from remediate.execute.steps import RESTART_ACTIONS, RunAction, StepKey
from remediate.report.chart import COLOURS
from remediate.sandbox import cluster
from remediate.sandbox.reproduce import Incident
from tests.execute.sandbox_tools import run_cli
from tests.execute.test_apply_sandbox import PAYMENTS, plant_mismatch
from tests.report.browser import chromium
from tests.report.test_render import table_rows

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Run:
    config: Path
    run_id: str
    journal: Path  # the run's directory
    stderr: str  # fix's human output
    plan: dict[str, Any]
    records: list[dict[str, Any]]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One repair by restart, run by `fix --yes` as on-call would: broker 3's replicas of a
    topic carry a foreign id."""
    directory = tmp_path_factory.mktemp("report") / "sandbox"
    cluster.up(directory, kafka_version="3.4")
    incident = Incident(directory, topic=PAYMENTS)
    try:
        plant_mismatch(directory, incident.state, incident.zk, 3)
        config = directory / "cluster.yaml"
        fixed = run_cli("fix", "-c", str(config), "--yes")
        assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
        journal_dir = Path(yaml.safe_load(config.read_text())["journal_dir"])
        (run_id,) = list_runs(journal_dir)
        lines = (journal_dir / run_id / "journal.jsonl").read_text().splitlines()
        yield Run(
            config,
            run_id,
            journal_dir / run_id,
            fixed.stderr,
            json.loads((journal_dir / run_id / "plan.json").read_text()),
            [json.loads(line) for line in lines],
        )
    finally:
        incident.close()
        cluster.down(directory)


def test_fix_writes_the_report_beside_the_journal_and_prints_its_path(run: Run) -> None:
    assert run.stderr.splitlines()[-1] == f"report: {run.journal / 'report.html'}"
    assert (run.journal / "report.html").is_file()
    # The scan after the run is in the journal, for the report's "after".
    (checked,) = [r for r in run.records if r["event"] == "checked"]
    assert checked["status"] == "OK" and checked["counts"]["OK"] > 0


def test_output_into_a_pipe_keeps_every_backup_path_on_one_line(run: Run) -> None:
    """fix's human output went into a pipe (as into `fix --yes > fix.log`): nothing is wrapped,
    so every backup archive and every file it names can be copied from one line."""
    backups = Path(yaml.safe_load(run.config.read_text())["backup_dir"]) / run.run_id
    archives = sorted(str(p) for p in backups.rglob("*.tar.gz"))
    assert archives
    lines = run.stderr.splitlines()
    for archive in archives:
        assert [line for line in lines if archive in line], f"{archive} is not whole on a line"


def test_apply_json_names_its_report(run: Run, tmp_path: Path) -> None:
    """The cluster is healthy now: an empty plan, applied, is still a run with a report."""
    plan_path = tmp_path / "plan.json"
    planned = run_cli("plan", "-c", str(run.config), "-o", str(plan_path), "--json")
    assert planned.returncode == 0, planned.stderr[-3000:]
    digest = json.loads(plan_path.read_text())["digest"]
    applied = run_cli(
        "apply", "-c", str(run.config), "--plan", str(plan_path), "--approve", digest, "--json"
    )
    assert applied.returncode == 0, applied.stderr[-3000:]
    document = json.loads(applied.stdout)
    assert document["status"] == "completed"
    assert document["report"] == str(run.journal.parent / document["run_id"] / "report.html")
    assert Path(document["report"]).is_file()
    assert "report:" not in applied.stderr


def test_the_markdown_has_every_step_and_gate_decision_of_the_journal(run: Run) -> None:
    done = run_cli("report", "-c", str(run.config), "--run", run.run_id, "--format", "markdown")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    rows = table_rows(text)
    steps = [r["step"] for r in run.records if r["event"] == "step-started"]
    assert [StepKey.parse(s).action for s in steps] == [*RESTART_ACTIONS, RunAction.CONVERGE]
    assert [r[0].strip("`") for r in rows if r[0].strip("`") in steps] == steps
    gates = [r for r in run.records if r["event"] == "gate"]
    assert gates
    gate_rows = [r for r in rows if len(r) == 4 and r[2] in ("passed", "BLOCKED")]
    assert [(r[1].strip("`"), r[2]) for r in gate_rows] == [
        (g["step"], "BLOCKED" if g["blocker"] else "passed") for g in gates
    ]
    approved = next(r for r in run.records if r["event"] == "approved")
    assert f"**approved by**: {approved['approved_by']}" in text
    assert f"**plan digest**: `{run.plan['digest']}`" in text
    (backup,) = [
        r["result"]["backup"]
        for r in run.records
        if r["event"] == "step-finished" and r["step"].endswith(":backup")
    ]
    assert f"`{backup['archive']}` | `{backup['archive_sha256']}`" in text
    for entry in backup["entries"]:
        assert f"`{entry['path']}` | `{entry['sha256']}`" in text
    assert "**scan after the run**: OK" in text
    samples = [r for r in run.records if r["event"] == "sample"]
    assert len(samples) >= 2
    assert f"**samples**: {len(samples)} from" in text


def test_the_page_renders_in_chromium_with_a_timeline(run: Run, tmp_path: Path) -> None:
    page = run.journal / "report.html"
    with chromium() as browser:
        browser.get(page.as_uri())
        assert browser.execute_script("return document.readyState") == "complete"
        assert browser.title == f"Run report: {run.run_id} on {run.plan['cluster']}"
        heading = browser.find_element("css selector", "h1")
        assert heading.text == browser.title
        svg = browser.find_element("css selector", "figure#timeline svg")
        box = browser.execute_script(
            "const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];", svg
        )
        assert box[0] > 600 and box[1] > 300, box
        picture = Image.open(io.BytesIO(svg.screenshot_as_png)).convert("RGB")
        height = browser.execute_script("return document.body.scrollHeight")
        browser.set_window_size(1280, min(int(height) + 100, 6000))
        browser.save_screenshot(str(tmp_path / "report.png"))
        # Selenium leaves Chrome's get_log unannotated.
        logged = browser.get_log("browser")  # type: ignore[no-untyped-call]
        errors = [e for e in logged if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    picture.save(tmp_path / "timeline.png")
    # Not blank: a drawing, not one colour...
    spread = ImageStat.Stat(picture.convert("L")).stddev[0]
    assert spread > 20, spread
    # ...with the bars of the restart in it.
    colours = {colour for _, colour in picture.getcolors(maxcolors=1 << 20) or []}
    for phase in ("stopping", "starting", "waiting for ISR"):
        assert hex_rgb(COLOURS[phase]) in colours, phase


def hex_rgb(colour: str) -> tuple[int, int, int]:
    value = colour.lstrip("#")
    return (int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16))
