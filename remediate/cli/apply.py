"""`remediate apply`, `fix`, `resume`, `status` and `rollback`: the only commands that change
a cluster, and the ones that show what a run did."""

from __future__ import annotations

import getpass
import json
import os
import socket
import sys
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, TextIO

import click
import structlog
from rich.console import Console
from rich.table import Table

from remediate.cli import EXIT_HALTED, EXIT_REFUSED
from remediate.cli.plan import build_plan, out, write_plan
from remediate.cli.scan import collect_and_scan
from remediate.collect.run import collect_brokers, transports, zk_settings
from remediate.collect.zookeeper import read_cluster_state, session
from remediate.config import ClusterConfig, load_cluster_config
from remediate.errors import RefusedError
from remediate.execute.drift import differences, observed_files
from remediate.execute.journal import Journal, latest_run, list_runs, new_run_id, replay
from remediate.execute.lock import RunLock
from remediate.execute.runner import Executor, RunOutcome, Services
from remediate.plan import Plan, plan_from_json
from remediate.playbook import Timeouts, load_playbook
from remediate.ports import ZooKeeper
from remediate.render import plan_table

err = Console(stderr=True, highlight=False)

config_option = click.option(
    "-c", "--config", "config_path", required=True, type=click.Path(dir_okay=False, path_type=Path)
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
log_json_option = click.option(
    "--log-json", is_flag=True, help="Structured JSON log lines on stderr instead of progress."
)


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def configure_logging(*sinks: TextIO) -> None:
    """structlog JSON lines to `sinks` (none: dropped), never to stdout, which --json owns."""

    def write(_: Any, __: str, event: MutableMapping[str, Any]) -> str:
        line = json.dumps(event, sort_keys=True, default=str)
        for sink in sinks:
            sink.write(line + "\n")
            sink.flush()
        raise structlog.DropEvent

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            write,
        ],
        cache_logger_on_first_use=False,
    )


def _logger(config: ClusterConfig, run_id: str, log_json: bool, journal_dir: Path) -> Any:
    """structlog JSON lines: always to the run's log.jsonl, and to stderr with --log-json."""
    path = journal_dir / run_id / "log.jsonl"
    handle = path.open("a", encoding="utf-8")
    configure_logging(handle, *([sys.stderr] if log_json else []))
    return structlog.get_logger().bind(run_id=run_id, cluster=config.cluster)


def _progress(log_json: bool, as_json: bool) -> Callable[[str], None]:
    if log_json or as_json:
        return lambda _message: None
    return lambda message: err.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {message}")


def load_plan_file(path: Path) -> tuple[Plan, dict[str, Any]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RefusedError(f"{path}: cannot read the plan: {exc.strerror}") from exc
    except ValueError as exc:
        raise RefusedError(f"{path}: not a plan: invalid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise RefusedError(f"{path}: not a plan: expected a JSON object")
    try:
        return plan_from_json(document), document
    except (KeyError, TypeError, ValueError) as exc:
        raise RefusedError(f"{path}: not a valid plan: field {exc} missing or malformed") from exc


def check_approval(plan: Plan, document: dict[str, Any], approve: str | None) -> None:
    if not approve:
        raise RefusedError(
            f"not approved: review the plan, then pass --approve {plan.digest}"
            " (its digest); nothing was changed"
        )
    if document.get("digest") != plan.digest:
        raise RefusedError(
            "the plan file was edited after it was made: its digest field does not match its"
            " content; plan again; nothing was changed"
        )
    if approve.strip().lower() != plan.digest:
        raise RefusedError(
            f"--approve {approve} is not this plan's digest ({plan.digest}); nothing was changed"
        )
    if plan.refused:
        raise RefusedError(
            "the plan is refused (" + "; ".join(plan.refusals) + "); nothing was changed"
        )


def check_drift(config: ClusterConfig, zk: ZooKeeper, plan: Plan) -> None:
    if plan.cluster != config.cluster:
        raise RefusedError(
            f"the plan is for cluster {plan.cluster}, the configuration is {config.cluster}"
        )
    state = read_cluster_state(zk)
    brokers = [b for b in plan.fingerprint.file_brokers() if b in config.broker_ids]
    reports = collect_brokers(config, brokers, transport_for=transports(config)) if brokers else ()
    rows = {r.broker_id: r.replicas for r in reports if r.reachable}
    unreachable = {r.broker_id: r.error or "unreachable" for r in reports if not r.reachable}
    files = observed_files(plan.fingerprint.files, rows)
    diffs = differences(plan.fingerprint, state, files, unreachable=unreachable)
    if diffs:
        raise RefusedError(
            "the cluster changed since the plan was made; plan again. Differences:\n  "
            + "\n  ".join(diffs)
        )


def _services(
    config: ClusterConfig, zk: ZooKeeper, plan: Plan, log: Any, progress: Any
) -> Services:
    # The gates the plan was approved with; a plan without them gets its playbooks' own.
    gates = {name: Timeouts.model_validate(values) for name, values in plan.gates.items()}
    for name in {plan.playbook, *(step.playbook for step in plan.restores)} - set(gates):
        gates[name] = load_playbook(name).gates

    return Services(
        config=config,
        zk=zk,
        transport_for=transports(config),
        clock=SystemClock(),
        gates=gates,
        log=log,
        progress=progress,
    )


def _identity() -> str:
    """Who approved the run: under sudo, the person who ran sudo, not root."""
    user = os.environ.get("SUDO_USER")
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
    return f"{user}@{socket.gethostname()}"


def execute(
    config: ClusterConfig,
    plan: Plan,
    *,
    approved_by: str,
    log_json: bool,
    as_json: bool,
    lock_wait: float = 1.0,
) -> RunOutcome:
    """Lock, check drift, journal, run. RefusedError before anything changed."""
    clock = SystemClock()
    run_id = new_run_id(clock.now())
    root = Path(config.journal_dir)
    with session(zk_settings(config)) as zk:
        lock = RunLock(zk, config.cluster, run_id=run_id)
        lock.acquire(timeout=lock_wait)
        try:
            check_drift(config, zk, plan)
            journal = Journal.create(root, run_id, plan.to_json(), now=clock.now())
            journal.append("approved", now=clock.now(), digest=plan.digest, approved_by=approved_by)
            log = _logger(config, run_id, log_json, root)
            progress = _progress(log_json, as_json)
            progress(f"run {run_id}: {len(plan.steps)} step(s), journal {journal.path}")
            services = _services(config, zk, plan, log, progress)
            return Executor(plan, services, journal, lock).run()
        finally:
            lock.release()


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
    elif outcome.status == "completed":
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
    return 0 if outcome.status == "completed" else EXIT_HALTED


@click.command()
@config_option
@click.option("--plan", "plan_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--approve", help="The digest of the plan you reviewed.")
@json_option
@log_json_option
def apply(
    config_path: Path, plan_path: Path, approve: str | None, as_json: bool, log_json: bool
) -> int:
    """Carry out exactly the approved plan. Exit 0 done, 4 refused, 5 halted."""
    configure_logging(*([sys.stderr] if log_json else []))
    config = load_cluster_config(config_path)
    plan, document = load_plan_file(plan_path)
    check_approval(plan, document, approve)
    outcome = execute(config, plan, approved_by=_identity(), log_json=log_json, as_json=as_json)
    return _emit(outcome, as_json, Path(config.journal_dir))


@click.command()
@config_option
@click.option("--yes", is_flag=True, help="Apply the plan (without it: a dry run).")
@click.option("--spark-master", help="Spark master URL (default: cluster.yaml spark.master).")
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
    spark_master: str | None,
    output: Path | None,
    as_json: bool,
    log_json: bool,
) -> int:
    """The runbook step: scan, plan, print the plan, apply it, verify. Without --yes: dry run.

    Exit 0 healed, 1-3 the check after the run, 4 refused, 5 halted.
    """
    configure_logging(*([sys.stderr] if log_json else []))
    config = load_cluster_config(config_path)
    plan = build_plan(
        config_path,
        playbook_name="topicid-mismatch",
        allow_unsafe=False,
        include_topics=(),
        spark_master=spark_master,
        quiet=as_json,
    )
    if output is not None:
        write_plan(plan, output)
    if not as_json:
        err.print(plan_table(plan))
    result: dict[str, Any] = {"plan": plan.to_json(), "applied": False, "report": None}
    if plan.refused:
        return _fix_exit(result, as_json, EXIT_REFUSED, "the plan is refused; nothing was changed")
    if not yes:
        return _fix_exit(result, as_json, 0, "dry run: nothing was changed; add --yes to apply")
    journal_dir = Path(config.journal_dir)
    run_id: str | None = None
    if not plan.steps:
        message = "nothing to repair"
    else:
        outcome = execute(
            config,
            plan,
            approved_by=f"{_identity()} (fix --yes)",
            log_json=log_json,
            as_json=as_json,
        )
        run_id = outcome.run_id
        result.update(applied=True, run=outcome.to_json())
        if outcome.status != "completed":
            result["report"] = _write_report(journal_dir, run_id)
            return _fix_exit(result, as_json, EXIT_HALTED, f"halted: {outcome.error}")
        message = f"run {outcome.run_id} completed"
    report = collect_and_scan(config, out_dir=None, master=spark_master, quiet=True)
    result["check"] = {"status": report.status, "summary": report.summary_line()}
    if run_id is not None:
        # The findings after the run belong in its record (and its report) too.
        Journal.open(journal_dir, run_id).append(
            "checked",
            now=time.time(),
            status=report.status,
            summary=report.summary_line(),
            counts=dict(sorted(report.counts().items())),
        )
        result["report"] = _write_report(journal_dir, run_id)
    return _fix_exit(
        result, as_json, report.exit_code, f"{message}; check: {report.summary_line()}"
    )


def _fix_exit(result: dict[str, Any], as_json: bool, code: int, message: str) -> int:
    result["message"] = message
    result["exit_code"] = code
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    else:
        err.print(message)
        if result.get("report"):
            err.print(f"report: {result['report']}", soft_wrap=True, markup=False)
    return code


def _run_id(config: ClusterConfig, run_id: str | None) -> str:
    root = Path(config.journal_dir)
    chosen = run_id or latest_run(root)
    if chosen is None:
        raise RefusedError(f"no run in {root}")
    return chosen


@click.command()
@config_option
@click.option("--run", "run_id", help="The run to resume (default: the latest).")
@json_option
@log_json_option
def resume(config_path: Path, run_id: str | None, as_json: bool, log_json: bool) -> int:
    """Continue a halted or crashed run; completed actions are not repeated."""
    configure_logging(*([sys.stderr] if log_json else []))
    config = load_cluster_config(config_path)
    chosen = _run_id(config, run_id)
    root = Path(config.journal_dir)
    journal = Journal.open(root, chosen)
    progress_now = replay(journal.records())
    if progress_now.status == "completed":
        raise RefusedError(f"run {chosen} already completed; nothing to resume")
    plan = plan_from_json(journal.plan())
    clock = SystemClock()
    with session(zk_settings(config)) as zk:
        lock = RunLock(zk, config.cluster, run_id=chosen)
        # A crashed run's lock goes with its ZooKeeper session: wait that long for it.
        lock.acquire(timeout=config.zookeeper.session_timeout_s + 5)
        try:
            journal.append("run-resumed", now=clock.now(), by=_identity())
            log = _logger(config, chosen, log_json, root)
            services = _services(config, zk, plan, log, _progress(log_json, as_json))
            outcome = Executor(plan, services, journal, lock).run()
        finally:
            lock.release()
    return _emit(outcome, as_json, root)


@click.command()
@config_option
@click.option("--run", "run_id", help="The run to show (default: the latest).")
@json_option
def status(config_path: Path, run_id: str | None, as_json: bool) -> int:
    """Show a run's progress from its journal."""
    config = load_cluster_config(config_path)
    root = Path(config.journal_dir)
    chosen = _run_id(config, run_id)
    journal = Journal.open(root, chosen)
    progress = replay(journal.records())
    if as_json:
        document = {
            "run_id": chosen,
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
            "runs": list_runs(root),
        }
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")
        return 0
    table = Table("step", "state", "result")
    for key, p in progress.steps.items():
        state = "done" if p.finished else ("FAILED" if p.failed else "in flight")
        table.add_row(key, state, json.dumps(dict(p.result), default=str)[:100])
    out.print(f"run {chosen}: {progress.status}")
    out.print(table)
    if progress.last_error:
        out.print(f"last error: {progress.last_error}")
    return 0


@click.command()
@config_option
@click.option("--run", "run_id", required=True, help="The run whose backups to restore.")
@click.option("--broker", "broker_id", type=int, help="Only this broker.")
@json_option
@log_json_option
def rollback(
    config_path: Path, run_id: str, broker_id: int | None, as_json: bool, log_json: bool
) -> int:
    """Put back the files a run deleted: stop, restore (path-checked), start, gate."""
    configure_logging(*([sys.stderr] if log_json else []))
    config = load_cluster_config(config_path)
    root = Path(config.journal_dir)
    journal = Journal.open(root, run_id)
    plan = plan_from_json(journal.plan())
    with session(zk_settings(config)) as zk:
        lock = RunLock(zk, config.cluster, run_id=run_id)
        lock.acquire(timeout=config.zookeeper.session_timeout_s + 5)
        try:
            log = _logger(config, run_id, log_json, root)
            services = _services(config, zk, plan, log, _progress(log_json, as_json))
            executor = Executor(plan, services, journal, lock)
            restored = executor.rollback(broker=broker_id)
        finally:
            lock.release()
    if as_json:
        sys.stdout.write(json.dumps({"run_id": run_id, "restored": restored}, indent=2) + "\n")
    else:
        for broker, paths in restored.items():
            err.print(f"broker {broker}: restored {len(paths)} file(s)")
    return 0


__all__ = ["apply", "fix", "resume", "rollback", "status"]
