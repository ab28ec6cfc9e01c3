"""The planner: findings + cluster state + playbook -> an ordered, reviewable plan. Pure.

Restores first (restore.py), then restarts (restart.py), the active controller last. Where a
topic's replicas hold two ids, two repairs are weighed (candidates.py): keep ZooKeeper's id and
restart the other replicas, or restore the other id and roll the replicas holding ZooKeeper's.
The availability model (availability.py) predicts each one's harm phase by phase; the least
harmful is planned (or the operator's choice), the order of its restarts is the one the model
predicts least harm for (order.py), and every step carries its prediction. A plan whose steps
could not be gated safely is refused, with the reasons, unless the operator overrides.

The fingerprint records the state the plan was made from (cluster id, registered brokers,
topic znode versions, the ids in the files it relies on), which apply compares with a fresh
read before it changes anything.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from remediate.formats.logdir import PARTITION_METADATA
from remediate.gates import migration_blocker
from remediate.kafka_lines import KafkaLines
from remediate.minisr import PlannedMinIsr, topic_min_isr
from remediate.plan.availability import (
    Model,
    MoveOp,
    Operation,
    PredictedTimeline,
    RestoreOp,
    TriggerOp,
    build_model,
    harm,
    simulate,
    stale_leaders,
)
from remediate.plan.batches import choose_batches
from remediate.plan.candidates import KEEP, MOVE_KEEP, MOVE_RESTORE, RESTORE, Split, split
from remediate.plan.estimate import RESTORE_S, estimate_s
from remediate.plan.fingerprint import FileKey, Fingerprint
from remediate.plan.model import (
    AnyStep,
    BatchingSummary,
    Candidate,
    MoveStep,
    Plan,
    PlanOptions,
    Prediction,
    RestartStep,
    RestoreStep,
    TriggerStep,
    restart_batches,
    with_digest,
)
from remediate.plan.moves import ReplicaMove, assign, bytes_per_broker
from remediate.plan.order import order_restarts
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
    mint_steps,
    restore_notes,
    restore_refusals,
    restore_steps,
)
from remediate.playbook import Action, Playbook
from remediate.scan.findings import Finding
from remediate.scan.kinds import MISMATCH_KINDS, FindingKind
from remediate.state import ClusterState, MoveFacts, ReplicaRef, TopicPartition

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


@dataclass(frozen=True)
class _Built:
    """One candidate's steps and what the model predicts for them."""

    name: str
    restores: tuple[RestoreStep, ...]
    restarts: tuple[RestartStep, ...]
    affected: tuple[Finding, ...]
    skipped: tuple[tuple[int, str], ...]
    timeline: PredictedTimeline
    summary: str
    blocked: str | None = None
    # Steps other than restores and restarts (a move candidate's move and trigger).
    others: tuple[AnyStep, ...] = ()
    bytes_to_copy: Mapping[int, int] | None = None
    batchings: tuple[BatchingSummary, ...] = ()

    @property
    def batches(self) -> int:
        """How many batches the restarts run in."""
        return len(restart_batches(self.restarts))

    @property
    def steps(self) -> tuple[AnyStep, ...]:
        return (*self.restores, *self.others, *self.restarts)


def _cleared(step: RestartStep) -> frozenset[TopicPartition]:
    """The partitions whose partition.metadata the step deletes (its files are its
    partitions' files, made by replica_file)."""
    suffix = f"/{PARTITION_METADATA}"
    directories = {path.rsplit("/", 2)[-2] for path in step.files if path.endswith(suffix)}
    return frozenset(tp for tp in step.partitions if str(tp) in directories)


def _prediction(phase_index: int, timeline: PredictedTimeline) -> Prediction:
    if phase_index >= len(timeline.phases):
        return Prediction()
    phase = timeline.phases[phase_index]
    return Prediction(
        during=tuple(sorted(phase.during)),
        after=tuple(sorted(phase.after)),
        out_of_isr_after=tuple(sorted(phase.out_of_isr_after)),
        last_in_isr=tuple(sorted(phase.last_in_isr)),
    )


def _rolled_findings(splits: Sequence[Split], findings: Sequence[Finding]) -> list[Finding]:
    rolled = {r for s in splits for r in s.rolled}
    return [
        f
        for f in findings
        if f.kind == FindingKind.OK
        and f.topic is not None
        and f.partition is not None
        and f.broker is not None
        and ReplicaRef(f.broker, TopicPartition(f.topic, f.partition)) in rolled
    ]


def _offline_findings(
    model: Model, restored: Collection[str], findings: Sequence[Finding]
) -> list[Finding]:
    """The findings of the replicas of `restored` topics their broker marked Offline (3.0):
    a restore does not reach them, a restart after it does."""
    offline = {ReplicaRef(b, tp) for tp, b in model.offline() if tp.topic in restored}
    return [
        f
        for f in findings
        if f.topic is not None
        and f.partition is not None
        and f.broker is not None
        and f.kind in MISMATCH_KINDS
        and ReplicaRef(f.broker, TopicPartition(f.topic, f.partition)) in offline
    ]


def _roll_reason(step: RestartStep, splits: Sequence[Split], offline: Sequence[Finding]) -> str:
    mine = [str(r.partition) for s in splits for r in s.rolled if r.broker == step.broker]
    dark = sorted(f"{f.topic}-{f.partition}" for f in offline if f.broker == step.broker)
    if dark and not mine:
        return (
            f"{len(dark)} replica(s) rejected their id after a restart during the incident and"
            f" are Offline on this Kafka 3.0 broker ({', '.join(dark[:6])}"
            f"{', ...' if len(dark) > 6 else ''}): the restore does not reach them, a restart"
            " after it does"
        )
    if not mine:
        return step.reason
    ids = "; ".join(f"{s.topic}: {s.zk_id} until the restore writes {s.other_id}" for s in splits)
    return (
        f"{len(mine)} replica(s) hold the id ZooKeeper held before the restore"
        f" ({', '.join(mine[:6])}{', ...' if len(mine) > 6 else ''}) [{ids}]"
    )


def _restore_with_roll(s: Split, state: ClusterState, restore: Playbook) -> RestoreStep:
    topic = state.topics[s.topic]
    return RestoreStep(
        topic=s.topic,
        topic_id=s.other_id,
        zk_topic_id=s.zk_id,
        znode_version=topic.znode_version,
        reelect=True,
        reason=(
            f"{s.holders} replica(s) hold {s.other_id}, {len(s.rolled)} hold ZooKeeper's"
            f" {s.zk_id}: write {s.other_id} back and re-elect the controller, which heals at"
            f" once every partition whose replicas all hold it; the {len(s.rolled)} others are"
            " rolled by the restart steps that follow"
        ),
        partitions=tuple(TopicPartition(s.topic, p) for p in sorted(topic.assignment.partitions)),
        actions=tuple(step.action for step in restore.steps),
        impact=(
            "one controller election: every broker receives LeaderAndIsr again;"
            f" the replicas holding {s.zk_id} reject it until their broker is rolled",
        ),
        playbook=restore.name,
        rolled_later=s.rolled,
    )


@dataclass(frozen=True)
class _Context:
    """What every candidate is built from."""

    state: ClusterState
    findings: Sequence[Finding]
    playbook: Playbook
    options: PlanOptions
    brokers: tuple[int, ...]
    restarting: bool
    model: Model


def _build(
    c: _Context, name: str, chosen_restores: Sequence[RestoreStep], splits: Sequence[Split]
) -> _Built:
    """One candidate's steps, ordered by the model, each with its prediction."""
    state, findings, playbook, options = c.state, c.findings, c.playbook, c.options
    restored = {s.topic for s in chosen_restores}
    offline = _offline_findings(c.model, restored, findings)
    restarts, affected, skipped = _restart_steps(
        state,
        findings,
        playbook,
        options,
        c.brokers,
        restored,
        c.restarting,
        [*_rolled_findings(splits, findings), *offline],
    )
    if name == RESTORE and options.restore_only:
        skipped += [(s.broker, "restore phase only (--restore-only)") for s in restarts]
        restarts = []
    before: list[Operation] = [RestoreOp(s.topic, s.topic_id) for s in chosen_restores]
    cleared = {step.broker: _cleared(step) for step in restarts}
    order = order_restarts(c.model, [s.broker for s in restarts], cleared, before=before)
    batchings = choose_batches(
        c.model,
        order.brokers,
        cleared,
        before=before,
        max_size=options.max_batch_size,
        racks={b: r.rack for b, r in state.brokers.items()},
        alone=order.timeline,
    )
    chosen = batchings[0]
    by_broker = {s.broker: s for s in restarts}
    weighed = len(batchings) > 1
    ordered = tuple(
        replace(
            by_broker[b],
            reason=_roll_reason(by_broker[b], splits, offline),
            order_reason=order.reasons[b],
            predicted=_prediction(len(before) + i, chosen.timeline),
            batch=batch.brokers if weighed else (),
            batch_reason=batch.reason if weighed else "",
        )
        for i, batch in enumerate(chosen.batches)
        for b in batch.brokers
    )
    with_predictions = tuple(
        replace(
            s,
            predicted=_prediction(i, chosen.timeline),
            offline_until_restart=tuple(
                sorted(
                    {
                        ReplicaRef(f.broker, TopicPartition(f.topic, f.partition))
                        for f in offline
                        if f.topic == s.topic and f.partition is not None and f.broker is not None
                    },
                    key=str,
                )
            ),
        )
        for i, s in enumerate(chosen_restores)
    )
    return _Built(
        name=name,
        restores=with_predictions,
        restarts=ordered,
        affected=tuple(affected),
        skipped=tuple(skipped),
        timeline=chosen.timeline,
        summary=_summary(name, with_predictions, ordered, splits),
        batchings=tuple(b.summary() for b in batchings) if weighed else (),
    )


def _cluster_refusals(
    state: ClusterState, lines: KafkaLines, steps: Sequence[AnyStep]
) -> list[str]:
    """What refuses the whole plan: a migration to KRaft begun (with or without steps; `apply`
    refuses it whatever the plan says, execute/locked.py), a release with no rules."""
    refusals = [r for r in (migration_blocker(state),) if r is not None]
    unknown_release = lines.refusal(state.brokers)
    if unknown_release is not None and steps:
        refusals.append(unknown_release)
    return refusals


def make_plan(
    *,
    cluster: str,
    state: ClusterState,
    findings: Sequence[Finding],
    playbook: Playbook,
    lines: KafkaLines,
    options: PlanOptions = DEFAULT_OPTIONS,
    known_brokers: Iterable[int] = (),
    restore: Playbook | None = None,
    moves: Playbook | None = None,
    disks: MoveFacts | None = None,
) -> Plan:
    """The plan. `known_brokers` are the configured brokers (so the ones left out are named).
    `lines` is the Kafka release each broker runs, as read from the cluster: the model, the
    repairs offered and the notes follow each broker's rules; a live broker whose release is
    not known or not supported refuses the plan.

    With a `restore` playbook (or when `playbook` is one), topics whose replicas all agree on
    an id ZooKeeper does not hold get a restore step, first; their replicas get no restart.
    Where a restart playbook and a restore playbook are both given, both candidates are
    built and weighed.
    """
    restarting = not is_restore_playbook(playbook)
    if not restarting:
        restore = playbook
    missing = {f.topic for f in findings if f.kind == FindingKind.ZK_TOPIC_ID_MISSING and f.topic}
    mismatched = {f.topic for f in findings if f.kind in MISMATCH_KINDS and f.topic}
    found = agreements(missing | mismatched, state, findings)
    restores: list[RestoreStep] = []
    why_not: dict[str, str] = {}
    if restore is not None:
        restores, why_not = restore_steps(state, found, restore, options)
        restores += mint_steps(state, found, restore, options)
    unclaimed = {t for t in missing if found[t].unclaimed}
    brokers = sorted(
        set(known_brokers)
        | set(state.brokers)
        | {f.broker for f in findings if f.broker is not None}
    )
    model = build_model(state, findings, min_isr=options.min_isr_rule, lines=lines)

    context = _Context(state, findings, playbook, options, tuple(brokers), restarting, model)

    def build(name: str, chosen: Sequence[RestoreStep], splits: Sequence[Split]) -> _Built:
        return _build(context, name, chosen, splits)

    # Restores that are not a choice: ids ZooKeeper lost.
    forced = [s for s in restores if s.topic in missing]
    agreed = [s for s in restores if s.topic not in missing]
    built: dict[str, _Built] = {}
    if restarting:
        built[KEEP] = build(KEEP, forced, ())
    blocked: list[str] = []
    splits: list[Split] = []
    if restore is not None:
        splits, blocked = _splits(
            state, findings, mismatched - {s.topic for s in agreed}, restore, options
        )
        rolls = [_restore_with_roll(s, state, restore) for s in splits]
        chosen = sorted([*forced, *agreed, *rolls], key=lambda s: (s.reelect, s.topic))
        if not restarting or chosen != forced:
            built[RESTORE] = build(RESTORE, chosen, splits)
    not_movable = (
        _offer_moves(
            built,
            context,
            Moving(moves, restore, disks),
            forced,
            sorted(mismatched),
            [s for s in agreed if s.topic in mismatched],
        )
        if restarting
        else []
    )
    name = _choose(built, options)
    plan_of = built[name]
    candidates = _candidates(built, name, blocked, state)
    steps: list[AnyStep] = list(plan_of.steps)
    restarts = list(plan_of.restarts)
    chosen_restores = list(plan_of.restores)
    timeline = plan_of.timeline
    estimate = _estimate(plan_of, playbook, restore, options)
    refusals = _cluster_refusals(state, lines, steps)
    refusals += restart_refusals(state, findings, restarts, timeline, options)
    refusals += restore_refusals(state, chosen_restores, restarts, missing - unclaimed, why_not)
    # A topic "restore-id" can repair is weighed as a candidate, not noted as impossible.
    weighed = {s.topic for s in chosen_restores} | {s.topic for s in splits}
    notes = restore_notes(why_not, mismatched - weighed)
    notes += _model_notes(timeline, options, restarting=bool(restarts))
    notes += _line_notes(model, timeline, state)
    notes += not_movable + _estimate_notes(bool(restarts), playbook, options)
    return with_digest(
        Plan(
            cluster=cluster,
            cluster_id=state.cluster_id,
            playbook=playbook.name,
            playbook_version=playbook.version,
            controller=state.controller_id,
            fingerprint=_fingerprint(state, list(plan_of.affected), steps, playbook, findings),
            steps=tuple(steps),
            skipped=tuple(sorted(plan_of.skipped)),
            refusals=tuple(refusals),
            allow_unsafe=options.allow_unsafe,
            estimate_s=estimate,
            created_at=options.created_at,
            notes=tuple(notes),
            gates=_gates(steps, playbook, restore, moves),
            candidates=candidates if len(candidates) > 1 else (),
            newly_unavailable=timeline.newly_unavailable() if steps else {},
            unavailable_now=tuple(sorted(timeline.unavailable_now)) if steps else (),
            min_isr=options.min_isr,
            min_isr_topics=_min_isr_topics(state, steps, options),
            kafka_lines=lines,
            batchings=plan_of.batchings,
        )
    )


def _min_isr_topics(
    state: ClusterState, steps: Sequence[AnyStep], options: PlanOptions
) -> dict[str, PlannedMinIsr]:
    """Each topic with a partition on a step's broker: its min.insync.replicas and source."""
    if options.min_isr is None:
        return {}
    brokers = {s.broker for s in steps if isinstance(s, RestartStep)}
    topics = {tp.topic for b in brokers for tp in state.partitions_on(b)}
    topics |= {s.topic for s in steps if isinstance(s, RestoreStep)}
    topics |= {tp.topic for s in steps for tp in getattr(s, "partitions", ())}
    return {
        t: topic_min_isr(t, state.topics[t].config, options.min_isr)
        for t in sorted(topics)
        if t in state.topics
    }


def _gates(
    steps: Sequence[AnyStep],
    playbook: Playbook,
    restore: Playbook | None,
    moves: Playbook | None,
) -> dict[str, dict[str, object]]:
    """The gate parameters of every playbook the plan uses, as given (cluster.yaml's timeouts
    already in them): approved with the plan, and what its run waits by."""
    used = [playbook, restore]
    if moves is not None and any(isinstance(s, (MoveStep, TriggerStep)) for s in steps):
        used.append(moves)
    return {p.name: p.gates.model_dump(mode="json") for p in used if p is not None}


@dataclass(frozen=True)
class Moving:
    """What the repairs without restarts are built from: the move playbook, the restore
    playbook (for move-restore-id), and the facts of the brokers' disks."""

    playbook: Playbook | None
    restore: Playbook | None
    disks: MoveFacts | None


def _offer_moves(
    built: dict[str, _Built],
    c: _Context,
    moving: Moving,
    forced: Sequence[RestoreStep],
    mismatched: Sequence[str],
    agreed: Sequence[RestoreStep],
) -> list[str]:
    """Adds the repairs without restarts to `built` where they can be offered; the notes
    saying why the others are not (none when moves were not asked about: no move playbook,
    or no way to Kafka's admin API)."""
    playbook, disks = moving.playbook, moving.disks
    if playbook is None or disks is None or not mismatched:
        return []
    lines = c.model.lines
    newer = sorted(b for b in disks.brokers if not lines.moves_clear_ids([b]))
    if newer:
        return [
            f"{MOVE_KEEP} and {MOVE_RESTORE} (no restart) are not offered: a moved replica"
            " keeps its id on Kafka 3.0 and later (KAFKA-12426), and broker(s)"
            f" {', '.join(map(str, newer))} do not run 2.8 ({lines.summary()})"
        ]
    wanted = [
        t for t in mismatched if t not in playbook.exclude_topics or t in c.options.include_topics
    ]
    notes = []
    keep = _move_keep(c, playbook, disks, forced, wanted)
    if isinstance(keep, str):
        notes.append(f"{MOVE_KEEP} (no restart) is not offered: {keep}")
    else:
        built[MOVE_KEEP] = keep
    back = _move_restore(c, moving, forced, wanted, agreed)
    if isinstance(back, str):
        notes.append(f"{MOVE_RESTORE} (no restart) is not offered: {back}")
    else:
        built[MOVE_RESTORE] = back
    return notes


def _move_step(
    c: _Context,
    playbook: Playbook,
    moves: tuple[ReplicaMove, ...],
    reason: str,
    phase: int,
    timeline: PredictedTimeline,
) -> MoveStep:
    actions = tuple(step.action for step in playbook.steps)
    return MoveStep(
        moves=moves,
        reason=reason,
        actions=actions[: actions.index(Action.GATE_SWAPPED)],
        playbook=playbook.name,
        predicted=_prediction(phase, timeline),
        throttle=c.options.move_throttle_bytes_per_s,
    )


def _move_keep(
    c: _Context,
    playbook: Playbook,
    disks: MoveFacts,
    forced: Sequence[RestoreStep],
    wanted: Sequence[str],
) -> _Built | str:
    """ "move-keep-zk-id": move every replica holding another id than ZooKeeper's to another
    log dir of its broker, then reassign each of their partitions to its own replicas; or why
    it cannot be offered here (which precondition failed, for which broker)."""
    if forced:
        return "a topic without an id in ZooKeeper needs a restore first"
    stale = [
        f
        for f in c.findings
        if f.kind in (FindingKind.TOPIC_ID_MISMATCH, FindingKind.TOPIC_ID_MISMATCH_OUT_OF_ISR)
        and f.topic in wanted
        and f.partition is not None
        and f.broker is not None
    ]
    if not stale:
        return "no replica holds another id than ZooKeeper's"
    if any(f.kind == FindingKind.METADATA_CORRUPT and f.topic in wanted for f in c.findings):
        return "a replica's partition.metadata cannot be read"
    assigned, why_not = assign(
        [(TopicPartition(str(f.topic), int(f.partition or 0)), int(f.broker or 0)) for f in stale],
        disks,
    )
    if why_not is not None:
        return why_not
    partitions = tuple(sorted({m.partition for m in assigned}, key=str))
    for tp in partitions:
        zk = c.state.partitions.get(tp)
        if zk is None or zk.leader < 0 or zk.leader not in c.state.brokers:
            return f"{tp} has no live leader to send the trigger's LeaderAndIsr"
    operations: list[Operation] = [
        MoveOp(frozenset((m.partition, m.broker) for m in assigned)),
        TriggerOp(frozenset(partitions)),
    ]
    timeline = simulate(c.model, operations)
    actions = tuple(step.action for step in playbook.steps)
    per_broker = bytes_per_broker(assigned)
    move = _move_step(
        c,
        playbook,
        assigned,
        f"{len(assigned)} replica(s) on {len(per_broker)} broker(s) hold another id than"
        " ZooKeeper's: each moves to another log dir of its broker, where Kafka 2.8 builds"
        " it with no id",
        0,
        timeline,
    )
    moved: dict[TopicPartition, list[int]] = {}
    for m in assigned:
        moved.setdefault(m.partition, []).append(m.broker)
    trigger = TriggerStep(
        partitions=partitions,
        reason=(
            "each partition reassigned to its own replicas: the LeaderAndIsr that follows"
            " carries ZooKeeper's id, which every moved replica takes"
        ),
        actions=actions[actions.index(Action.GATE_SWAPPED) :],
        playbook=playbook.name,
        moved={tp: tuple(sorted(b)) for tp, b in moved.items()},
        predicted=_prediction(1, timeline),
    )
    return _Built(
        name=MOVE_KEEP,
        restores=(),
        restarts=(),
        affected=tuple(stale),
        skipped=(),
        timeline=timeline,
        summary=(
            f"keep ZooKeeper's id with no restart: move {len(assigned)} replica(s) to another"
            " log dir of their broker (Kafka 2.8), then reassign"
            f" {len(partitions)} partition(s) to their own replicas"
        ),
        others=(move, trigger),
        bytes_to_copy=per_broker,
    )


def _move_restore(
    c: _Context,
    moving: Moving,
    forced: Sequence[RestoreStep],
    wanted: Sequence[str],
    agreed: Sequence[RestoreStep],
) -> _Built | str:
    """ "move-restore-id": move every replica holding ZooKeeper's id to another log dir of its
    broker, then write the other id back and re-elect the controller: the old partitions heal
    at once with none of their data copied, the moved replicas take the restored id. Or why
    it cannot be offered here."""
    playbook, restore, disks = moving.playbook, moving.restore, moving.disks
    assert playbook is not None and disks is not None
    if restore is None:
        return "no restore playbook was given"
    if forced:
        return "a topic without an id in ZooKeeper needs a restore first"
    restored = {s.topic for s in agreed}
    splits = []
    for topic in wanted:
        if topic in restored:
            continue
        if topic in restore.exclude_topics and topic not in c.options.include_topics:
            return f"{topic} is excluded from restores by playbook {restore.name}"
        found = split(topic, c.state, c.findings)
        if isinstance(found, str):
            return found
        splits.append(found)
    rolled = [(r.partition, r.broker) for s in splits for r in s.rolled]
    if not rolled:
        return "no replica holds ZooKeeper's id: restore-id needs no move"
    assigned, why_not = assign(rolled, disks)
    if why_not is not None:
        return why_not
    steps = sorted(
        [*agreed, *(_restore_after_moves(s, c.state, restore) for s in splits)],
        key=lambda s: (s.reelect, s.topic),
    )
    operations: list[Operation] = [
        MoveOp(frozenset((m.partition, m.broker) for m in assigned)),
        *(RestoreOp(s.topic, s.topic_id) for s in steps),
    ]
    timeline = simulate(c.model, operations)
    per_broker = bytes_per_broker(assigned)
    move = _move_step(
        c,
        playbook,
        assigned,
        f"{len(assigned)} replica(s) on {len(per_broker)} broker(s) hold ZooKeeper's id: each"
        " moves to another log dir of its broker, where Kafka 2.8 builds it with no id, so"
        " that it takes the id the restore writes back",
        0,
        timeline,
    )
    restores = tuple(
        replace(s, predicted=_prediction(1 + i, timeline)) for i, s in enumerate(steps)
    )
    return _Built(
        name=MOVE_RESTORE,
        restores=(),
        restarts=(),
        affected=tuple(
            f for f in c.findings if f.kind in MISMATCH_KINDS and f.topic in set(wanted)
        ),
        skipped=(),
        timeline=timeline,
        summary=(
            f"restore the other id with no restart: move the {len(assigned)} replica(s)"
            " holding ZooKeeper's id to another log dir of their broker (Kafka 2.8), then"
            f" {len(restores)} znode write(s) and controller re-election(s), which heal the"
            " other replicas at once, none of their data copied"
        ),
        others=(move, *restores),
        bytes_to_copy=per_broker,
    )


def _restore_after_moves(s: Split, state: ClusterState, restore: Playbook) -> RestoreStep:
    step = _restore_with_roll(s, state, restore)
    return replace(
        step,
        reason=(
            f"{s.holders} replica(s) hold {s.other_id}; the {len(s.rolled)} that held"
            f" ZooKeeper's {s.zk_id} were moved and hold no id: write {s.other_id} back and"
            " re-elect the controller, whose LeaderAndIsr heals the first at once and gives"
            " the moved ones the restored id"
        ),
        impact=(
            "one controller election: every broker receives LeaderAndIsr again; the moved"
            f" replicas take {s.other_id}",
        ),
        rolled_later=(),
    )


def _estimate(
    built: _Built, playbook: Playbook, restore: Playbook | None, options: PlanOptions
) -> float:
    return estimate_s(
        restart_batches(built.restarts),
        restart_s=playbook.gates.expected_restart_s + playbook.gates.stability_window_s,
        restores=len(built.restores),
        restore_s=restore.gates.stability_window_s + RESTORE_S if restore else 0.0,
        observed=options.observed_restarts,
    )


def _estimate_notes(restarting: bool, playbook: Playbook, options: PlanOptions) -> list[str]:
    observed = options.observed_restarts
    if not restarting or observed is None:
        return []
    said = observed.note(playbook.gates.expected_restart_s + playbook.gates.stability_window_s)
    return [said] if said else []


def _line_notes(model: Model, timeline: PredictedTimeline, state: ClusterState) -> list[str]:
    """What the brokers' Kafka releases change: the consumers the failover already stopped
    (3.1+), the replicas a restore leaves Offline (3.0)."""
    notes = []
    stale = [tp for tp in stale_leaders(model) if tp.topic in model.topics]
    if stale:
        shown = ", ".join(map(str, stale[:6])) + (" and more" if len(stale) > 6 else "")
        notes.append(
            f"{len(stale)} partition(s) have a leader holding another id than ZooKeeper's on"
            f" Kafka 3.1 or later ({shown}): consumers on clients 3.1 or later have failed"
            " there with INCONSISTENT_TOPIC_ID since the controller failover, before any"
            " restart; they read again once the partition's leader holds ZooKeeper's id"
            " (older clients do not send the id and are not affected)"
        )
    offline = [f"{tp} on broker {b}" for tp, b in timeline.offline_after if b in state.brokers]
    if offline:
        notes.append(
            f"on Kafka 3.0, {len(offline)} replica(s) were rejected for their id after a"
            " restart and are Offline on their broker, deaf to every LeaderAndIsr until it"
            f" restarts again, after the id is right: {', '.join(offline[:6])}"
            + (" and more" if len(offline) > 6 else "")
        )
    return notes


def _model_notes(
    timeline: PredictedTimeline, options: PlanOptions, *, restarting: bool
) -> list[str]:
    notes = []
    if restarting and not timeline.converged and not options.restore_only:
        notes.append(
            "the model does not predict convergence after the last step for "
            + ", ".join(str(tp) for tp in timeline.unconverged[:6])
            + (" and more" if len(timeline.unconverged) > 6 else "")
            + "; plan again after this run"
        )
    if options.restore_only:
        notes.append(
            "restore phase only: the replicas listed under each restore still hold the id"
            " ZooKeeper held; plan again to roll them (until then a restart of their brokers"
            " takes their partitions offline)"
        )
    return notes


def _splits(
    state: ClusterState,
    findings: Sequence[Finding],
    topics: Iterable[str],
    restore: Playbook,
    options: PlanOptions,
) -> tuple[list[Split], list[str]]:
    """The topics "restore-id" restores with a roll, and why the others cannot be."""
    splits: list[Split] = []
    blocked: list[str] = []
    for topic in sorted(topics):
        if topic in restore.exclude_topics and topic not in options.include_topics:
            continue
        result = split(topic, state, findings)
        if isinstance(result, Split):
            splits.append(result)
        else:
            blocked.append(result)
    return splits, blocked


def _candidates(
    built: Mapping[str, _Built], name: str, blocked: Sequence[str], state: ClusterState
) -> tuple[Candidate, ...]:
    return tuple(
        Candidate(
            name=b.name,
            chosen=b.name == name,
            summary=b.summary,
            targets=_targets(b, state),
            restarts=len(b.restarts),
            newly_unavailable=tuple(b.timeline.newly_unavailable()),
            unavailable_phases=b.timeline.unavailable_phases,
            windows=b.timeline.windows(),
            converges=b.timeline.converged,
            blocked="; ".join(blocked) if b.name == RESTORE and blocked else None,
            bytes_to_copy=b.bytes_to_copy or {},
        )
        for b in built.values()
    )


def _choose(built: Mapping[str, _Built], options: PlanOptions) -> str:
    """The operator's candidate, else the least harm the model predicts."""
    if options.restore_only:
        if RESTORE not in built:
            raise ValueError("--restore-only: no topic here can be repaired by a restore")
        return RESTORE
    if options.candidate != "auto" and options.candidate in built:
        return options.candidate
    if options.candidate != "auto":
        raise ValueError(
            f"candidate {options.candidate!r} is not possible here (possible: {sorted(built)})"
        )
    # Equal harm: the fewer bytes copied, then ZooKeeper's id kept.
    return min(
        built.values(),
        key=lambda b: (
            harm(b.timeline, b.batches),
            sum((b.bytes_to_copy or {}).values()),
            b.name not in (KEEP, MOVE_KEEP),
            b.name,
        ),
    ).name


def _targets(built: _Built, state: ClusterState) -> dict[str, str]:
    topics = {f.topic for f in built.affected if f.topic} | {s.topic for s in built.restores}
    restored = {s.topic: s.topic_id for s in built.restores}
    return {
        t: restored.get(t) or state.topics[t].topic_id or "a new id"
        for t in sorted(topics)
        if t in state.topics
    }


def _summary(
    name: str,
    restores: Sequence[RestoreStep],
    restarts: Sequence[RestartStep],
    splits: Sequence[Split],
) -> str:
    if name == KEEP:
        return (
            f"keep ZooKeeper's id: back up and delete the files that hold another id and restart"
            f" {len(restarts)} broker(s), the active controller last"
        )
    rolled = sum(len(s.rolled) for s in splits)
    return (
        f"restore the other id: {len(restores)} znode write(s) and controller re-election(s),"
        " which heal at once every partition whose replicas all hold it, then roll"
        f" {len(restarts)} broker(s) for the {rolled} replica(s) holding ZooKeeper's id"
        " (the restore and the roll can be approved apart: --restore-only)"
    )


def _restart_steps(
    state: ClusterState,
    findings: Sequence[Finding],
    playbook: Playbook,
    options: PlanOptions,
    brokers: Sequence[int],
    restored: set[str],
    restarting: bool,
    rolled: Sequence[Finding],
) -> tuple[list[RestartStep], list[Finding], list[tuple[int, str]]]:
    """The restart steps (unordered), the findings they act on, the brokers left out."""
    restart_kinds = frozenset(playbook.applies_to) if restarting else frozenset()
    eligible = [f for f in findings if is_eligible(f, playbook, options)]
    affected = [f for f in eligible if f.kind in restart_kinds and f.topic not in restored]
    affected += [f for f in rolled if is_eligible(f, playbook, options)] if restarting else []
    by_broker: dict[int, list[Finding]] = {}
    for f in affected:
        if f.broker is not None:
            by_broker.setdefault(f.broker, []).append(f)
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
    steps = [
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
    return steps, affected, skipped
