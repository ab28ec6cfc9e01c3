"""`remediate scan` and `remediate check`: collect, classify (Spark or DuckDB), report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table

from remediate.cli.common import (
    engine_option,
    master_needs_spark,
    master_option,
    out,
    probe_unknown,
    status_line,
)
from remediate.config import load_cluster_config
from remediate.errors import RemediationError
from remediate.execute import failpoints
from remediate.preflight import EVENT as KRAFT_MIGRATION
from remediate.scan.findings import SEVERITY_RANK, ScanReport
from remediate.scan.kinds import FindingKind, Severity
from remediate.scan.pipeline import collect_and_scan, scan_snapshots

# scan and check may run without cluster.yaml (--snapshot), so -c is optional here.
config_option = click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="cluster.yaml",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
)

SEVERITY_STYLE = {
    Severity.CRITICAL: "bold red",
    Severity.UNKNOWN: "magenta",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
    Severity.OK: "green",
}


def render(report: ScanReport) -> None:
    style = SEVERITY_STYLE.get(report.status, "")
    out.print(f"[{style}]{report.status}[/{style}]  {report.summary_line()}")
    for problem in report.problems:
        out.print(f"[magenta]problem:[/magenta] {problem}", highlight=False)
    general = [f for f in report.findings if f.broker is None and f.kind != FindingKind.OK]
    if general:
        table = Table("severity", "kind", "topic", "partition", "detail", title="cluster-wide")
        for finding in sorted(general, key=lambda f: f.sort_key()):
            table.add_row(
                finding.severity,
                finding.kind,
                finding.topic or "",
                _num(finding.partition),
                finding.detail or "",
            )
        out.print(table)
    for broker in report.brokers:
        findings = sorted(
            (
                f
                for f in report.findings
                if f.broker == broker.id
                and f.cluster == broker.cluster
                and f.kind != FindingKind.OK
            ),
            key=lambda f: f.sort_key(),
        )
        flags = [
            name
            for name, on in (("controller", broker.is_controller), ("needs fix", broker.needs_fix))
            if on
        ]
        if not broker.registered:
            flags.append("not registered")
        title = f"broker {broker.id}" + (f" ({', '.join(flags)})" if flags else "")
        if len(report.clusters) > 1:
            title = f"{broker.cluster} {title}"
        ok = broker.counts.get(FindingKind.OK, 0)
        if not findings:
            out.print(f"[green]{title}: {ok} replicas OK[/green]")
            continue
        table = Table(
            "severity",
            "kind",
            "partition",
            "file id",
            "zk id",
            "isr",
            "detail",
            title=f"{title}: {ok} OK",
        )
        for finding in findings:
            partition = (
                f"{finding.topic}-{finding.partition}" if finding.topic else (finding.dir or "")
            )
            table.add_row(
                f"[{SEVERITY_STYLE[finding.severity]}]{finding.severity}[/]",
                finding.kind,
                partition,
                finding.file_topic_id or "",
                finding.zk_topic_id or "",
                "" if finding.in_isr is None else ("in" if finding.in_isr else "OUT"),
                finding.detail or "",
            )
        out.print(table)


def _num(value: int | None) -> str:
    return "" if value is None else str(value)


@click.command()
@config_option
@click.option(
    "--snapshot",
    "snapshots",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Scan existing snapshot directories instead of collecting (repeat for a fleet).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the snapshot and write findings.jsonl and summary.json here.",
)
@master_option
@engine_option("spark")
@click.option("--all", "include_ok", is_flag=True, help="Include OK replicas in --json output.")
@json_option
def scan(
    config_path: Path | None,
    snapshots: tuple[Path, ...],
    out_dir: Path | None,
    spark_master: str | None,
    engine: str,
    include_ok: bool,
    as_json: bool,
) -> int:
    """Find every replica whose partition.metadata disagrees with ZooKeeper.

    Exit codes: 0 healthy, 1 warning, 2 critical, 3 unknown (any error of the scan itself).
    """
    failpoints.hit("command:scan")
    master_needs_spark(spark_master, engine)
    if snapshots:
        report = scan_snapshots(
            snapshots, out_dir=out_dir, master=spark_master, include_ok=include_ok, engine=engine
        )
    else:
        if config_path is None:
            raise click.UsageError("give -c cluster.yaml (or --snapshot DIR)")
        config = load_cluster_config(config_path)
        with status_line(quiet=as_json) as progress:
            report = collect_and_scan(
                config,
                out_dir=out_dir,
                master=spark_master,
                include_ok=include_ok,
                progress=progress,
                engine=engine,
            ).report
    if as_json:
        sys.stdout.write(json.dumps(report.to_json(include_ok=include_ok), indent=2) + "\n")
    else:
        render(report)
    return report.exit_code


@click.command()
@config_option
@master_option
@engine_option("duckdb")
@click.option(
    "--before",
    type=click.Choice([KRAFT_MIGRATION]),
    help="The event to check for: kraft-migration names each hazard a ZooKeeper-to-KRaft"
    " migration would meet (exit 0 only when it is safe for topic ids, 2 with a hazard).",
)
@json_option
def check(
    config_path: Path | None,
    spark_master: str | None,
    engine: str,
    before: str | None,
    as_json: bool,
) -> int:
    """Monitoring form of scan: one line and Nagios exit codes.

    0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (any error of the check itself: its one line says
    `UNKNOWN: <why>`, with --json a document whose status is UNKNOWN). ZooKeeper or a broker
    out of reach ends it within cluster.yaml's connect and session timeouts.
    """
    try:
        return _check(config_path, spark_master, engine, before, as_json)
    except (RemediationError, click.UsageError) as exc:
        # A probe always says something: Nagios shows the first line of stdout, a JSON
        # consumer reads one document.
        why = exc.format_message() if isinstance(exc, click.UsageError) else str(exc)
        return probe_unknown(why, as_json=as_json)


def _check(
    config_path: Path | None,
    spark_master: str | None,
    engine: str,
    before: str | None,
    as_json: bool,
) -> int:
    failpoints.hit("command:check")
    if config_path is None:
        raise click.UsageError("give -c cluster.yaml")
    master_needs_spark(spark_master, engine)
    config = load_cluster_config(config_path)
    if before == KRAFT_MIGRATION:
        from remediate.workflows import kraft_migration_preflight  # noqa: PLC0415

        preflight = kraft_migration_preflight(config, spark_master=spark_master, engine=engine)
        if as_json:
            sys.stdout.write(json.dumps(preflight.to_json(), indent=2) + "\n")
        else:
            for line in preflight.lines():
                click.echo(line)
        return preflight.exit_code
    report = collect_and_scan(config, master=spark_master, engine=engine).report
    if as_json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        click.echo(report.summary_line())
    return report.exit_code


@click.command("prepare-spark")
@click.option("--force", is_flag=True, help="Build it again even if one exists.")
def prepare_spark(force: bool) -> int:
    """Build Spark's class-data archive, so that scans on Spark start fast.

    Once per Java and PySpark install (make setup runs it); half a minute to a minute. A
    scan without one runs the same, only slower to start.
    """
    from remediate.scan import archive_build  # noqa: PLC0415
    from remediate.scan.session import DRIVER_JAVA_OPTIONS  # noqa: PLC0415

    def say(message: str) -> None:
        click.echo(message, err=True)

    built = archive_build.build(DRIVER_JAVA_OPTIONS, progress=say, force=force)
    click.echo(f"Spark class-data archive: {built}")
    return 0


__all__ = ["SEVERITY_RANK", "check", "prepare_spark", "scan"]
