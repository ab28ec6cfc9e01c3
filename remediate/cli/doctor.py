"""`remediate doctor`: whether everything a run will need is in place."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from remediate.cli.common import config_option, json_option, probe_unknown
from remediate.config import load_cluster_config
from remediate.errors import RemediationError


@click.command()
@config_option
@json_option
def doctor(config_path: Path | None, as_json: bool) -> int:
    """Check, read-only, that everything a run will need is in place.

    Per broker and per item, with what is missing and how to fix it: ZooKeeper (the session,
    the reads, the rights of the tool's identity on its lock, its journal and what a restore
    writes), Kafka's listener (each broker's release, the Cluster operations the moves need),
    each broker over ssh (the host key, sudo asked with `sudo -n -l`, the status command, the
    files and log dirs a run reads, the backup dir and its free space), and the journal dir.
    Nothing is stopped, started or written. Exit codes as check's: 0 OK, 1 WARNING (a run
    goes ahead with less), 2 CRITICAL (a run would be refused or halted), 3 UNKNOWN.
    """
    if config_path is None:
        raise click.UsageError("give -c cluster.yaml")
    try:
        config = load_cluster_config(config_path)
        from remediate.doctor.checks import diagnose  # noqa: PLC0415

        diagnosis = diagnose(config)
    except RemediationError as exc:
        return probe_unknown(str(exc), as_json=as_json, prefix="doctor ")
    if as_json:
        sys.stdout.write(json.dumps(diagnosis.to_json(), indent=2) + "\n")
    else:
        for line in diagnosis.lines():
            click.echo(line)
    return diagnosis.exit_code


__all__ = ["doctor"]
