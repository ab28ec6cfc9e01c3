"""Restore planning: write back into a topic znode the id every replica agrees on. Pure.

A topic whose every assigned replica holds the same id in partition.metadata (or no file yet,
which Kafka fills with ZooKeeper's id at the replica's next LeaderAndIsr) can be repaired
without restarting anything: write that id into the topic znode (and, when ZooKeeper already
holds another id the controller has loaded, have the controller re-elected so it sends the
restored id). That is only safe when the agreement is complete: every replica inspected, every
replica with a readable file, one id. Anything less is a reason, said in words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from remediate.plan.model import PlanOptions, RestartStep, RestoreStep
from remediate.playbook import Action, Playbook
from remediate.scan.findings import Finding
from remediate.scan.kinds import ID_KINDS, FindingKind
from remediate.state import ClusterState, ReplicaRef, TopicPartition

_WHY = {
    FindingKind.METADATA_CORRUPT: "has a partition.metadata Kafka cannot read",
    FindingKind.REPLICA_DIR_MISSING: "has no directory for it",
}


@dataclass(frozen=True)
class Agreement:
    topic: str
    agreed_id: str | None
    reason: str | None
    replicas: int
    # No replica has a file: whatever id a controller assigns, every replica takes it.
    unclaimed: bool = False

    @property
    def agreed(self) -> bool:
        return self.agreed_id is not None


def _show(replicas: Sequence[tuple[int, int]], topic: str) -> str:
    shown = ", ".join(str(ReplicaRef(b, TopicPartition(topic, p))) for p, b in sorted(replicas)[:4])
    return shown + (f" and {len(replicas) - 4} more" if len(replicas) > 4 else "")


# One replica of the topic at hand: (partition, broker).
ReplicaKey = tuple[int, int]


def replica_ids(
    topic: str, assigned: set[ReplicaKey], findings: Iterable[Finding]
) -> tuple[dict[ReplicaKey, set[str]], set[ReplicaKey], dict[FindingKind, list[ReplicaKey]]]:
    """(ids per replica, replicas without a file, replicas per problem kind)."""
    ids: dict[ReplicaKey, set[str]] = {}
    no_file: set[ReplicaKey] = set()
    problems: dict[FindingKind, list[ReplicaKey]] = {}
    for f in findings:
        if f.topic != topic or f.partition is None or f.broker is None:
            continue
        key = (f.partition, f.broker)
        if key not in assigned:
            continue
        if f.kind in ID_KINDS and f.file_topic_id:
            ids.setdefault(key, set()).add(f.file_topic_id)
        elif f.kind == FindingKind.METADATA_MISSING:
            # Kafka writes ZooKeeper's id into a replica without the file at its next
            # LeaderAndIsr (2.8 has none yet for partitions added since its last one): such a
            # replica takes whatever id is restored, so it does not stand in the way.
            no_file.add(key)
        elif f.kind in _WHY:
            problems.setdefault(f.kind, []).append(key)
    return ids, no_file, problems


def topic_agreement(
    topic: str, state: ClusterState, findings: Iterable[Finding], *, unreachable: Iterable[int]
) -> Agreement:
    """The id every assigned replica of `topic` holds, or the reason there is none."""
    if topic not in state.topics:
        return Agreement(topic, None, f"topic {topic} is not in ZooKeeper", 0)
    assigned = {
        (p, b) for p, brokers in state.topics[topic].assignment.partitions.items() for b in brokers
    }
    down = sorted({b for _, b in assigned} & set(unreachable))
    if down:
        return Agreement(
            topic,
            None,
            f"broker(s) {down} hosting {topic} could not be inspected; every replica must be",
            len(assigned),
        )
    ids, no_file, problems = replica_ids(topic, assigned, findings)
    for kind, replicas in sorted(problems.items()):
        return Agreement(topic, None, f"{_show(replicas, topic)} {_WHY[kind]}", len(assigned))
    unseen = sorted(assigned - set(ids) - no_file)
    if unseen:
        return Agreement(
            topic, None, f"{_show(unseen, topic)}: no finding for the replica", len(assigned)
        )
    if not ids:
        return Agreement(
            topic,
            None,
            "no replica has a partition.metadata: there is no id to restore, and every"
            " replica takes the id the next controller assigns",
            len(assigned),
            unclaimed=True,
        )
    holders: dict[str, list[tuple[int, int]]] = {}
    for key, found in ids.items():
        for topic_id in found:
            holders.setdefault(topic_id, []).append(key)
    if len(holders) > 1:
        parts = [
            f"{topic_id} on {len(keys)} replica(s) ({_show(keys, topic)})"
            for topic_id, keys in sorted(holders.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        ]
        return Agreement(topic, None, "replicas disagree: " + "; ".join(parts), len(assigned))
    ((agreed, _),) = holders.items()
    return Agreement(topic, agreed, None, len(assigned))


def agreements(
    topics: Iterable[str], state: ClusterState, findings: Sequence[Finding]
) -> Mapping[str, Agreement]:
    unreachable = {
        f.broker
        for f in findings
        if f.kind == FindingKind.BROKER_UNREACHABLE and f.broker is not None
    }
    return {t: topic_agreement(t, state, findings, unreachable=unreachable) for t in sorted(topics)}


def restore_steps(
    state: ClusterState,
    found: Mapping[str, Agreement],
    restore: Playbook,
    options: PlanOptions,
) -> tuple[list[RestoreStep], dict[str, str]]:
    """Restore steps for the topics whose replicas agree, and why the others get none."""
    steps: list[RestoreStep] = []
    why_not: dict[str, str] = {}
    for topic, agreement in found.items():
        if topic in restore.exclude_topics and topic not in options.include_topics:
            why_not[topic] = "internal topic; name it with --include-topic to act on it"
            continue
        if agreement.unclaimed:
            continue
        if agreement.agreed_id is None:
            why_not[topic] = agreement.reason or "no agreement"
            continue
        zk_id = state.topics[topic].topic_id
        if zk_id == agreement.agreed_id:
            continue
        reelect = zk_id is not None
        partitions = tuple(
            TopicPartition(topic, p) for p in sorted(state.topics[topic].assignment.partitions)
        )
        if reelect:
            reason = (
                f"every one of its {agreement.replicas} replicas holds {agreement.agreed_id},"
                f" ZooKeeper holds {zk_id}: write {agreement.agreed_id} back and re-elect the"
                " controller so it sends that id; no broker restarts"
            )
            impact = (
                "one controller election: every broker receives LeaderAndIsr again;"
                " no partition loses an in-sync replica",
            )
        else:
            reason = (
                f"ZooKeeper lost the topic id; every one of its {agreement.replicas} replicas"
                f" holds {agreement.agreed_id}: write it back before a controller failover"
                " mints a new one; no broker restarts"
            )
            impact = ("none: one znode write",)
        actions = tuple(
            step.action
            for step in restore.steps
            if reelect or step.action != Action.ZK_WRITE_CONTROLLER_ELECTION
        )
        steps.append(
            RestoreStep(
                topic=topic,
                topic_id=agreement.agreed_id,
                zk_topic_id=zk_id,
                znode_version=state.topics[topic].znode_version,
                reelect=reelect,
                reason=reason,
                partitions=partitions,
                actions=actions,
                impact=impact,
                playbook=restore.name,
            )
        )
    # Znode writes before any election: a re-election must find every id already in place.
    steps.sort(key=lambda s: (s.reelect, s.topic))
    return steps, why_not


def mint_steps(
    state: ClusterState,
    found: Mapping[str, Agreement],
    restore: Playbook,
    options: PlanOptions,
) -> list[RestoreStep]:
    """Re-election steps for the topics that lost their id before any replica wrote
    partition.metadata: harmless only while every replica can still take a new id, and the
    running controller still holds the old one in memory, so its failover at any moment would
    mint one anyway. Done now, on purpose, gated and journaled, it removes the hazard."""
    steps = []
    for topic, agreement in sorted(found.items()):
        if not agreement.unclaimed or topic not in state.topics:
            continue
        if topic in restore.exclude_topics and topic not in options.include_topics:
            continue
        if state.topics[topic].topic_id is not None:
            continue
        steps.append(
            RestoreStep(
                topic=topic,
                topic_id="",
                zk_topic_id=None,
                znode_version=state.topics[topic].znode_version,
                reelect=True,
                reason=(
                    f"ZooKeeper lost the topic id of {topic} before any of its"
                    f" {agreement.replicas} replicas wrote partition.metadata, while the running"
                    " controller still holds the old id: have the controller re-elected now so"
                    " the new one mints an id that every replica takes; no broker restarts"
                ),
                partitions=tuple(
                    TopicPartition(topic, p)
                    for p in sorted(state.topics[topic].assignment.partitions)
                ),
                actions=tuple(
                    step.action for step in restore.steps if step.action != Action.ZK_WRITE_TOPIC_ID
                ),
                impact=(
                    "one controller election: every broker receives LeaderAndIsr again;"
                    " no partition loses an in-sync replica",
                ),
                playbook=restore.name,
                mint=True,
            )
        )
    return steps


def is_restore_playbook(playbook: Playbook) -> bool:
    return any(step.verb == Action.ZK_WRITE_TOPIC_ID.verb for step in playbook.steps)


def restore_refusals(
    state: ClusterState,
    restores: Sequence[RestoreStep],
    restarts: Sequence[RestartStep],
    missing: Iterable[str],
    why_not: Mapping[str, str],
) -> list[str]:
    refusals = [
        f"{topic}: ZooKeeper lost its topic id and it cannot be restored automatically: {why}"
        for topic, why in sorted(why_not.items())
        if topic in set(missing)
    ]
    restored = {s.topic for s in restores}
    still_missing = sorted(set(missing) - restored)
    elects = [f"restore of {s.topic}" for s in restores if s.reelect]
    elects += [f"restart of broker {s.broker}" for s in restarts if s.is_controller]
    if still_missing and elects:
        refusals.append(
            f"{', '.join(elects)} would make a new controller, which mints a new id for"
            f" {', '.join(still_missing)} (no topic id in ZooKeeper) and arms every replica"
            " of it; restore those ids first"
        )
    return refusals


def restore_notes(why_not: Mapping[str, str], mismatched: Iterable[str]) -> list[str]:
    """Why a mismatched topic is repaired by restarts rather than by a restore."""
    return [
        f"{topic}: no repair without restarts, because {why}"
        for topic, why in sorted(why_not.items())
        if topic in set(mismatched)
    ]
