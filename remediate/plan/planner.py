"""The planner: findings + cluster state + playbook -> an ordered, reviewable plan. Pure.

Restores first (restore.py: no restart where every replica agrees on an id), then restarts
(restart.py: out of the ISR first, the active controller last). A plan whose steps could not
be gated safely is refused, with the reasons, unless the operator overrides. The fingerprint
records the state the plan was made from (cluster id, registered brokers, topic znode
versions, the ids in the files it relies on), which apply compares with a fresh read before
it changes anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from remediate.formats.logdir import PARTITION_METADATA
from remediate.plan.fingerprint import FileKey, Fingerprint
from remediate.plan.model import AnyStep, Plan, PlanOptions, RestartStep, RestoreStep, with_digest
from remediate.plan.restart import (
    is_eligible,
    replica_files,
    restart_refusals,
    restart_step,
    restart_targets,
    skip_reason,
)
from remediate.plan.restore import (
    agreements,
    is_restore_playbook,
    restore_notes,
    restore_refusals,
    restore_steps,
)
from remediate.playbook import Playbook
from remediate.scan.kinds import MISMATCH_KINDS, FindingKind
from remediate.scan.report import Finding
from remediate.state import ClusterState

DEFAULT_OPTIONS = PlanOptions()


def _fingerprint(
    state: ClusterState,
    affected: Sequence[Finding],
    steps: Sequence[AnyStep],
    playbook: Playbook,
    findings: Sequence[Finding],
) -> Fingerprint:
    restored = {s.topic for s in steps if isinstance(s, RestoreStep)}
    topics = sorted(
        {f.topic for f in affected if f.topic is not None and f.topic in state.topics} | restored
    )
    planned = {
        FileKey(step.broker, path)
        for step in steps
        if isinstance(step, RestartStep)
        for path in step.files
        if path.endswith(f"/{PARTITION_METADATA}")
    }
    files = {
        FileKey(f.broker, path): f.file_topic_id
        for f in affected
        if f.broker is not None
        for path in replica_files(f, playbook)
        if FileKey(f.broker, path) in planned
    }
    # A restore relies on every replica's file: any change to one of them is drift.
    for f in findings:
        if (
            f.topic in restored
            and f.log_dir is not None
            and f.partition is not None
            and f.broker is not None
        ):
            files[FileKey.metadata(f.broker, f.log_dir, f.topic, f.partition)] = f.file_topic_id
    return Fingerprint(
        cluster_id=state.cluster_id,
        brokers=tuple(sorted(state.brokers)),
        controller_epoch=state.controller_epoch,
        topics={t: state.topics[t].znode_version for t in topics},
        files=files,
    )


def make_plan(
    *,
    cluster: str,
    state: ClusterState,
    findings: Sequence[Finding],
    playbook: Playbook,
    options: PlanOptions = DEFAULT_OPTIONS,
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
        restores, why_not = restore_steps(state, found, restore, options)
    restored = {s.topic for s in restores}
    # A lost id no replica claims is harmless: whatever a new controller mints, all take it.
    unclaimed = {t for t in missing if found[t].unclaimed}
    eligible = [f for f in findings if is_eligible(f, playbook, options)]
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
    targets = restart_targets(state, brokers, by_broker, playbook) if restarting else []
    skipped = [
        (b, skip_reason(b, findings, playbook, options, restored))
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
        restart_step(
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
    refusals = restart_refusals(state, findings, restarts, options)
    refusals += restore_refusals(state, restores, restarts, missing - unclaimed, why_not)
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
            notes=tuple(restore_notes(why_not, mismatched)),
            gates={
                p.name: p.gates.model_dump(mode="json")
                for p in (playbook, restore)
                if p is not None
            },
        )
    )
