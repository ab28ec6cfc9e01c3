"""`remediate report`: a run's journal as one self-contained HTML page, or as markdown for a
change ticket."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from remediate.cli.common import config_option, json_option
from remediate.config import load_cluster_config
from remediate.execute.journal import run_or_latest
from remediate.report.files import (
    default_path,
    load_report,
    render_html,
    render_markdown,
    report_json,
    write_report,
)


@click.command()
@config_option
@click.option("--run", "run_id", help="The run to report on (default: the latest).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report here (default: html beside the run's journal, markdown on stdout).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "markdown"]),
    default="html",
    show_default=True,
    help="A self-contained HTML page or Markdown.",
)
@json_option
def report(
    config_path: Path, run_id: str | None, output: Path | None, fmt: str, as_json: bool
) -> int:
    """Write a run's report from its journal: timeline, health, plan, approvals, gates, backups.

    HTML goes to <journal_dir>/<run id>/report.html unless -o says otherwise, and its path is
    printed; markdown goes to stdout unless -o is given. With --json, what the report is made
    of as one JSON document on stdout (or in -o's file), whatever --format says.
    """
    config = load_cluster_config(config_path)
    root = Path(config.journal_dir)
    chosen = run_or_latest(root, run_id)
    loaded = load_report(root, chosen)
    if as_json:
        text = json.dumps(report_json(loaded), indent=2) + "\n"
        if output is None:
            sys.stdout.write(text)
            return 0
        write_report(output, text)
        sys.stdout.write(f"{output}\n")
        return 0
    if fmt == "markdown":
        text = render_markdown(loaded)
        if output is None:
            sys.stdout.write(text)
            return 0
        write_report(output, text)
    else:
        output = write_report(output or default_path(root, chosen), render_html(loaded))
    sys.stdout.write(f"{output}\n")
    return 0


__all__ = ["report"]
