"""The `remediate` command line. Only this package maps errors to exit codes."""

from __future__ import annotations

import sys

import click

from remediate import __version__
from remediate.cli.apply import EXIT_HALTED, EXIT_REFUSED, apply, fix, resume, rollback, status
from remediate.cli.plan import plan
from remediate.cli.sandbox import sandbox
from remediate.cli.scan import check, scan
from remediate.errors import HaltedError, RefusedError, RemediationError

# Exit codes (design.md): 0 ok, 1 warning, 2 critical, 3 unknown, 4 refused, 5 halted.
EXIT_UNKNOWN = 3


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="remediate")
def cli() -> None:
    """Find and repair topic-id inconsistency on ZooKeeper-mode Kafka clusters."""


cli.add_command(sandbox)
cli.add_command(scan)
cli.add_command(check)
cli.add_command(plan)
cli.add_command(apply)
cli.add_command(fix)
cli.add_command(resume)
cli.add_command(status)
cli.add_command(rollback)


def main() -> None:
    try:
        result = cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except RefusedError as exc:
        click.echo(f"refused: {exc}", err=True)
        sys.exit(EXIT_REFUSED)
    except HaltedError as exc:
        click.echo(f"halted: {exc}", err=True)
        sys.exit(EXIT_HALTED)
    except RemediationError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_UNKNOWN)
    sys.exit(result if isinstance(result, int) else 0)
