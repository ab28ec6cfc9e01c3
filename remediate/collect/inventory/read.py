"""An inventory command's output into snapshot rows, the one way the collector reads it: the
common output (every directory a Kafka partition) in bulk (bulk.py), anything else through the
general parser (parser.py, then rows.py). Both give the same rows."""

from __future__ import annotations

from remediate.collect.inventory.bulk import read_rows
from remediate.collect.inventory.model import StateChangeTail
from remediate.collect.inventory.parser import parse_inventory
from remediate.collect.inventory.rows import LogDirRows, replica_rows
from remediate.collect.snapshot import ReplicaRow


def inventory_rows(
    output: str, *, source: str
) -> tuple[LogDirRows, list[ReplicaRow], StateChangeTail | None]:
    """(log_dirs rows, replicas rows, the state-change log's tail) from an inventory command's
    output; FormatError (naming `source` and the line) for an output that is not whole."""
    plain = read_rows(output)
    if plain is not None:
        return plain
    inventory = parse_inventory(output, source=source)
    log_dirs, replicas = replica_rows(inventory)
    return log_dirs, replicas, inventory.state_change
