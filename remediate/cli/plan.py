"""`remediate plan`: scan, then plan the repair as a reviewable, digest-stamped document."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from remediate.cli.common import (
    candidate_option,
    config_option,
    engine_option,
    err,
    master_needs_spark,
    master_option,
    max_batch_size_option,
    out,
    restore_only_option,
    status_line,
)
from remediate.config import load_cluster_config
from remediate.exit_codes import EXIT_NEEDS_ACCEPTANCE, EXIT_REFUSED
from remediate.plan import PlanVerdict
from remediate.plan.render import plan_markdown, plan_table
from remediate.workflows import build_plan, refused, unaccepted, write_plan


@click.command()
@config_option
@click.option(
    "--playbook",
    "playbook_name",
    default="topicid-mismatch",
    show_default=True,
    help="The playbook the steps follow: a name (remediate/playbooks/NAME.yaml, or one on"
    " $REMEDIATE_PLAYBOOKS) or a file.",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the plan JSON here.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "markdown", "json"]),
    default="table",
    show_default=True,
    help="How the plan is printed: a table, a Markdown document to review, or JSON.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--allow-unsafe",
    is_flag=True,
    help="Plan even where a step cannot be gated safely (recorded in the plan).",
)
@click.option(
    "--include-topic",
    "include_topics",
    multiple=True,
    help="Act on this internal topic too (repeatable).",
)
@candidate_option
@restore_only_option
@max_batch_size_option
@master_option
@engine_option("spark")
def plan(
    config_path: Path,
    playbook_name: str,
    output: Path | None,
    fmt: str,
    as_json: bool,
    allow_unsafe: bool,
    include_topics: tuple[str, ...],
    candidate: str,
    restore_only: bool,
    max_batch_size: int | None,
    spark_master: str | None,
    engine: str,
) -> int:
    """Plan the repair without changing anything. Exit 0 ready, 4 refused, 6 ready once
    someone accepts the partitions it makes unavailable (apply --approve does)."""
    if as_json:
        fmt = "json"
    master_needs_spark(spark_master, engine)
    config = load_cluster_config(config_path)
    with status_line(quiet=fmt == "json") as progress:
        result = build_plan(
            config,
            playbook_name=playbook_name,
            allow_unsafe=allow_unsafe,
            include_topics=include_topics,
            spark_master=spark_master,
            engine=engine,
            progress=progress,
            candidate=candidate,
            restore_only=restore_only,
            max_batch_size=max_batch_size,
        )
    if output is not None:
        write_plan(result, output)
    if fmt == "json":
        document = {**result.to_json(), "verdict": result.verdict}
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(
            plan_markdown(
                result, config_path=str(config_path), plan_path=str(output or "plan.json")
            )
        )
    else:
        out.print(plan_table(result))
        if output is not None:
            out.print(f"written to {output}; approve with --approve {result.digest}")
    if result.verdict == PlanVerdict.REFUSED:
        err.print(refused(result), markup=False)
        return EXIT_REFUSED
    if result.verdict == PlanVerdict.NEEDS_ACCEPTANCE:
        err.print(unaccepted(result), markup=False)
        return EXIT_NEEDS_ACCEPTANCE
    return 0
