"""Reading a run's journal into a report, and writing the report next to the journal."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from remediate.execute.journal import Journal
from remediate.report.html import report_html
from remediate.report.markdown import report_markdown
from remediate.report.model import RunReport, build_report
from remediate.report.timeline import timeline

REPORT_FILE = "report.html"


def load_report(root: Path, run_id: str) -> RunReport:
    """The report of run `run_id` under the journal root `root` (JournalError if none)."""
    journal = Journal.open(root, run_id)
    return build_report(journal.records(), journal.plan())


def default_path(root: Path, run_id: str) -> Path:
    """Where a run's report lives: beside its journal."""
    return root / run_id / REPORT_FILE


def render_html(report: RunReport) -> str:
    # Imported here: matplotlib takes a while to import, and only the report needs it.
    from remediate.report.chart import timeline_svg  # noqa: PLC0415

    started = report.started.replace("T", " ").removesuffix("Z") + " UTC"
    svg = timeline_svg(timeline(report), started=started, salt=report.run_id)
    return report_html(report, svg)


def render_markdown(report: RunReport) -> str:
    return report_markdown(report)


def report_json(report: RunReport) -> dict[str, Any]:
    """What the report is made of, as JSON: every field of the run's report (plain data read
    from its journal), with its duration."""
    plain = {f.name: _plain(getattr(report, f.name)) for f in fields(report)}
    return {**plain, "duration_s": round(report.duration_s, 3)}


def _plain(value: Any) -> Any:
    """`value` as JSON's types: a dataclass as its fields, a mapping with text keys, a tuple as
    a list (dataclasses.asdict copies mappings whole, and the report's are read-only views)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def write_report(path: Path, text: str) -> Path:
    """Write `text` to `path` whole or not at all (a reader never sees half a page)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
    return path


def write_html_report(root: Path, run_id: str) -> Path:
    """Render run `run_id`'s HTML report into its journal directory; return its path."""
    return write_report(default_path(root, run_id), render_html(load_report(root, run_id)))
