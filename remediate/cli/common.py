"""What every command module shares: consoles, common options, progress display.

Command modules (apply, plan, scan, report, sandbox) import this and never one another;
`remediate.cli` assembles them.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import click
from rich.console import Console

from remediate.exit_codes import EXIT_UNKNOWN

# Output that goes to a file or a pipe ends up in on-call logs and tickets: there nothing is
# wrapped or cut (a backup path broken across two lines cannot be copied back). Wide enough
# for any table; a terminal keeps its own width.
UNWRAPPED_WIDTH = 10_000


def console(*, stderr: bool = False, highlight: bool = True) -> Console:
    """A console on stdout (or stderr) that wraps at the terminal's width, and not at all when
    the stream is not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, highlight=highlight, soft_wrap=not stderr)
    return Console(stderr=stderr, highlight=highlight, soft_wrap=True, width=UNWRAPPED_WIDTH)


out = console()
err = console(stderr=True, highlight=False)
# Status lines keep rich's highlighting (numbers, paths) that `err` leaves out of messages.
_status = console(stderr=True)

config_option = click.option(
    "-c",
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The cluster's cluster.yaml (docs/configuration.md).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
log_json_option = click.option(
    "--log-json", is_flag=True, help="Structured JSON log lines on stderr instead of progress."
)
master_option = click.option(
    "--spark-master", help="Spark master URL (default: cluster.yaml spark.master)."
)
ENGINES = ("spark", "duckdb")
F = TypeVar("F", bound=Callable[..., object])


def engine_option(default: str) -> Callable[[F], F]:
    """--engine: where the classification runs (the same rules on either)."""
    return click.option(
        "--engine",
        type=click.Choice(ENGINES),
        default=default,
        show_default=True,
        envvar="REMEDIATE_ENGINE",
        show_envvar=True,
        help="Classify on Spark (fleets, --spark-master) or on the embedded DuckDB engine (no"
        " JVM: seconds on one cluster). Both run the same rules. REMEDIATE_ENGINE sets it"
        " when the option is not given.",
    )


def master_needs_spark(spark_master: str | None, engine: str) -> None:
    """--spark-master names a Spark master: it means nothing to the embedded engine."""
    if spark_master is not None and engine != "spark":
        raise click.UsageError(f"--spark-master needs --engine spark (the engine is {engine})")


candidate_option = click.option(
    "--candidate",
    # plan/candidates.py's NAMES (not imported: `check` loads this module and stays light).
    type=click.Choice(["auto", "keep-zk-id", "restore-id", "move-keep-zk-id", "move-restore-id"]),
    default="auto",
    show_default=True,
    help="The repair to plan for topics whose replicas hold two ids: auto is the least harm"
    " the availability model predicts (the move-* repairs: Kafka 2.8 brokers with two log"
    " dirs or more, no restart).",
)
restore_only_option = click.option(
    "--restore-only",
    is_flag=True,
    help="Only the restore phase of restore-id: write the old id back and re-elect the"
    " controller, no restart (the roll is planned later).",
)


max_batch_size_option = click.option(
    "--max-batch-size",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Restart at most N brokers together (1: one at a time). Default: as many as the batch"
    " rule allows: every partition writable at that point keeps at least its"
    " min.insync.replicas in-sync replicas, and a replica that could lead it, outside the"
    " batch; the active controller alone and last.",
)


@contextmanager
def status_line(quiet: bool) -> Iterator[Callable[[str], None] | None]:
    """A transient status line on stderr showing the latest progress message; None if quiet."""
    if quiet:
        yield None
        return
    with _status.status("") as status:
        yield status.update


def progress_lines(quiet: bool) -> Callable[[str], None]:
    """Progress as timestamped lines on stderr; nothing if quiet (--json, --log-json)."""
    if quiet:
        return lambda _message: None
    return lambda message: err.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {message}")


def probe_unknown(why: str, *, as_json: bool, prefix: str = "") -> int:
    """What a monitoring command (check, doctor) prints when it could not look at all: the
    error on stderr, and on stdout its one line (`UNKNOWN: <why>`, what Nagios shows) or one
    JSON document whose status is UNKNOWN; exit 3."""
    click.echo(f"error: {why}", err=True)
    if as_json:
        document = {"status": "UNKNOWN", "exit_code": EXIT_UNKNOWN, "error": why}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        click.echo(f"{prefix}UNKNOWN: {' '.join(why.split())}")
    return EXIT_UNKNOWN
