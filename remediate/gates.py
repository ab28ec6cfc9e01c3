"""Gates: pure decisions that return the reason they block, or None.

The same functions decide at plan time (on the state the plan was made from) and at apply
time (on state read a moment before the action). No I/O, no clock.

Restart safety follows the rule rolling tools use (Strimzi's KafkaAvailability), per partition
with a replica on the broker, with the topic's effective min.insync.replicas:

    replication factor <= min ISR         ignored (it can never be fully available anyway)
    |ISR| <  min ISR and broker a replica  blocks
    |ISR| == min ISR and broker in ISR     blocks

This project adds the rule the topic-id incident needs: a broker that still holds a topic id
ZooKeeper no longer has refuses every LeaderAndIsr for that partition, including the ISR
shrink a follower's restart causes and the leadership a leader's restart hands over. A
partition whose leader, or whose next leader, refuses cannot survive a restart of any of its
replicas without losing acks=all availability.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from remediate.formats.znodes import MigrationState
from remediate.minisr import MinIsrRule
from remediate.state import ClusterState, ReplicaRef, TopicPartition


def describe_migration(
    migration: MigrationState | None, *, controller: int | None, kraft_controller_epoch: int | None
) -> str | None:
    """What `/migration` and `/controller` show of a ZooKeeper-to-KRaft migration, or None
    when they show none."""
    if migration is None and kraft_controller_epoch is None:
        return None
    if migration is None:
        return (
            f"the active controller is KRaft controller {controller}"
            f" (epoch {kraft_controller_epoch}), in migration mode"
        )
    if migration.problem is not None:
        return f"/migration exists but does not parse ({migration.problem})"
    leader = (
        f"KRaft controller {migration.kraft_controller_id}"
        f" (epoch {migration.kraft_controller_epoch})"
    )
    if migration.metadata_migrated:
        return (
            f"{leader} copied ZooKeeper's metadata into KRaft (KRaft's log at offset"
            f" {migration.kraft_metadata_offset}): each topic's id is KRaft's now, for good"
        )
    return f"{leader} leads a migration whose metadata is not yet copied into KRaft"


# What an operator can do instead, once a migration has begun.
MIGRATION_ADVICE = (
    'a repair now could lose data (docs/preflight.md, "Before a KRaft migration"): until the'
    " brokers run in KRaft mode, Kafka's migration guide describes how to revert to ZooKeeper"
    " mode; then check, fix and check again"
)


def migration_blocker(state: ClusterState) -> str | None:
    """Why nothing may change the cluster: a ZooKeeper-to-KRaft migration has begun (KIP-866).
    During one, deleting partition.metadata makes the KRaft controller's full LeaderAndIsr
    fail, and rewriting a topic znode makes the next sync delete the topic (Kafka's
    KRaftMigrationZkWriter); after one, KRaft holds the ids, not ZooKeeper."""
    seen = describe_migration(
        state.migration,
        controller=state.controller_id,
        kraft_controller_epoch=state.kraft_controller_epoch,
    )
    if seen is None:
        return None
    return f"a ZooKeeper-to-KRaft migration has begun: {seen}; {MIGRATION_ADVICE}"


def restart_blocker(
    state: ClusterState,
    broker: int,
    *,
    min_isr: MinIsrRule,
    isr_override: Mapping[TopicPartition, Collection[int]] | None = None,
    ignore: Collection[TopicPartition] = (),
    batch: Collection[int] = (),
) -> str | None:
    """Why restarting `broker` now would take a partition below its min ISR (or None).

    `isr_override` lets the planner ask the question about an expected future ISR; `ignore`
    skips partitions the caller accepts to degrade (the ones the repair itself targets).
    `batch`: the brokers restarted together with `broker` (plan/batches.py): a partition
    must keep its min ISR outside all of them.
    """
    down = set(batch) | {broker}
    doing = (
        f"restarting broker {broker}"
        if len(down) == 1
        else f"restarting brokers {', '.join(map(str, sorted(down)))} together"
    )
    seen: set[TopicPartition] = set()
    for tp in sorted({tp for b in sorted(down) for tp in state.partitions_on(b)}):
        if tp in ignore or tp in seen:
            continue
        seen.add(tp)
        partition = state.partitions.get(tp)
        if partition is None:
            continue
        replicas = state.replicas(*tp)
        need = state.min_insync_replicas(tp, min_isr)
        if len(replicas) <= need:
            continue
        isr = set(isr_override[tp]) if isr_override and tp in isr_override else set(partition.isr)
        if len(isr) < need:
            return (
                f"{tp} is already under min.insync.replicas={need}"
                f" (isr {sorted(isr)}); {doing} would leave it with fewer"
            )
        if len(isr - down) < need and isr & down:
            if len(down) == 1:
                return (
                    f"{tp} has exactly min.insync.replicas={need} in sync"
                    f" (isr {sorted(isr)}); {doing} would take it below"
                )
            return (
                f"{tp} would keep {len(isr - down)} in-sync replica(s) outside the batch, under"
                f" min.insync.replicas={need} (isr {sorted(isr)}); {doing} would take it below"
            )
    return None


def offline_blocker(state: ClusterState, *, ignore: Collection[TopicPartition] = ()) -> str | None:
    """Why the cluster is not in a state to start a restart: an offline partition."""
    offline = sorted(tp for tp, p in state.partitions.items() if p.leader < 0 and tp not in ignore)
    if offline:
        names = ", ".join(str(tp) for tp in offline[:5])
        more = f" and {len(offline) - 5} more" if len(offline) > 5 else ""
        return f"partition(s) without a leader: {names}{more}"
    return None


def registration_blocker(
    state: ClusterState, expected: Iterable[int], *, allow_missing: Collection[int] = ()
) -> str | None:
    """Why not every expected broker is registered (except the ones allowed to be down)."""
    missing = sorted(b for b in expected if b not in state.brokers and b not in allow_missing)
    if missing:
        return f"broker(s) {missing} are not registered in ZooKeeper"
    return None


def next_leader(
    state: ClusterState, tp: TopicPartition, shutting_down: int, batch: Collection[int] = ()
) -> int | None:
    """Who the controller would make leader if `shutting_down` stopped now, with its `batch`
    (controlled shutdown: the first replica in assignment order that is in the ISR, registered
    and not shutting down)."""
    partition = state.partitions.get(tp)
    if partition is None:
        return None
    leaving = set(batch) | {shutting_down}
    for replica in state.replicas(*tp):
        if replica not in leaving and replica in partition.isr and replica in state.brokers:
            return replica
    return None


@dataclass(frozen=True)
class StaleIdHolder:
    """Which brokers hold, in memory, a topic id other than ZooKeeper's, per partition."""

    by_partition: Mapping[TopicPartition, frozenset[int]]

    def holds_stale_id(self, tp: TopicPartition, broker: int) -> bool:
        return broker in self.by_partition.get(tp, frozenset())


def refusal_blocker(
    state: ClusterState,
    broker: int,
    stale: StaleIdHolder,
    *,
    partitions: Iterable[TopicPartition] | None = None,
    batch: Collection[int] = (),
) -> str | None:
    """Why restarting `broker` (with its `batch`) would stall a partition whose leader refuses
    LeaderAndIsr.

    If `broker` follows partition p and p's leader holds a stale id, the leader refuses the
    ISR shrink the restart causes and its high watermark stops. If `broker` leads p, the
    controller hands leadership to the next in-sync replica; if that one holds a stale id it
    refuses, and p has no working leader.
    """
    for tp in partitions if partitions is not None else state.partitions_on(broker):
        partition = state.partitions.get(tp)
        if partition is None or len(state.replicas(*tp)) < 2 or partition.leader < 0:
            continue
        if partition.leader == broker or partition.leader in batch:
            # Its leader stops with the batch: the leader after it is the one to ask.
            successor = next_leader(state, tp, partition.leader, batch)
            if successor is not None and stale.holds_stale_id(tp, successor):
                return (
                    f"{tp}: broker {partition.leader} leads it and its next leader,"
                    f" broker {successor}, holds a topic id ZooKeeper no longer has; it would"
                    " refuse the leadership and the partition would have no working leader"
                )
        elif stale.holds_stale_id(tp, partition.leader):
            return (
                f"{tp}: its leader, broker {partition.leader}, holds a topic id"
                f" ZooKeeper no longer has; it would refuse the ISR change a restart of broker"
                f" {broker} causes and stop acknowledging acks=all writes"
            )
    return None


# -- the executor's gates, decided on a fresh read right before each action ------------------


def stopped_blocker(state: ClusterState, broker: int) -> str | None:
    """Why `broker` is not yet stopped as far as ZooKeeper can tell."""
    if broker in state.brokers:
        return f"broker {broker} is still registered in ZooKeeper"
    return None


def in_sync_blocker(
    state: ClusterState, broker: int, *, excused: Collection[TopicPartition] = ()
) -> str | None:
    """Why `broker` is not yet back: registered, and in the ISR of every partition it hosts
    except the `excused` ones (the plan predicts it cannot rejoin them yet: their leader still
    holds a stale id, or they stay unavailable after the step)."""
    if broker not in state.brokers:
        return f"broker {broker} is not registered in ZooKeeper"
    missing = [
        tp
        for tp in state.partitions_on(broker)
        if tp in state.partitions
        and tp not in excused
        and (state.partitions[tp].leader < 0 or broker not in state.partitions[tp].isr)
    ]
    if missing:
        return _partitions_without(missing, f"broker {broker} in the ISR")
    return None


def topic_in_sync_blocker(
    state: ClusterState, topic: str, excused: Collection[ReplicaRef] = ()
) -> str | None:
    """Why `topic` is not whole: a partition without a leader, or a registered replica out
    of its ISR but for the `excused` ones (Offline until a restart the plan makes later)."""
    if topic not in state.topics:
        return f"topic {topic} is not in ZooKeeper"
    missing = []
    for number, replicas in sorted(state.topics[topic].assignment.partitions.items()):
        tp = TopicPartition(topic, number)
        partition = state.partitions.get(tp)
        live = {r for r in replicas if r in state.brokers and ReplicaRef(r, tp) not in excused}
        if partition is None or partition.leader < 0 or not live <= set(partition.isr):
            missing.append(tp)
    if missing:
        return _partitions_without(missing, "a leader and every registered replica in the ISR")
    return None


def _partitions_without(missing: Sequence[TopicPartition], what: str) -> str:
    shown = ", ".join(str(tp) for tp in missing[:6])
    more = f" and {len(missing) - 6} more" if len(missing) > 6 else ""
    return f"{len(missing)} partition(s) without {what}: {shown}{more}"


def missing_id_blocker(state: ClusterState, *, restored: Collection[str] = ()) -> str | None:
    """Why a controller election now would arm a topic: it has no id in ZooKeeper, so the new
    controller would mint one that no replica holds."""
    missing = sorted(
        name
        for name, topic in state.topics.items()
        if topic.topic_id is None and name not in restored
    )
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        return (
            f"topic(s) {shown} have no topic id in ZooKeeper; a new controller would mint one"
            " no replica holds"
        )
    return None


def pre_restart_blocker(
    state: ClusterState,
    broker: int,
    *,
    expected: Iterable[int],
    targeted: Collection[TopicPartition],
    stale: StaleIdHolder,
    min_isr: MinIsrRule,
    restored: Collection[str] = (),
    accepted: Collection[TopicPartition] = (),
    batch: Collection[int] = (),
) -> str | None:
    """Everything that must hold before `broker` is stopped, first reason wins.

    `batch`: the brokers restarted together with `broker` (itself included, or none): they
    may be stopping already, so they need not be registered, and every partition must keep
    its min ISR outside all of them.

    `targeted` are the partitions this step repairs: a replica of the broker already out of
    their ISR is the degradation the repair removes, so it does not block.
    `accepted` are the partitions the plan predicts this step leaves unavailable (or whose
    last in-sync replica is `broker`): the approved degradation, so none of them blocks, and
    the refusal rule ("would stall acks=all") does not apply to a partition already predicted
    unavailable.
    """
    out_of_isr = {
        tp for tp in targeted if tp in state.partitions and broker not in state.partitions[tp].isr
    }
    ignored = out_of_isr | set(accepted)
    refusable = (
        None if not accepted else [tp for tp in state.partitions_on(broker) if tp not in accepted]
    )
    return (
        migration_blocker(state)
        or registration_blocker(state, [b for b in expected if b == broker or b not in batch])
        or offline_blocker(state, ignore=ignored)
        or restart_blocker(state, broker, min_isr=min_isr, ignore=ignored, batch=batch)
        or refusal_blocker(state, broker, stale, partitions=refusable, batch=batch)
        or (missing_id_blocker(state, restored=restored) if broker == state.controller_id else None)
    )


@dataclass(frozen=True)
class Degraded:
    """The partitions of one read that have no leader, and those under their min ISR."""

    offline: frozenset[TopicPartition]
    below_min_isr: frozenset[TopicPartition]

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """Every partition offline or under its min ISR."""
        return self.offline | self.below_min_isr

    def to_json(self) -> dict[str, list[str]]:
        """The names of each kind's partitions, in name order (as the journal holds them)."""
        return {
            "offline_partitions": sorted(str(tp) for tp in self.offline),
            "below_min_isr_partitions": sorted(str(tp) for tp in self.below_min_isr),
        }

    @classmethod
    def from_json(cls, document: Mapping[str, object]) -> Degraded:
        def read(key: str) -> frozenset[TopicPartition]:
            value = document.get(key)
            names = value if isinstance(value, (list, tuple)) else ()
            return frozenset(TopicPartition.parse(str(n)) for n in names)

        return cls(read("offline_partitions"), read("below_min_isr_partitions"))


def degraded(state: ClusterState, min_isr: MinIsrRule) -> Degraded:
    """Which partitions of `state` are offline (leader -1) and which are under their
    effective min.insync.replicas (those with replication factor <= min ISR never count)."""
    offline: set[TopicPartition] = set()
    below: set[TopicPartition] = set()
    for tp, partition in state.partitions.items():
        replicas = state.replicas(*tp)
        if partition.leader < 0:
            offline.add(tp)
        need = state.min_insync_replicas(tp, min_isr)
        if len(replicas) > need and len(partition.isr) < need:
            below.add(tp)
    return Degraded(frozenset(offline), frozenset(below))


def newly_degraded_blocker(
    before: Degraded, now: Degraded, *, allowed: Collection[TopicPartition]
) -> str | None:
    """Why the step harmed more than the plan said: a partition offline or under min ISR now
    that was not before the step, and that the plan does not name (`allowed`: the step's
    prediction and the partitions unavailable before the run)."""
    offline = sorted(str(tp) for tp in now.offline - before.offline if tp not in allowed)
    below = sorted(
        str(tp)
        for tp in now.below_min_isr - before.below_min_isr - now.offline
        if tp not in allowed
    )
    parts = []
    if offline:
        parts.append(f"newly offline: {_names(offline)}")
    if below:
        parts.append(f"newly under min.insync.replicas: {_names(below)}")
    if parts:
        return "; ".join(parts) + " (the plan did not predict them)"
    return None


def _names(names: Sequence[str]) -> str:
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return ", ".join(names[:10]) + more


def converged_blocker(
    state: ClusterState, topics: Iterable[str], *, excused: Collection[TopicPartition] = ()
) -> str | None:
    """Why the plan's `topics` have not converged in ZooKeeper: a partition without a leader
    or with an assigned replica out of its ISR (every broker is back by now). `excused`: the
    partitions a later phase of the repair converges (the plan says which)."""
    missing: list[TopicPartition] = []
    for topic in sorted(set(topics)):
        if topic not in state.topics:
            return f"topic {topic} is not in ZooKeeper"
        for number, replicas in sorted(state.topics[topic].assignment.partitions.items()):
            tp = TopicPartition(topic, number)
            if tp in excused:
                continue
            partition = state.partitions.get(tp)
            if partition is None or partition.leader < 0 or not set(replicas) <= set(partition.isr):
                missing.append(tp)
    if missing:
        return _partitions_without(missing, "a leader and their full ISR")
    return None


# Kafka's defaults: controlled.shutdown.max.retries, controlled.shutdown.retry.backoff.ms.
SHUTDOWN_MAX_RETRIES = 3
SHUTDOWN_RETRY_BACKOFF_MS = 5000


@dataclass(frozen=True)
class ShutdownAllowance:
    """The extra time a controlled shutdown takes when no other ISR member can lead: Kafka
    retries `max_retries` times, `backoff_ms` apart, then shuts down anyway."""

    max_retries: int
    backoff_ms: int
    source: str  # where the values come from: "defaults" or the server.properties path

    @property
    def seconds(self) -> float:
        return self.max_retries * self.backoff_ms / 1000.0

    def to_json(self) -> dict[str, object]:
        return {
            "max_retries": self.max_retries,
            "retry_backoff_ms": self.backoff_ms,
            "allowance_s": self.seconds,
            "source": self.source,
        }


def shutdown_allowance(
    properties: Mapping[str, str] | None, *, source: str = "defaults"
) -> ShutdownAllowance:
    """The controlled-shutdown retry allowance from a broker's server.properties (Kafka's
    defaults for a key that is absent or not a non-negative integer)."""
    props = properties or {}

    def number(key: str, default: int) -> int:
        value = props.get(key, "").strip()
        return int(value) if value.isdigit() else default

    return ShutdownAllowance(
        number("controlled.shutdown.max.retries", SHUTDOWN_MAX_RETRIES),
        number("controlled.shutdown.retry.backoff.ms", SHUTDOWN_RETRY_BACKOFF_MS),
        source if properties is not None else "defaults",
    )


def health_sample(state: ClusterState, min_isr: MinIsrRule) -> dict[str, object]:
    """Counts the run keeps in its journal while it waits (for the report and the tests),
    with the names of the partitions offline and under min ISR."""
    under = sum(
        1
        for tp, partition in state.partitions.items()
        if len(partition.isr) < len(state.replicas(*tp))
    )
    found = degraded(state, min_isr)
    return {
        "under_replicated": under,
        "offline": len(found.offline),
        "below_min_isr": len(found.below_min_isr),
        "controller": state.controller_id,
        "brokers": sorted(state.brokers),
        **found.to_json(),
    }
