"""A parsed inventory as snapshot rows: one ReplicaRow per directory found, one log_dirs row
per configured log dir. The general path; bulk.py gives the same rows without the parser."""

from __future__ import annotations

import os
from typing import Any

from remediate.collect.inventory.classify import classify_metadata
from remediate.collect.inventory.model import DirEntry, Inventory
from remediate.collect.snapshot import ReplicaRow, display_name

LogDirRows = list[dict[str, Any]]


def latest_epoch(tail: bytes | None) -> int | None:
    """The epoch of the last entry of a leader-epoch-checkpoint tail (None if unknown)."""
    if not tail:
        return None
    last = tail.rsplit(b"\n", 1)[-1].split()
    if len(last) != 2 or not last[0].isdigit():
        return None
    epoch = int(last[0])
    return epoch if epoch < 2**31 else None


def entry_row(entry: DirEntry) -> ReplicaRow:
    """The snapshot row of one directory found in a log dir."""
    finding = classify_metadata(entry)
    partition = entry.partition
    return ReplicaRow(
        log_dir=entry.log_dir,
        dir=display_name(entry.name),
        dir_hex=os.fsencode(entry.name).hex(),
        topic=partition.topic if partition else None,
        partition=partition.partition if partition else None,
        dir_kind=partition.kind if partition else "other",
        name_problem=entry.name_problem,
        metadata_state=finding.state,
        file_topic_id=finding.topic_id,
        metadata_problem=finding.problem,
        epoch_latest=latest_epoch(entry.epoch_checkpoint.content),
    )


def replica_rows(inventory: Inventory) -> tuple[LogDirRows, list[ReplicaRow]]:
    """(log_dirs rows, replicas rows) for the snapshot from one broker's inventory."""
    log_dirs: LogDirRows = []
    replicas: list[ReplicaRow] = []
    for log_dir in inventory.log_dirs:
        log_dirs.append({"log_dir": log_dir.path, "state": log_dir.state})
        replicas += [entry_row(entry) for entry in log_dir.entries]
    return log_dirs, replicas
