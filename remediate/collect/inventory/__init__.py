"""The broker inventory fact: one shell command per broker (script.py), its record format
(grammar.py), one pure parser of its output (parser.py) into frozen records (model.py),
Kafka's verdicts on them (classify.py), and their snapshot rows (rows.py, or bulk.py for the
common output; read.py chooses). The names the rest of remediate uses are re-exported here."""

from remediate.collect.inventory.classify import MetadataFinding, classify_metadata
from remediate.collect.inventory.grammar import FORMAT_VERSION
from remediate.collect.inventory.model import (
    DirEntry,
    FileState,
    Inventory,
    LogDirInfo,
    StateChangeTail,
)
from remediate.collect.inventory.parser import parse_inventory
from remediate.collect.inventory.read import inventory_rows
from remediate.collect.inventory.rows import LogDirRows, replica_rows
from remediate.collect.inventory.script import DEFAULT_MAX_CONTENT_BYTES, inventory_command

__all__ = [
    "DEFAULT_MAX_CONTENT_BYTES",
    "FORMAT_VERSION",
    "DirEntry",
    "FileState",
    "Inventory",
    "LogDirInfo",
    "LogDirRows",
    "MetadataFinding",
    "StateChangeTail",
    "classify_metadata",
    "inventory_command",
    "inventory_rows",
    "parse_inventory",
    "replica_rows",
]
