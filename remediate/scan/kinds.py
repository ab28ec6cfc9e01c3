"""The finding kinds and their severities (design.md), apart from the Spark job that assigns
them, so that code which only reads findings does not import Spark."""

from __future__ import annotations

SEVERITY: dict[str, str] = {
    "OK": "OK",
    "TOPIC_ID_MISMATCH": "WARNING",
    "TOPIC_ID_MISMATCH_OUT_OF_ISR": "CRITICAL",
    "METADATA_MISSING": "INFO",
    "METADATA_CORRUPT": "CRITICAL",
    "ZK_TOPIC_ID_MISSING": "WARNING",
    "REPLICA_DIR_MISSING": "WARNING",
    "ORPHAN_DIR": "INFO",
    "BROKER_UNREACHABLE": "UNKNOWN",
    "PARTITION_OFFLINE": "CRITICAL",
}
MISMATCH_KINDS: tuple[str, ...] = ("TOPIC_ID_MISMATCH", "TOPIC_ID_MISMATCH_OUT_OF_ISR")
