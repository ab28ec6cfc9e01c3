"""The planner: findings + cluster state + playbook -> an ordered, reviewable plan. Pure.

Order: brokers whose mismatched replicas are already out of the ISR first (their repair
restores redundancy before a healthy replica is touched), then the others, the active
controller last. Every step and every broker left out carries its reason. A plan whose steps
could not be gated safely is refused, with the reasons, unless the operator overrides.

The plan is canonical JSON; its digest is the sha256 of that JSON without the digest, so any
change to any field changes it. The fingerprint records the state the plan was made from
(cluster id, registered brokers, topic znode versions, the ids in the files it will delete),
which apply compares with a fresh read before it changes anything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from remediate.agreement import Agreement, agreements
from remediate.formats.logdir import PARTITION_METADATA
from remediate.gates import (
    StaleIdHolder,
    offline_blocker,
    partition_name,
    refusal_blocker,
    registration_blocker,
    restart_blocker,
)
from remediate.playbook import Playbook
from remediate.scan.kinds import MISMATCH_KINDS, REPLICA_KINDS, FindingKind
from remediate.scan.report import Finding
from remediate.state import ClusterState, TopicPartition

PLAN_FORMAT = 1


@dataclass(frozen=True)
class PlanOptions:
    allow_unsafe: bool = False
    include_topics: frozenset[str] = frozenset()
    min_isr_default: int = 1
    created_at: str | None = None


@dataclass(frozen=True)
class PlanStep:
    broker: int
    reason: str
    partitions: tuple[str, ...]
    files: tuple[str, ...]
    actions: tuple[str, ...]
    impact: tuple[str, ...]
    is_controller: bool

    kind = "restart"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broker": self.broker,
            "reason": self.reason,
            "partitions": list(self.partitions),
            "files": list(self.files),
            "actions": list(self.actions),
            "impact": list(self.impact),
            "is_controller": self.is_controller,
        }


@dataclass(frozen=True)
class RestoreStep:
    """Write the id every replica agrees on into the topic znode (CAS on `znode_version`);
    with `reelect`, have the controller re-elected so it loads and sends that id."""

    topic: str
    topic_id: str
    zk_topic_id: str | None
    znode_version: int
    reelect: bool
    reason: str
    partitions: tuple[str, ...]
    actions: tuple[str, ...]
    impact: tuple[str, ...]
    playbook: str

    kind = "restore"
    broker = None
    files: tuple[str, ...] = ()
    is_controller = False

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broker": None,
            "topic": self.topic,
            "topic_id": self.topic_id,
            "zk_topic_id": self.zk_topic_id,
            "znode_version": self.znode_version,
            "reelect": self.reelect,
            "reason": self.reason,
            "partitions": list(self.partitions),
            "files": [],
            "actions": list(self.actions),
            "impact": list(self.impact),
            "playbook": self.playbook,
        }


AnyStep = PlanStep | RestoreStep


@dataclass(frozen=True)
class Plan:
    cluster: str
    cluster_id: str | None
    playbook: str
    playbook_version: int
    controller: int | None
    fingerprint: Mapping[str, Any]
    steps: tuple[AnyStep, ...]
    skipped: tuple[tuple[int, str], ...]
    refusals: tuple[str, ...]
    allow_unsafe: bool
    estimate_s: float
    created_at: str | None = None
    notes: tuple[str, ...] = ()
    # The gate parameters of every playbook the plan uses: approved with it, run with it.
    gates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    digest: str = field(default="", compare=False)

    @property
    def refused(self) -> bool:
        return bool(self.refusals) and not self.allow_unsafe

    @property
    def restarts(self) -> tuple[PlanStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, PlanStep))

    @property
    def restores(self) -> tuple[RestoreStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, RestoreStep))

    def body(self) -> dict[str, Any]:
        """Everything the digest covers."""
        return {
            "format": PLAN_FORMAT,
            "cluster": self.cluster,
            "cluster_id": self.cluster_id,
            "created_at": self.created_at,
            "playbook": self.playbook,
            "playbook_version": self.playbook_version,
            "controller": self.controller,
            "fingerprint": self.fingerprint,
            "steps": [s.to_json() for s in self.steps],
            "skipped": [{"broker": b, "reason": r} for b, r in self.skipped],
            "refusals": list(self.refusals),
            "allow_unsafe": self.allow_unsafe,
            "estimate_s": self.estimate_s,
            "notes": list(self.notes),
            "gates": {name: dict(values) for name, values in sorted(self.gates.items())},
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest or compute_digest(self.body()),
            "refused": self.refused,
            **self.body(),
        }


def canonical(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode(
        "ascii"
    )


def compute_digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(body)).hexdigest()


def with_digest(plan: Plan) -> Plan:
    return Plan(**{**plan.__dict__, "digest": compute_digest(plan.body())})


# -- planning ------------------------------------------------------------------------------------


def _eligible(finding: Finding, playbook: Playbook, options: PlanOptions) -> bool:
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
            stale.setdefault((f.topic, f.partition), set()).add(f.broker)
    return stale


def replica_file(log_dir: str, topic: str, partition: int, name: str) -> str:
    """A file of a replica, built from the validated topic and partition, never from a name
    read on disk."""
    return f"{log_dir.rstrip('/')}/{topic}-{partition}/{name}"


def metadata_key(broker: int, log_dir: str, topic: str, partition: int) -> str:
    """The fingerprint's key for one replica's partition.metadata: "broker:path" (brokers
    often use the same log dir paths)."""
    return f"{broker}:{replica_file(log_dir, topic, partition, PARTITION_METADATA)}"


def _files(finding: Finding, playbook: Playbook) -> list[str]:
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


def _reason(broker_findings: Sequence[Finding], zk_ids: Mapping[str, str | None]) -> str:
    by_kind: dict[FindingKind, list[str]] = {}
    for f in broker_findings:
        by_kind.setdefault(f.kind, []).append(partition_name((f.topic or "", f.partition or 0)))
    parts = []
    for kind, text in _REASONS:
        names = by_kind.pop(kind, [])
        if names:
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            parts.append(f"{len(names)} {text} ({shown})")
    parts += [f"{len(names)} {kind} replica(s)" for kind, names in sorted(by_kind.items())]
    topics = sorted({f.topic for f in broker_findings if f.topic is not None})
    ids = "; ".join(f"{t}: ZooKeeper holds {zk_ids.get(t) or 'no id'}" for t in topics[:3])
    return "; ".join(parts) + (f" [{ids}]" if ids else "")


def _skip_reason(
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
            and not _eligible(f, playbook, options)
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


def _targets(
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


def _step(
    broker: int,
    state: ClusterState,
    mine: Sequence[Finding],
    eligible: Sequence[Finding],
    playbook: Playbook,
    options: PlanOptions,
) -> PlanStep:
    if playbook.scope == "all":
        chosen = [f for f in eligible if f.broker == broker and f.kind in REPLICA_KINDS]
    else:
        chosen = list(mine)
    zk_ids = {name: topic.topic_id for name, topic in state.topics.items()}
    return PlanStep(
        broker=broker,
        reason=_reason(mine, zk_ids) if mine else "rolling restart",
        partitions=tuple(
            sorted(
                {
                    partition_name((f.topic, f.partition))
                    for f in chosen
                    if f.topic is not None and f.partition is not None
                }
            )
        ),
        files=tuple(sorted({path for f in chosen for path in _files(f, playbook)})),
        actions=tuple(str(s) for s in playbook.steps),
        impact=tuple(_impact(state, broker, options.min_isr_default)),
        is_controller=broker == state.controller_id,
    )


def _fingerprint(
    state: ClusterState,
    affected: Sequence[Finding],
    steps: Sequence[AnyStep],
    playbook: Playbook,
    findings: Sequence[Finding],
) -> dict[str, Any]:
    restored = {s.topic for s in steps if isinstance(s, RestoreStep)}
    topics = sorted(
        {f.topic for f in affected if f.topic is not None and f.topic in state.topics} | restored
    )
    # Keyed as metadata_key does.
    planned = {
        f"{step.broker}:{path}"
        for step in steps
        for path in step.files
        if path.endswith(f"/{PARTITION_METADATA}")
    }
    files = {
        f"{f.broker}:{path}": f.file_topic_id
        for f in affected
        for path in _files(f, playbook)
        if f"{f.broker}:{path}" in planned
    }
    # A restore relies on every replica's file: any change to one of them is drift.
    for f in findings:
        if (
            f.topic in restored
            and f.log_dir is not None
            and f.partition is not None
            and f.broker is not None
        ):
            files[metadata_key(f.broker, f.log_dir, f.topic, f.partition)] = f.file_topic_id
    return {
        "cluster_id": state.cluster_id,
        "brokers": sorted(state.brokers),
        "controller_epoch": state.controller_epoch,
        "topics": {t: state.topics[t].znode_version for t in topics},
        "files": dict(sorted(files.items())),
    }


def _restores(
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
            partition_name((topic, p)) for p in sorted(state.topics[topic].assignment.partitions)
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
            str(step)
            for step in restore.steps
            if reelect or str(step) != "zk-write controller-election"
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


def is_restore_playbook(playbook: Playbook) -> bool:
    return any(step.verb == "zk-write" for step in playbook.steps)


def make_plan(
    *,
    cluster: str,
    state: ClusterState,
    findings: Sequence[Finding],
    playbook: Playbook,
    options: PlanOptions = PlanOptions(),
    known_brokers: Iterable[int] = (),
    restore: Playbook | None = None,
) -> Plan:
    """The plan. `known_brokers` are the configured brokers (so the ones left out are named).

    With a `restore` playbook (or when `playbook` is one), topics whose replicas all agree on
    an id ZooKeeper does not hold get a restore step, first; their replicas get no restart.
    """
    restarting = not is_restore_playbook(playbook)
    if not restarting:
        restore = playbook
    restart_kinds = frozenset(playbook.applies_to) if restarting else frozenset()
    missing = {f.topic for f in findings if f.kind == FindingKind.ZK_TOPIC_ID_MISSING and f.topic}
    mismatched = {f.topic for f in findings if f.kind in MISMATCH_KINDS and f.topic}
    found = agreements(missing | mismatched, state, findings)
    restores: list[RestoreStep] = []
    why_not: dict[str, str] = {}
    if restore is not None:
        restores, why_not = _restores(state, found, restore, options)
    restored = {s.topic for s in restores}
    # A lost id no replica claims is harmless: whatever a new controller mints, all take it.
    unclaimed = {t for t in missing if found[t].unclaimed}
    eligible = [f for f in findings if _eligible(f, playbook, options)]
    affected = [f for f in eligible if f.kind in restart_kinds and f.topic not in restored]
    by_broker: dict[int, list[Finding]] = {}
    for f in affected:
        if f.broker is not None:
            by_broker.setdefault(f.broker, []).append(f)
    brokers = sorted(
        set(known_brokers)
        | set(state.brokers)
        | {f.broker for f in findings if f.broker is not None}
    )
    targets = _targets(state, brokers, by_broker, playbook) if restarting else []
    skipped = [
        (b, _skip_reason(b, findings, playbook, options, restored))
        for b in brokers
        if b not in targets and restarting
    ]
    limit = playbook.gates.max_brokers_per_run
    if limit and len(targets) > limit:
        skipped += [
            (b, f"beyond max_brokers_per_run={limit}; plan again after this run")
            for b in targets[limit:]
        ]
        targets = targets[:limit]
    restarts = [
        _step(
            b,
            state,
            sorted(by_broker.get(b, []), key=Finding.sort_key),
            eligible,
            playbook,
            options,
        )
        for b in targets
    ]
    steps: list[AnyStep] = [*restores, *restarts]
    estimate = len(restarts) * (
        playbook.gates.expected_restart_s + playbook.gates.stability_window_s
    ) + len(restores) * (restore.gates.stability_window_s + 5 if restore else 0)
    refusals = _refusals(state, findings, restarts, options)
    refusals += _restore_refusals(state, restores, restarts, missing - unclaimed, why_not)
    return with_digest(
        Plan(
            cluster=cluster,
            cluster_id=state.cluster_id,
            playbook=playbook.name,
            playbook_version=playbook.version,
            controller=state.controller_id,
            fingerprint=_fingerprint(state, affected, steps, playbook, findings),
            steps=tuple(steps),
            skipped=tuple(sorted(skipped)),
            refusals=tuple(refusals),
            allow_unsafe=options.allow_unsafe,
            estimate_s=estimate,
            created_at=options.created_at,
            notes=tuple(_notes(why_not, mismatched)),
            gates={
                p.name: p.gates.model_dump(mode="json")
                for p in (playbook, restore)
                if p is not None
            },
        )
    )


def _restore_refusals(
    state: ClusterState,
    restores: Sequence[RestoreStep],
    restarts: Sequence[PlanStep],
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


def _notes(why_not: Mapping[str, str], mismatched: Iterable[str]) -> list[str]:
    """Why a mismatched topic is repaired by restarts rather than by a restore."""
    return [
        f"{topic}: no repair without restarts, because {why}"
        for topic, why in sorted(why_not.items())
        if topic in set(mismatched)
    ]


def _impact(state: ClusterState, broker: int, min_isr_default: int) -> list[str]:
    """Partitions that lose an in-sync replica while `broker` is down."""
    lines = []
    for tp in state.partitions_on(broker):
        partition = state.partitions.get(tp)
        if partition is None or broker not in partition.isr:
            continue
        min_isr = state.min_insync_replicas(tp[0], min_isr_default)
        size = len(partition.isr)
        lines.append(f"{partition_name(tp)}: isr {size} -> {size - 1} (min {min_isr})")
    return lines


def _refusals(
    state: ClusterState,
    findings: Sequence[Finding],
    steps: Sequence[PlanStep],
    options: PlanOptions,
) -> list[str]:
    refusals: list[str] = []
    for f in findings:
        if f.kind == FindingKind.BROKER_UNREACHABLE:
            refusals.append(
                f"broker {f.broker} could not be inspected ({f.detail}); its replicas are unknown"
            )
    if not steps:
        return refusals
    blocker = offline_blocker(state)
    if blocker:
        refusals.append(blocker)
    replicas_of_touched = {
        r for s in steps for tp in state.partitions_on(s.broker) for r in state.replicas(*tp)
    }
    blocker = registration_blocker(state, replicas_of_touched)
    if blocker:
        refusals.append(blocker)
    # Walk the steps in order, on the ISR and stale-id holders each step should leave behind.
    stale = _stale_holders(findings)
    isr = {tp: set(p.isr) for tp, p in state.partitions.items()}
    repairs = "delete" in {a.split()[0] for a in steps[0].actions}
    for number, step in enumerate(steps, 1):
        holders = StaleIdHolder({tp: frozenset(b) for tp, b in stale.items()})
        blocker = restart_blocker(
            state, step.broker, min_isr_default=options.min_isr_default, isr_override=isr
        ) or refusal_blocker(state, step.broker, holders)
        if blocker:
            refusals.append(f"step {number} (broker {step.broker}): {blocker}")
        # Afterwards: a repaired replica holds ZooKeeper's id, and rejoins the ISR when its
        # leader accepts it.
        for tp in state.partitions_on(step.broker):
            if repairs and partition_name(tp) in step.partitions:
                stale.get(tp, set()).discard(step.broker)
            partition = state.partitions.get(tp)
            if (
                partition is not None
                and partition.leader >= 0
                and partition.leader not in stale.get(tp, set())
            ):
                isr.setdefault(tp, set()).add(step.broker)
    return refusals


# -- reading a plan back ----------------------------------------------------------------------


def _step_from_json(s: Mapping[str, Any]) -> AnyStep:
    if s.get("kind", "restart") == "restore":
        return RestoreStep(
            topic=str(s["topic"]),
            topic_id=str(s["topic_id"]),
            zk_topic_id=None if s["zk_topic_id"] is None else str(s["zk_topic_id"]),
            znode_version=int(s["znode_version"]),
            reelect=bool(s["reelect"]),
            reason=str(s["reason"]),
            partitions=tuple(s["partitions"]),
            actions=tuple(s["actions"]),
            impact=tuple(s["impact"]),
            playbook=str(s["playbook"]),
        )
    return PlanStep(
        broker=int(s["broker"]),
        reason=str(s["reason"]),
        partitions=tuple(s["partitions"]),
        files=tuple(s["files"]),
        actions=tuple(s["actions"]),
        impact=tuple(s["impact"]),
        is_controller=bool(s["is_controller"]),
    )


def plan_from_json(document: Mapping[str, Any]) -> Plan:
    """Rebuild a Plan from its JSON (the digest is recomputed, never trusted)."""
    plan = Plan(
        cluster=document["cluster"],
        cluster_id=document["cluster_id"],
        playbook=document["playbook"],
        playbook_version=int(document["playbook_version"]),
        controller=document["controller"],
        fingerprint=document["fingerprint"],
        steps=tuple(_step_from_json(s) for s in document["steps"]),
        skipped=tuple((int(s["broker"]), str(s["reason"])) for s in document["skipped"]),
        refusals=tuple(document["refusals"]),
        allow_unsafe=bool(document["allow_unsafe"]),
        estimate_s=float(document["estimate_s"]),
        created_at=document.get("created_at"),
        notes=tuple(document.get("notes", ())),
        gates=dict(document.get("gates", {})),
    )
    return with_digest(plan)
