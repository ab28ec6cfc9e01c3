"""Drift: has the cluster changed since the plan was made? Pure.

The plan's fingerprint (remediate/plan/fingerprint.py) records the cluster id, the registered
brokers, the controller epoch, the znode versions of the topics it touches and the id in every
partition.metadata it relies on. apply reads the same things again and refuses on any
difference, shown field by field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from remediate.collect.snapshot import ReplicaRow
from remediate.plan import FileKey, Fingerprint
from remediate.state import ClusterState


def observed_files(
    wanted: Iterable[FileKey], replicas: Mapping[int, Iterable[ReplicaRow]]
) -> dict[FileKey, str | None]:
    """The ids now on disk for the fingerprint's keys (None: no readable file).

    `replicas` maps a broker to its inventory rows.
    """
    now: dict[FileKey, str | None] = {}
    for broker, rows in replicas.items():
        for row in rows:
            if row.topic is None or row.partition is None:
                continue
            now[FileKey.metadata(broker, row.log_dir, row.topic, row.partition)] = row.file_topic_id
    return {key: now.get(key) for key in wanted}


def differences(
    fingerprint: Fingerprint,
    state: ClusterState,
    files_now: Mapping[FileKey, str | None],
    *,
    unreachable: Mapping[int, str] | None = None,
) -> list[str]:
    """Every way the cluster differs from the fingerprint, one line each (empty: no drift)."""
    diffs: list[str] = []
    if fingerprint.cluster_id != state.cluster_id:
        diffs.append(f"cluster id: plan {fingerprint.cluster_id}, now {state.cluster_id}")
    planned_brokers = sorted(fingerprint.brokers)
    if planned_brokers != sorted(state.brokers):
        diffs.append(f"registered brokers: plan {planned_brokers}, now {sorted(state.brokers)}")
    if fingerprint.controller_epoch != state.controller_epoch:
        diffs.append(
            f"controller epoch: plan {fingerprint.controller_epoch},"
            f" now {state.controller_epoch} (the controller moved)"
        )
    for topic, version in sorted(fingerprint.topics.items()):
        now = state.topics[topic].znode_version if topic in state.topics else None
        if now != version:
            shown = "gone" if now is None else f"version {now}"
            diffs.append(f"topic {topic} znode: plan version {version}, now {shown}")
    for broker, error in sorted((unreachable or {}).items()):
        diffs.append(f"broker {broker}: its files could not be read again ({error})")
    down = set(unreachable or {})
    # Sorted as the plan lists them: by their "broker:path" text.
    for key in sorted(fingerprint.files, key=str):
        if key.broker in down:
            continue
        planned_id, now_id = fingerprint.files[key], files_now.get(key)
        if now_id != planned_id:
            before, after = planned_id or "no readable file", now_id or "no readable file"
            diffs.append(f"{key}: plan {before}, now {after}")
    return diffs
