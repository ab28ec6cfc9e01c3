"""The executor's decisions, as pure functions of what it read: which restart goes next, whether
a restore may write, whether a topic's replicas agree, which replicas still hold a stale id,
whether a broker that has not registered in time is still loading its logs.

No I/O and no clock: the executor reads, calls these, and journals the reason they return
(None when nothing blocks), as the gates in remediate/gates.py do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from remediate.collect.snapshot import ReplicaRow
from remediate.errors import FormatError
from remediate.execute.steps import StepKey
from remediate.formats.logdir import parse_partition_dir
from remediate.formats.logloading import LogLoading
from remediate.formats.znodes import topic_path
from remediate.gates import StaleIdHolder, missing_id_blocker
from remediate.plan import Fingerprint, Plan, RestartStep, RestoreStep
from remediate.playbook import Action
from remediate.state import ClusterState, ReplicaRef, TopicPartition

NO_FILE = "no partition.metadata yet"
IndexedStep = tuple[int, RestartStep]


def started_restart(
    remaining: Sequence[IndexedStep], started: Collection[StepKey]
) -> IndexedStep | None:
    """The first of `remaining` with an action the journal shows `started` (a resumed run)."""
    for index, step in remaining:
        if any(k.index == index and k.broker == step.broker and not k.rollback for k in started):
            return index, step
    return None


def next_restart(
    remaining: Sequence[IndexedStep], started: Collection[StepKey], controller: int | None
) -> tuple[IndexedStep, str | None]:
    """The restart to carry out next, and the decision to journal when the order changed.

    A step the journal shows started is finished first (a resumed run). Otherwise the plan's
    order holds, except that the active `controller` goes last: it may have moved since the
    plan was made (a restore's re-election moves it by design). It does not go last where the
    order is the repair's own: when a remaining step deletes files or the plan predicts a
    partition unavailable in one, the availability model placed each restart, and a later
    step's prediction (and its gates) counts on the ones before it having run. After a
    `restore-id`'s election, say, the first broker to roll may hold the only replicas of the
    new partitions still refusing the restored id; rolled last, the brokers before it could
    never rejoin those partitions' ISRs.
    """
    resumed = started_restart(remaining, started)
    if resumed is not None:
        return resumed, None
    head = remaining[0]
    if head[1].broker == controller and len(remaining) > 1:
        if any(_order_matters(step) for _, step in remaining):
            return head, (
                f"broker {controller} is now the active controller but keeps its place in the"
                " plan's order: the remaining steps repair replicas in the order the plan's"
                " availability model chose"
            )
        later = next(r for r in remaining if r[1].broker != controller)
        return later, (
            f"broker {controller} is now the active controller: it goes last;"
            f" broker {later[1].broker} goes first"
        )
    return head, None


def batch_of(
    chosen: IndexedStep,
    remaining: Sequence[IndexedStep],
    started: Collection[StepKey],
    controller: int | None,
) -> tuple[list[IndexedStep], str | None]:
    """The steps to carry out together with `chosen` (its batch's still to do, plan/batches.py),
    and the decision to journal when the batch changed: a broker that has become the active
    controller since the plan leaves its batch, unless the journal shows it started, and
    restarts alone (`next_restart` places it: last, or where the plan's order needs it)."""
    _, step = chosen
    if not step.batched:
        return [chosen], None
    members = [(i, s) for i, s in remaining if s.batch == step.batch]
    moved = [(i, s) for i, s in members if s.broker == controller]
    if not moved or len(members) == 1:
        return members, None
    index, ours = moved[0]
    if any(k.index == index and k.broker == ours.broker and not k.rollback for k in started):
        return members, None
    others = [m for m in members if m != moved[0]]
    return others, (
        f"broker {controller} is now the active controller: it leaves its batch"
        f" ({', '.join(str(s.broker) for _, s in members)}) and restarts alone, after"
        f" broker(s) {', '.join(str(s.broker) for _, s in others)}"
    )


def _order_matters(step: RestartStep) -> bool:
    predicted = step.predicted
    return bool(step.files or predicted.expected or predicted.last_in_isr)


def agreement_blocker(
    step: RestoreStep, state: ClusterState, restored: Collection[str]
) -> str | None:
    """Why the topic znode may not be written now, before its replicas are asked: the topic
    is gone, its znode changed since the plan, or (for a re-election) another topic has no id
    that the new controller would mint."""
    topic = state.topics.get(step.topic)
    if topic is None:
        return f"topic {step.topic} is gone"
    if topic.znode_version != step.znode_version:
        return (
            f"{topic_path(step.topic)} is at version {topic.znode_version}, the plan was"
            f" made at {step.znode_version}"
        )
    if step.reelect:
        return missing_id_blocker(state, restored=restored)
    return None


def replica_hosts(state: ClusterState, topic: str) -> list[int]:
    """The brokers assigned a replica of `topic`."""
    assignment = state.topics[topic].assignment.partitions
    return sorted({b for replicas in assignment.values() for b in replicas})


def unconfigured_hosts_blocker(
    state: ClusterState, topic: str, configured: Collection[int]
) -> str | None:
    """Why the replicas of `topic` cannot all be inspected: a host is not configured."""
    if topic not in state.topics:
        return f"topic {topic} is gone"
    unknown = [b for b in replica_hosts(state, topic) if b not in configured]
    if unknown:
        return f"broker(s) {unknown} host {topic} but are not in the configuration"
    return None


def disagreement_blocker(
    state: ClusterState,
    topic: str,
    expected: str,
    rows: Mapping[int, Sequence[ReplicaRow] | str],
    *,
    rolled: Collection[ReplicaRef] = (),
    rolled_id: str | None = None,
    require_one: bool = True,
) -> str | None:
    """Why the replicas of `topic` do not all hold `expected`: every replica present,
    readable and holding it (or without the file yet: it takes ZooKeeper's id at its next
    LeaderAndIsr), and at least one holding it. `rows`: each host's replica rows, or why it
    could not be inspected. The replicas in `rolled` (the plan restarts them after the
    restore) may hold `rolled_id` instead, and nothing else."""
    if topic not in state.topics:
        return f"topic {topic} is gone"
    found: dict[tuple[int, int], str | None] = {}
    for broker, broker_rows in rows.items():
        if isinstance(broker_rows, str):
            return f"broker {broker} could not be inspected ({broker_rows})"
        for row in broker_rows:
            if row.topic == topic and row.dir_kind == "live" and row.partition is not None:
                no_file = row.metadata_state == "missing"
                found[(broker, row.partition)] = NO_FILE if no_file else row.file_topic_id
    assignment = state.topics[topic].assignment.partitions
    bad = [
        f"{ReplicaRef(b, TopicPartition(topic, p))}:"
        f" {found.get((b, p)) or 'no directory or unreadable'}"
        for p, replicas in sorted(assignment.items())
        for b in replicas
        if found.get((b, p)) not in (expected, NO_FILE)
        and not (
            ReplicaRef(b, TopicPartition(topic, p)) in rolled
            and rolled_id is not None
            and found.get((b, p)) == rolled_id
        )
    ]
    if bad:
        return f"replicas do not all hold {expected}: " + ", ".join(bad[:6])
    if require_one and expected not in found.values():
        return f"no replica holds {expected}"
    return None


def claimed_blocker(
    state: ClusterState, topic: str, rows: Mapping[int, Sequence[ReplicaRow] | str]
) -> str | None:
    """Why a controller election may not mint a new id for `topic` now: ZooKeeper holds one
    again, or a replica has written partition.metadata (it would reject the new id)."""
    if topic not in state.topics:
        return f"topic {topic} is gone"
    if state.topics[topic].topic_id is not None:
        return f"{topic} has a topic id in ZooKeeper again ({state.topics[topic].topic_id})"
    for broker, broker_rows in sorted(rows.items()):
        if isinstance(broker_rows, str):
            return f"broker {broker} could not be inspected ({broker_rows})"
        for row in broker_rows:
            if (
                row.topic == topic
                and row.partition is not None
                and row.dir_kind == "live"
                and row.metadata_state != "missing"
            ):
                return (
                    f"{ReplicaRef(broker, TopicPartition(topic, row.partition))} has a"
                    " partition.metadata now"
                    f" ({row.file_topic_id or row.metadata_state}): plan again"
                )
    return None


def files_disagreeing(
    state: ClusterState, broker: int, rows: Iterable[ReplicaRow]
) -> tuple[list[str], list[str]]:
    """(replicas on `broker` whose file holds another id than ZooKeeper, replicas without the
    file yet), among the partitions ZooKeeper assigns to `broker`."""
    wrong: list[str] = []
    missing: list[str] = []
    for row in rows:
        if row.topic is None or row.partition is None or row.dir_kind != "live":
            continue
        topic = state.topics.get(row.topic)
        if topic is None or broker not in topic.assignment.partitions.get(row.partition, ()):
            continue
        name = str(TopicPartition(row.topic, row.partition))
        if row.metadata_state == "missing":
            missing.append(name)
        elif row.file_topic_id != topic.topic_id:
            wrong.append(f"{name} holds {row.file_topic_id or row.metadata_state}")
    return wrong, missing


def stale_holders(
    fingerprint: Fingerprint,
    state: ClusterState,
    repaired: Collection[ReplicaRef],
) -> StaleIdHolder:
    """Replicas the plan saw holding an id ZooKeeper does not, less those repaired since.

    The one place that reads the plan fingerprint's files (each file -> the id found).
    """
    stale: dict[TopicPartition, set[int]] = {}
    for key, file_id in fingerprint.files.items():
        name = key.path.rsplit("/", 2)[-2]
        try:
            parsed = parse_partition_dir(name, source="plan fingerprint")
        except FormatError:
            continue
        if parsed.kind != "live":
            continue
        tp = TopicPartition(parsed.topic, parsed.partition)
        topic = state.topics.get(parsed.topic)
        broker = key.broker
        if topic is None or file_id is None or file_id == topic.topic_id:
            continue
        if ReplicaRef(broker, tp) not in repaired:
            stale.setdefault(tp, set()).add(broker)
    return StaleIdHolder({tp: frozenset(b) for tp, b in stale.items()})


@dataclass(frozen=True)
class ConvergenceScope:
    """What must have converged once a repair's last step is done: every partition of
    `topics` but the `excused` ones, whose replicas a later phase rolls (a restore whose roll
    is planned separately: `rolled_later` replicas on brokers this plan does not restart)."""

    topics: frozenset[str]
    excused: frozenset[TopicPartition]


def convergence_scope(plan: Plan) -> ConvergenceScope | None:
    """The convergence gate's scope, or None when the plan deletes no file (a rolling
    restart, a restore alone): those steps have gates of their own and converge nothing."""
    if not any(Action.DELETE in s.actions for s in plan.restarts):
        return None
    restarted = {s.broker for s in plan.restarts}
    topics = {tp.topic for step in plan.steps for tp in step.partitions} | {
        r.topic for r in plan.restores
    }
    excused = {
        replica.partition
        for restore in plan.restores
        for replica in restore.rolled_later
        if replica.broker not in restarted
    }
    return ConvergenceScope(frozenset(topics), frozenset(excused))


def converged_files_blocker(
    state: ClusterState,
    scope: ConvergenceScope,
    rows: Mapping[int, Sequence[ReplicaRow] | str],
) -> str | None:
    """Why a file of the scope's partitions does not hold ZooKeeper's id (`rows`: each
    host's replica rows, or why it could not be inspected). A replica without the file yet
    takes ZooKeeper's id when Kafka writes it."""
    wrong: list[str] = []
    for broker, broker_rows in sorted(rows.items()):
        if isinstance(broker_rows, str):
            return f"broker {broker} could not be inspected ({broker_rows})"
        relevant = [
            r
            for r in broker_rows
            if r.topic in scope.topics
            and r.partition is not None
            and (r.topic, r.partition) not in scope.excused
        ]
        found, _missing = files_disagreeing(state, broker, relevant)
        wrong += [f"{w} on broker {broker}" for w in found]
    if wrong:
        shown = ", ".join(wrong[:6]) + (f" and {len(wrong) - 6} more" if len(wrong) > 6 else "")
        return f"files still disagree with ZooKeeper: {shown}"
    return None


def scope_hosts(state: ClusterState, scope: ConvergenceScope) -> list[int]:
    """The brokers assigned a replica of the scope's topics."""
    return sorted({b for t in scope.topics if t in state.topics for b in replica_hosts(state, t)})


def loading_blocker(
    began: LogLoading, before: LogLoading, now: LogLoading, *, log: str = "its server.log"
) -> str | None:
    """Why a started broker's server.log (named `log` in the reason) does not justify waiting
    longer for it to register; None when it shows its logs loading, with lines it did not
    have at the last look.

    `began` is the look taken when the wait began, `before` the last look (`began` at the
    first timeout), `now` this one. A broker whose process starts twice in one wait is
    restarting (a service manager bringing a crashed broker back), not loading: it halts,
    as one whose log says its startup failed, or shows nothing new."""
    if now.problem is not None:
        return f"{log} could not be read ({now.problem})"
    if now.failed is not None:
        return f"{log} says its startup failed: {now.failed.text}"
    # A `starting` line the tail no longer holds is unknown, not gone: the tail is a window.
    new_starts = len(now.startups)
    if began.startup is not None and began.startup in now.startups:
        new_starts = len(now.startups) - 1 - now.startups.index(began.startup)
    known = before.startup is not None and now.startup is not None
    moved = known and before.startup not in (began.startup, now.startup)
    if new_starts > 1 or moved:
        return (
            f"{log} shows it started again since the wait began (another `starting` line):"
            " it is restarting, not loading its logs"
        )
    if now.last is not None and now.last != before.last:
        return None
    if new_starts == 0:
        return f"{log} shows no log loading since the wait began, nor a new `starting` line"
    if now.last is None:
        return f"{log} shows no log loading since the broker started"
    if now.loaded is not None:
        return f"{log} says its logs are loaded ({now.loaded.text}) and shows nothing since"
    return f"{log} shows no log loading since the last look (last: {now.last.text})"
