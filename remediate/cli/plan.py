"""`remediate plan`: scan, then plan the repair as a reviewable, digest-stamped document."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import click
from rich.console import Console

from remediate.cli import EXIT_REFUSED
from remediate.collect.run import collect
from remediate.config import load_cluster_config
from remediate.plan import Plan, PlanOptions, make_plan
from remediate.playbook import load_playbook
from remediate.render import plan_markdown, plan_table
from remediate.scan.kinds import MISMATCH_KINDS
from remediate.scan.runner import run_scan

RESTORE_PLAYBOOK = "restore-zk-topic-id"
out = Console(soft_wrap=True, width=shutil.get_terminal_size((160, 24)).columns)
err = Console(stderr=True)


def build_plan(
    config_path: Path,
    *,
    playbook_name: str,
    allow_unsafe: bool,
    include_topics: tuple[str, ...],
    spark_master: str | None,
    quiet: bool,
) -> Plan:
    config = load_cluster_config(config_path)
    playbook = load_playbook(playbook_name)
    # The repair plans a restore, with no restart, wherever the replicas allow one.
    repairs = bool(MISMATCH_KINDS & set(playbook.applies_to))
    restore = load_playbook(RESTORE_PLAYBOOK) if repairs else None
    with tempfile.TemporaryDirectory(prefix="remediate-plan-") as tmp:
        snapshot = Path(tmp) / "snapshot"
        if quiet:
            collected = collect(config, snapshot)
        else:
            with err.status(f"collecting {config.cluster}") as status:
                collected = collect(
                    config, snapshot, progress=lambda m: status.update(f"collecting: {m}")
                )
        report, _ = run_scan(
            [snapshot],
            master=spark_master or config.spark.master,
            conf=config.spark.conf,
            include_ok=True,
        )
    return make_plan(
        cluster=config.cluster,
        state=collected.state,
        findings=report.findings,
        playbook=playbook,
        options=PlanOptions(
            allow_unsafe=allow_unsafe,
            include_topics=frozenset(include_topics),
            min_isr_default=config.min_insync_replicas_default,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        ),
        known_brokers=config.broker_ids,
        restore=restore,
    )


def write_plan(plan: Plan, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


@click.command()
@click.option(
    "-c", "--config", "config_path", required=True, type=click.Path(dir_okay=False, path_type=Path)
)
@click.option("--playbook", "playbook_name", default="topicid-mismatch", show_default=True)
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
@click.option("--spark-master", help="Spark master URL (default: cluster.yaml spark.master).")
def plan(
    config_path: Path,
    playbook_name: str,
    output: Path | None,
    fmt: str,
    as_json: bool,
    allow_unsafe: bool,
    include_topics: tuple[str, ...],
    spark_master: str | None,
) -> int:
    """Plan the repair without changing anything. Exit 0 ready, 4 refused."""
    if as_json:
        fmt = "json"
    result = build_plan(
        config_path,
        playbook_name=playbook_name,
        allow_unsafe=allow_unsafe,
        include_topics=include_topics,
        spark_master=spark_master,
        quiet=fmt == "json",
    )
    if output is not None:
        write_plan(result, output)
    if fmt == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n")
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
    return EXIT_REFUSED if result.refused else 0
