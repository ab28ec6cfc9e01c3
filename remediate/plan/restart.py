"""Restart planning: which brokers to restart, in what order, with which files, and why the
others are left out. Pure.

The target brokers come out of here in a first order (out of the ISR first, the controller
last); order.py then orders them by the availability model. Every step and every broker left
out carries its reason. An ordinary breach of the restart-safety rule is a refusal of the plan;
what a stale id costs is the plan's predicted impact (restart_refusals).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from remediate.gates import (
    offline_blocker,
    registration_blocker,
    restart_blocker,
)
from remediate.minisr import MinIsrRule
from remediate.plan.availability import PredictedTimeline
from remediate.plan.fingerprint import replica_file
from remediate.plan.model import PlanOptions, RestartStep, restart_batches
from remediate.playbook import Playbook
from remediate.scan.findings import Finding
from remediate.scan.kinds import MISMATCH_KINDS, REPLICA_KINDS, FindingKind
from remediate.state import ClusterState, TopicPartition


def is_eligible(finding: Finding, playbook: Playbook, options: PlanOptions) -> bool:
    if finding.broker is None or finding.topic is None or finding.partition is None:
        return False
    return finding.topic not in playbook.exclude_topics or finding.topic in options.include_topics


def _stale_holders(findings: Iterable[Finding]) -> dict[TopicPartition, set[int]]:
    """Replicas whose file holds an id other than ZooKeeper's: the broker holds it in memory."""
    stale: dict[TopicPartition, set[int]] = {}
    for f in findings:
        if (
            f.kind in MISMATCH_KINDS
            and f.topic is not None
            and f.partition is not None
            and f.broker is not None
        ):
            stale.setdefault(TopicPartition(f.topic, f.partition), set()).add(f.broker)
    return stale


def replica_files(finding: Finding, playbook: Playbook) -> list[str]:
    if finding.log_dir is None or finding.topic is None or finding.partition is None:
        return []
    return [
        replica_file(finding.log_dir, finding.topic, finding.partition, name)
        for name in playbook.files
    ]


_REASONS = (
    (
        FindingKind.TOPIC_ID_MISMATCH_OUT_OF_ISR,
        "replica(s) hold an old topic id and are out of the ISR",
    ),
    (
        FindingKind.TOPIC_ID_MISMATCH,
        "replica(s) hold an old topic id and leave the ISR at their next restart",
    ),
    (FindingKind.METADATA_CORRUPT, "partition.metadata file(s) Kafka cannot read"),
)


def _step_reason(broker_findings: Sequence[Finding], state: ClusterState) -> str:
    by_kind: dict[FindingKind, list[str]] = {}
    for f in broker_findings:
        by_kind.setdefault(f.kind, []).append(str(TopicPartition(f.topic or "", f.partition or 0)))
    parts = []
    for kind, text in _REASONS:
        names = by_kind.pop(kind, [])
        if names:
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            parts.append(f"{len(names)} {text} ({shown})")
    parts += [f"{len(names)} {kind} replica(s)" for kind, names in sorted(by_kind.items())]
    topics = sorted({f.topic for f in broker_findings if f.topic is not None})
    ids = "; ".join(f"{t}: ZooKeeper holds {_zk_id(state, t) or 'no id'}" for t in topics[:3])
    return "; ".join(parts) + (f" [{ids}]" if ids else "")


def _zk_id(state: ClusterState, topic: str) -> str | None:
    found = state.topics.get(topic)
    return found.topic_id if found is not None else None


def skip_reason(
    broker: int,
    findings: Sequence[Finding],
    playbook: Playbook,
    options: PlanOptions,
    restored: Collection[str] = (),
) -> str:
    by_restore = sorted(
        {
            f.topic
            for f in findings
            if f.broker == broker and f.kind in MISMATCH_KINDS and f.topic and f.topic in restored
        }
    )
    if by_restore:
        return f"no restart: the restore of {', '.join(by_restore)} repairs its replicas"
    excluded = sorted(
        {
            f.topic
            for f in findings
            if f.broker == broker
            and f.kind in playbook.applies_to
            and f.topic is not None
            and not is_eligible(f, playbook, options)
        }
    )
    if excluded:
        return (
            f"only excluded topics need the fix ({', '.join(excluded)});"
            " name them with --include-topic to act on them"
        )
    if any(f.kind == FindingKind.BROKER_UNREACHABLE and f.broker == broker for f in findings):
        return "its disk could not be inspected"
    if playbook.brokers == "all":
        return "hosts no partition or is not registered"
    count = sum(1 for f in findings if f.broker == broker and f.kind == FindingKind.OK)
    return f"nothing to fix: {count} replica(s) agree with ZooKeeper"


def restart_targets(
    state: ClusterState,
    brokers: Sequence[int],
    by_broker: Mapping[int, Sequence[Finding]],
    playbook: Playbook,
) -> list[int]:
    """Brokers to act on, in order: out of ISR first, then the others, the controller last."""
    if playbook.brokers == "all":
        targets = [b for b in brokers if state.partitions_on(b) and b in state.brokers]
    else:
        targets = sorted(by_broker)
    out_of_isr = {
        b
        for b, fs in by_broker.items()
        if any(f.kind == FindingKind.TOPIC_ID_MISMATCH_OUT_OF_ISR for f in fs)
    }
    return sorted(targets, key=lambda b: (b == state.controller_id, b not in out_of_isr, b))


def restart_step(
    broker: int,
    state: ClusterState,
    mine: Sequence[Finding],
    eligible: Sequence[Finding],
    playbook: Playbook,
    options: PlanOptions,
) -> RestartStep:
    if playbook.scope == "all":
        chosen = [f for f in eligible if f.broker == broker and f.kind in REPLICA_KINDS]
    else:
        chosen = list(mine)
    return RestartStep(
        broker=broker,
        reason=_step_reason(mine, state) if mine else "rolling restart",
        partitions=tuple(
            sorted(
                {
                    TopicPartition(f.topic, f.partition)
                    for f in chosen
                    if f.topic is not None and f.partition is not None
                },
                key=str,
            )
        ),
        files=tuple(sorted({path for f in chosen for path in replica_files(f, playbook)})),
        actions=tuple(s.action for s in playbook.steps),
        impact=tuple(_impact(state, broker, options.min_isr_rule)),
        is_controller=broker == state.controller_id,
    )


def _impact(state: ClusterState, broker: int, rule: MinIsrRule) -> list[str]:
    """Partitions that lose an in-sync replica while `broker` is down."""
    lines = []
    for tp in state.partitions_on(broker):
        partition = state.partitions.get(tp)
        if partition is None or broker not in partition.isr:
            continue
        min_isr = state.min_insync_replicas(tp, rule)
        size = len(partition.isr)
        lines.append(f"{tp}: isr {size} -> {size - 1} (min {min_isr})")
    return lines


def restart_refusals(
    state: ClusterState,
    findings: Sequence[Finding],
    steps: Sequence[RestartStep],
    timeline: PredictedTimeline,
    options: PlanOptions,
) -> list[str]:
    """Why the restarts could not be gated safely. Partitions with a replica holding a stale
    id are the availability model's: what the id costs them is the plan's predicted impact,
    which the approval accepts; only an ordinary breach of min.insync.replicas (a working
    leader left with too few in-sync replicas) is refused there. Every other partition keeps
    the rolling-restart rule on ZooKeeper's state."""
    refusals: list[str] = []
    for f in findings:
        if f.kind == FindingKind.BROKER_UNREACHABLE:
            refusals.append(
                f"broker {f.broker} could not be inspected ({f.detail}); its replicas are unknown"
            )
    if not steps:
        return refusals
    stale = set(_stale_holders(findings))
    blocker = offline_blocker(state, ignore=stale)
    if blocker:
        refusals.append(blocker)
    replicas_of_touched = {
        r for s in steps for tp in state.partitions_on(s.broker) for r in state.replicas(*tp)
    }
    blocker = registration_blocker(state, replicas_of_touched)
    if blocker:
        refusals.append(blocker)
    phase_of = _phase_indexes(steps, len(timeline.phases))
    for number, step in enumerate(steps, 1):
        blocker = restart_blocker(
            state, step.broker, min_isr=options.min_isr_rule, ignore=stale, batch=step.batch
        )
        index = phase_of[number - 1]
        phase = timeline.phases[index] if index >= 0 else None
        if blocker is None and phase is not None:
            for tp, (isr, min_isr) in sorted(phase.below_min.items()):
                if tp in stale:
                    blocker = (
                        f"{tp} has exactly min.insync.replicas={min_isr} in sync"
                        f" (isr {list(isr)}); restarting broker {step.broker} would take it below"
                    )
                    break
        if blocker:
            refusals.append(f"step {number} (broker {step.broker}): {blocker}")
    return refusals


def _phase_indexes(steps: Sequence[RestartStep], phases: int) -> list[int]:
    """The timeline's phase of each restart step: the restarts are its last phases, one per
    batch."""
    batches = restart_batches(steps)
    batch_of = {broker: n for n, batch in enumerate(batches) for broker in batch}
    return [phases - len(batches) + batch_of[step.broker] for step in steps]
