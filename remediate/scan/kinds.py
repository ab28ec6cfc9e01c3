"""The finding kinds and their severities (README.md, "Finding kinds"), apart from the Spark
job that assigns them, so that code which only reads findings does not import Spark.

`FindingKind` is a StrEnum: a member is its name as a string, so findings serialise, format
and compare exactly as the plain strings the JSON contracts carry.
"""

from __future__ import annotations

from enum import StrEnum


class FindingKind(StrEnum):
    OK = "OK"
    TOPIC_ID_MISMATCH = "TOPIC_ID_MISMATCH"
    TOPIC_ID_MISMATCH_OUT_OF_ISR = "TOPIC_ID_MISMATCH_OUT_OF_ISR"
    METADATA_MISSING = "METADATA_MISSING"
    METADATA_CORRUPT = "METADATA_CORRUPT"
    ZK_TOPIC_ID_MISSING = "ZK_TOPIC_ID_MISSING"
    REPLICA_DIR_MISSING = "REPLICA_DIR_MISSING"
    ORPHAN_DIR = "ORPHAN_DIR"
    BROKER_UNREACHABLE = "BROKER_UNREACHABLE"
    PARTITION_OFFLINE = "PARTITION_OFFLINE"
    # Per partition: ZooKeeper's leader holds a stale id and rejected ZooKeeper's current
    # leader epoch, so it is fenced although ZooKeeper shows a leader and an ISR.
    LEADER_FENCED_BY_STALE_ID = "LEADER_FENCED_BY_STALE_ID"
    # Per cluster: a ZooKeeper-to-KRaft migration has begun (`/migration`, or a KRaft
    # controller active); nothing may change the cluster while it runs or after.
    KRAFT_MIGRATION = "KRAFT_MIGRATION"


class Severity(StrEnum):
    """How bad a finding is; the worst one is the scan's status (INFO never is)."""

    OK = "OK"
    INFO = "INFO"
    WARNING = "WARNING"
    UNKNOWN = "UNKNOWN"
    CRITICAL = "CRITICAL"


SEVERITY: dict[FindingKind, Severity] = {
    FindingKind.OK: Severity.OK,
    FindingKind.TOPIC_ID_MISMATCH: Severity.WARNING,
    FindingKind.TOPIC_ID_MISMATCH_OUT_OF_ISR: Severity.CRITICAL,
    FindingKind.METADATA_MISSING: Severity.INFO,
    FindingKind.METADATA_CORRUPT: Severity.CRITICAL,
    FindingKind.ZK_TOPIC_ID_MISSING: Severity.WARNING,
    FindingKind.REPLICA_DIR_MISSING: Severity.WARNING,
    FindingKind.ORPHAN_DIR: Severity.INFO,
    FindingKind.BROKER_UNREACHABLE: Severity.UNKNOWN,
    FindingKind.PARTITION_OFFLINE: Severity.CRITICAL,
    FindingKind.LEADER_FENCED_BY_STALE_ID: Severity.CRITICAL,
    FindingKind.KRAFT_MIGRATION: Severity.WARNING,
}
# The replica's file holds an id other than ZooKeeper's.
MISMATCH_KINDS = frozenset(
    {FindingKind.TOPIC_ID_MISMATCH, FindingKind.TOPIC_ID_MISMATCH_OUT_OF_ISR}
)
# An assigned replica with a directory on an inspected broker: one finding each.
REPLICA_KINDS = frozenset(
    {
        FindingKind.OK,
        *MISMATCH_KINDS,
        FindingKind.METADATA_MISSING,
        FindingKind.METADATA_CORRUPT,
    }
)
# Every assigned replica on an inspected broker: the replicas a scan checked.
CHECKED_KINDS = REPLICA_KINDS | {FindingKind.REPLICA_DIR_MISSING}
# The replica's file holds a readable id.
ID_KINDS = frozenset({FindingKind.OK, *MISMATCH_KINDS})
