"""`remediate apply`, `fix`, `resume`, `status` and `rollback`: the only commands that change
a cluster, and the ones that show what a run did."""

from __future__ import annotations

import getpass
import json
import os
import socket
import sys
from pathlib import Path

import click
from rich.table import Table

from remediate import workflows
from remediate.cli.common import (
    candidate_option,
    config_option,
    engine_option,
    err,
    json_option,
    log_json_option,
    master_needs_spark,
    master_option,
    max_batch_size_option,
    out,
    progress_lines,
    restore_only_option,
    status_line,
)
from remediate.config import load_cluster_config
from remediate.execute import interrupt
from remediate.execute.executor import RunOutcome
from remediate.execute.journal import RunStatus, replay
from remediate.execute.journal_mirror import TRUST_CHOICES
from remediate.execute.locked import (
    apply_plan,
    load_approved_plan,
    read_journal,
    resume_run,
    rollback_run,
)
from remediate.exit_codes import EXIT_HALTED
from remediate.logs import configure_logging
from remediate.plan.render import plan_table
from remediate.workflows import REPAIR_PLAYBOOK, build_plan, write_plan


def _identity() -> str:
    """Who approved the run: under sudo, the person who ran sudo, not root."""
    user = os.environ.get("SUDO_USER")
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _write_report(journal_dir: Path, run_id: str) -> str | None:
    """The run's HTML report beside its journal; its path, or None if it could not be made.

    A report that fails to render must not hide the run's own result, so its error is shown
    and the command goes on.
    """
    # Imported here: the report brings in matplotlib, which apply itself does not need.
    from remediate.report.files import write_html_report  # noqa: PLC0415

    try:
        return str(write_html_report(journal_dir, run_id))
    except Exception as exc:  # any rendering failure: the run itself is over either way
        err.print(f"report: not written: {exc!r}", markup=False)
        return None


def _emit(outcome: RunOutcome, as_json: bool, journal_dir: Path) -> int:
    report_path = _write_report(journal_dir, outcome.run_id)
    if as_json:
        document = {**outcome.to_json(), "report": report_path}
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    elif outcome.status == RunStatus.COMPLETED:
        err.print(f"[green]run {outcome.run_id} completed[/green]")
    else:
        err.print(f"[bold red]run {outcome.run_id} halted:[/bold red] {outcome.error}")
        err.print(
            f"the cluster was left as the journal says ({journal_dir / outcome.run_id});"
            " fix the cause, then `remediate resume`"
        )
    if report_path is not None and not as_json:
        # One unwrapped line, taken literally: it is copied, or read by scripts.
        err.print(f"report: {report_path}", soft_wrap=True, markup=False)
    return 0 if outcome.status == RunStatus.COMPLETED else EXIT_HALTED


@click.command()
@config_option
@click.option(
    "--plan",
    "plan_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The plan JSON that `plan -o` wrote and someone reviewed.",
)
@click.option("--approve", help="The digest of the plan you reviewed.")
@json_option
@log_json_option
def apply(
    config_path: Path, plan_path: Path, approve: str | None, as_json: bool, log_json: bool
) -> int:
    """Carry out exactly the approved plan. Exit 0 done, 4 refused, 5 halted (SIGINT or
    SIGTERM too: the action in flight is finished first)."""
    interrupt.install()
    configure_logging(*([sys.stderr] if log_json else []))
    config = load_cluster_config(config_path)
    plan = load_approved_plan(plan_path, approve)
    outcome = apply_plan(
        config,
        plan,
        approved_by=_identity(),
        log_json=log_json,
        progress=progress_lines(quiet=log_json or as_json),
        kafka_admin=workflows.admin_factory(config),
    )
    return _emit(outcome, as_json, Path(config.journal_dir))


@click.command()
@config_option
@click.option("--yes", is_flag=True, help="Apply the plan (without it: a dry run).")
@click.option(
    "--approve",
    "approve",
    metavar="DIGEST",
    help="The digest a dry run printed, once its plan was reviewed: the plan made now is"
    " applied only if it is that very plan (else exit 4, nothing changed); approving it"
    " accepts the partitions it names as made unavailable.",
)
@click.option(
    "--accept-unavailable",
    is_flag=True,
    help="Go ahead although the plan makes partitions unavailable that are available now"
    " (the plan names them and for which steps).",
)
@candidate_option
@restore_only_option
@max_batch_size_option
@master_option
@engine_option("spark")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the plan here.",
)
@json_option
@log_json_option
def fix(
    config_path: Path,
    yes: bool,
    approve: str | None,
    accept_unavailable: bool,
    candidate: str,
    restore_only: bool,
    max_batch_size: int | None,
    spark_master: str | None,
    engine: str,
    output: Path | None,
    as_json: bool,
    log_json: bool,
) -> int:
    """The runbook step: scan, plan, print the plan, apply it, verify. Without --yes: dry run.

    Exit 0 healed (a dry run: ready), 1-3 the check after the run, 4 refused or not the
    plan approved, 5 halted, 6 the plan makes partitions unavailable that work now and
    nobody accepted it. SIGINT or SIGTERM during the run: the action in flight is finished,
    a broker the run stopped is started again, exit 5.
    """
    master_needs_spark(spark_master, engine)
    interrupt.install()
    configure_logging(*([sys.stderr] if log_json else []))
    config = load_cluster_config(config_path)
    with status_line(quiet=as_json) as scanning:
        plan = build_plan(
            config,
            playbook_name=REPAIR_PLAYBOOK,
            spark_master=spark_master,
            engine=engine,
            progress=scanning,
            candidate=candidate,
            restore_only=restore_only,
            max_batch_size=max_batch_size,
        )
    if output is not None:
        write_plan(plan, output)
    if not as_json:
        err.print(plan_table(plan))
    journal_dir = Path(config.journal_dir)
    result = workflows.fix(
        config,
        plan,
        apply=yes,
        accept_unavailable=accept_unavailable,
        approved_digest=approve,
        approved_by=f"{_identity()} (fix --yes{' --approve' if approve else ''})",
        spark_master=spark_master,
        engine=engine,
        log_json=log_json,
        progress=progress_lines(quiet=log_json or as_json),
        write_report=lambda run_id: _write_report(journal_dir, run_id),
    )
    document = {**result.document, "message": result.message, "exit_code": result.code}
    if as_json:
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    else:
        err.print(result.message)
        if document.get("report"):
            err.print(f"report: {document['report']}", soft_wrap=True, markup=False)
    return result.code


trust_journal_option = click.option(
    "--trust-journal",
    type=click.Choice(TRUST_CHOICES),
    help="Where this host's journal and ZooKeeper's copy disagree (refused otherwise): the"
    " copy to go by, after comparing them. resume and rollback journal the choice and set"
    " the other copy aside (a local one kept as journal.jsonl.distrusted).",
)


@click.command()
@config_option
@click.option("--run", "run_id", help="The run to resume (default: the latest).")
@trust_journal_option
@json_option
@log_json_option
def resume(
    config_path: Path,
    run_id: str | None,
    trust_journal: str | None,
    as_json: bool,
    log_json: bool,
) -> int:
    """Continue a halted or crashed run; completed actions are not repeated. The journal is
    this host's, or ZooKeeper's copy when that is ahead (the run moved hosts) or the only one."""
    interrupt.install()
    configure_logging(*([sys.stderr] if log_json else []))
    config = load_cluster_config(config_path)
    outcome = resume_run(
        config,
        run_id,
        resumed_by=_identity(),
        log_json=log_json,
        progress=progress_lines(quiet=log_json or as_json),
        kafka_admin=workflows.admin_factory(config),
        trust_journal=trust_journal,
    )
    return _emit(outcome, as_json, Path(config.journal_dir))


@click.command()
@config_option
@click.option("--run", "run_id", help="The run to show (default: the latest).")
@trust_journal_option
@json_option
def status(config_path: Path, run_id: str | None, trust_journal: str | None, as_json: bool) -> int:
    """Show a run's progress from its journal (this host's, or ZooKeeper's copy when that is
    ahead or the only one)."""
    config = load_cluster_config(config_path)
    chosen, records, runs, source = read_journal(
        config,
        run_id,
        progress=lambda message: err.print(message, markup=False),
        trust_journal=trust_journal,
    )
    progress = replay(records)
    if as_json:
        document = {
            "run_id": chosen,
            "journal": source,
            "status": progress.status,
            "in_flight": progress.in_flight,
            "last_error": progress.last_error,
            "steps": [
                {
                    "step": key,
                    "started": p.started,
                    "finished": p.finished,
                    "failed": p.failed,
                    "result": dict(p.result),
                }
                for key, p in progress.steps.items()
            ],
            "runs": runs,
        }
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")
        return 0
    table = Table("step", "state", "result")
    for key, p in progress.steps.items():
        state = (
            "done"
            if p.finished
            else ("FAILED" if p.failed else ("undone" if not p.started else "in flight"))
        )
        table.add_row(key, state, json.dumps(dict(p.result), default=str)[:100])
    out.print(f"run {chosen}: {progress.status} (journal: {source})")
    out.print(table)
    if progress.last_error:
        out.print(f"last error: {progress.last_error}")
    return 0


@click.command()
@config_option
@click.option("--run", "run_id", required=True, help="The run whose backups to restore.")
@click.option("--broker", "broker_id", type=int, help="Only this broker.")
@trust_journal_option
@json_option
@log_json_option
def rollback(
    config_path: Path,
    run_id: str,
    broker_id: int | None,
    trust_journal: str | None,
    as_json: bool,
    log_json: bool,
) -> int:
    """Put back the files a run deleted: stop, restore (path-checked), start, gate."""
    configure_logging(*([sys.stderr] if log_json else []))
    interrupt.install()
    config = load_cluster_config(config_path)
    restored = rollback_run(
        config,
        run_id,
        broker=broker_id,
        log_json=log_json,
        progress=progress_lines(quiet=log_json or as_json),
        trust_journal=trust_journal,
    )
    if as_json:
        sys.stdout.write(json.dumps({"run_id": run_id, "restored": restored}, indent=2) + "\n")
    else:
        for broker, paths in restored.items():
            err.print(f"broker {broker}: restored {len(paths)} file(s)")
    return 0


__all__ = ["apply", "fix", "resume", "rollback", "status"]
