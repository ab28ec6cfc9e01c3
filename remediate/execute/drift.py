"""Drift: has the cluster changed since the plan was made? Pure.

The plan's fingerprint records the cluster id, the registered brokers, the controller epoch,
the znode versions of the topics it touches and the id in every partition.metadata it relies
on. apply reads the same things again and refuses on any difference, shown field by field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from remediate.plan import metadata_key
from remediate.state import ClusterState


def fingerprint_brokers(fingerprint: Mapping[str, Any]) -> list[int]:
    """The brokers whose files the fingerprint records."""
    return sorted({int(key.split(":", 1)[0]) for key in fingerprint.get("files", {})})


def observed_files(
    wanted: Iterable[str], replicas: Mapping[int, Iterable[Mapping[str, Any]]]
) -> dict[str, str | None]:
    """The ids now on disk for the fingerprint's keys (None: no readable file).

    `replicas` maps a broker to its inventory rows (log_dir, topic, partition, file_topic_id).
    """
    now: dict[str, str | None] = {}
    for broker, rows in replicas.items():
        for row in rows:
            if row.get("topic") is None or row.get("partition") is None:
                continue
            key = metadata_key(broker, row["log_dir"], row["topic"], int(row["partition"]))
            now[key] = row.get("file_topic_id")
    return {key: now.get(key) for key in wanted}


def differences(
    fingerprint: Mapping[str, Any],
    state: ClusterState,
    files_now: Mapping[str, str | None],
    *,
    unreachable: Mapping[int, str] | None = None,
) -> list[str]:
    """Every way the cluster differs from the fingerprint, one line each (empty: no drift)."""
    diffs: list[str] = []
    if fingerprint.get("cluster_id") != state.cluster_id:
        diffs.append(f"cluster id: plan {fingerprint.get('cluster_id')}, now {state.cluster_id}")
    planned_brokers = sorted(fingerprint.get("brokers", []))
    if planned_brokers != sorted(state.brokers):
        diffs.append(f"registered brokers: plan {planned_brokers}, now {sorted(state.brokers)}")
    if fingerprint.get("controller_epoch") != state.controller_epoch:
        diffs.append(
            f"controller epoch: plan {fingerprint.get('controller_epoch')},"
            f" now {state.controller_epoch} (the controller moved)"
        )
    for topic, version in sorted(fingerprint.get("topics", {}).items()):
        now = state.topics[topic].znode_version if topic in state.topics else None
        if now != version:
            shown = "gone" if now is None else f"version {now}"
            diffs.append(f"topic {topic} znode: plan version {version}, now {shown}")
    for broker, error in sorted((unreachable or {}).items()):
        diffs.append(f"broker {broker}: its files could not be read again ({error})")
    down = set(unreachable or {})
    for key, planned_id in sorted(fingerprint.get("files", {}).items()):
        if int(key.split(":", 1)[0]) in down:
            continue
        now_id = files_now.get(key)
        if now_id != planned_id:
            before, after = planned_id or "no readable file", now_id or "no readable file"
            diffs.append(f"{key}: plan {before}, now {after}")
    return diffs
