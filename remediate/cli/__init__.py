"""The `remediate` command line. Only this package maps errors to exit codes.

It assembles the command modules (apply, doctor, plan, scan, report, sandbox), which share
`remediate.cli.common` and import nothing from one another.
"""

from __future__ import annotations

import importlib
import sys
import traceback

import click

from remediate import __version__
from remediate.errors import HaltedError, RefusedError, RemediationError
from remediate.exit_codes import EXIT_HALTED, EXIT_REFUSED, EXIT_UNKNOWN

# Each command is imported when it is run, not when any command is: the sandbox's service
# commands (`sandbox broker stop|start`) run at every restart, and the executor waits on them.
COMMANDS = {
    "sandbox": "remediate.cli.sandbox:sandbox",
    "scan": "remediate.cli.scan:scan",
    "check": "remediate.cli.scan:check",
    "doctor": "remediate.cli.doctor:doctor",
    "plan": "remediate.cli.plan:plan",
    "apply": "remediate.cli.apply:apply",
    "fix": "remediate.cli.apply:fix",
    "resume": "remediate.cli.apply:resume",
    "status": "remediate.cli.apply:status",
    "rollback": "remediate.cli.apply:rollback",
    "report": "remediate.cli.report:report",
    "prepare-spark": "remediate.cli.scan:prepare_spark",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (click's documented pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, name = target.split(":")
        command = getattr(importlib.import_module(module), name)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="remediate")
def cli() -> None:
    """Find and repair topic-id inconsistency on ZooKeeper-mode Kafka clusters."""


# Monitoring reads these commands' exit codes as Nagios states: 1 and 2 are findings, so no
# failure of the command itself may exit with them.
MONITORING = frozenset({"check", "doctor", "scan"})


def main() -> None:
    monitoring = bool(MONITORING & set(sys.argv[1:2]))
    try:
        result = cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(EXIT_UNKNOWN)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_UNKNOWN if monitoring else exc.exit_code)
    except RefusedError as exc:
        click.echo(f"refused: {exc}", err=True)
        sys.exit(EXIT_REFUSED)
    except HaltedError as exc:
        click.echo(f"halted: {exc}", err=True)
        sys.exit(EXIT_HALTED)
    except RemediationError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_UNKNOWN)
    except Exception as exc:  # a bug: its traceback is the report, and the outcome is unknown
        traceback.print_exc()
        click.echo(f"unexpected error (exit {EXIT_UNKNOWN}, unknown): {exc!r}", err=True)
        sys.exit(EXIT_UNKNOWN)
    sys.exit(result if isinstance(result, int) else 0)
