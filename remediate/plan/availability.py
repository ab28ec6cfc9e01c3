"""What each broker holds in memory, step by step: the availability model. Pure.

The planner asks it, for a sequence of actions (restart a broker with some partition.metadata
files deleted; write an id back into a topic znode and re-elect the controller), which
partitions have a working leader that accepts acks=all writes at every phase, and whether the
cluster converges. The rules are Kafka's (2.8.2 and 3.4.1 source, paths under
core/src/main/scala/kafka/; tests/sandbox/test_kafka_rules.py holds the emulator to them):

- a broker whose in-memory id differs from the LeaderAndIsr's id rejects it and keeps its old
  leader, epoch and ISR (ReplicaManager.scala:1366-1400);
- every controller change of a partition's leader or ISR bumps its leader epoch
  (LeaderAndIsr.scala:41), so a stale-id leader that rejects the bump is fenced: its AlterIsr
  fails, its high watermark freezes, acks=all times out; a stale-id replica made leader never
  takes the leadership;
- a follower at a newer epoch than its leader cannot fetch from it (UNKNOWN_LEADER_EPOCH);
- controlled shutdown moves leadership to the first live in-ISR replica in assignment order;
  with none, the broker retries, then stops and the partition is offline until it returns and
  is elected again;
- a replica with no id yet (no partition.metadata, or the file just deleted) takes the id of
  the next LeaderAndIsr; a restarted 2.8 broker accepts its first LeaderAndIsr whatever its
  file says (Partition.scala:445-446), 3.0 and later do not, and a 3.0 broker marks the
  partition it rejected after a restart Offline until its next restart (remediate/kafka_lines.py
  holds each line's rules; the model asks them per broker);
- a controller election sends every partition's state at its current epoch, with the id in
  ZooKeeper: replicas holding that id (or none) accept, so a restored id heals at once every
  partition whose replicas all hold it.

What the scan knows of memory: a replica's file id is the id its broker loaded; a replica with
no file holds none yet; a LEADER_FENCED_BY_STALE_ID finding says the partition's stale-id
replicas rejected its current epoch; a stale-id replica out of the ISR rejected it too.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from remediate.kafka_lines import KafkaLines
from remediate.minisr import MinIsrRule
from remediate.scan.findings import Finding
from remediate.scan.kinds import FindingKind
from remediate.state import ClusterState, TopicPartition

# The id a replica holds when its partition.metadata cannot be read: never ZooKeeper's.
UNREADABLE = "<unreadable>"


@dataclass(frozen=True)
class RestartOp:
    """Stop `broker`, delete the partition.metadata of `cleared`, start it."""

    broker: int
    cleared: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True)
class RestoreOp:
    """Write `topic_id` into `topic`'s znode and have the controller re-elected."""

    topic: str
    topic_id: str


@dataclass(frozen=True)
class MoveOp:
    """Move each replica (partition, broker) to another log dir of its broker. On 2.8 the
    future log is built without a topic id and the swap leaves the replica holding none
    (LogManager.getOrCreateLog, LogManager.scala:781 at 2.8.2); on 3.x it keeps its id
    (KAFKA-12426). Nothing else changes: no leader, epoch or ISR."""

    replicas: frozenset[tuple[TopicPartition, int]]


@dataclass(frozen=True)
class TriggerOp:
    """A reassignment of each partition to its own replicas: the controller bumps its leader
    epoch, same leader and ISR, and sends LeaderAndIsr to every replica
    (updateLeaderEpochAndSendRequest, KafkaController.scala:1056-1085 at 2.8.2)."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class BatchOp:
    """Restart several brokers together: stop each (their controlled shutdowns one after
    another, as the controller handles them), then start each. One phase."""

    restarts: tuple[RestartOp, ...]


# One thing the simulation carries out.
Operation = RestartOp | BatchOp | RestoreOp | MoveOp | TriggerOp


@dataclass(slots=True)
class _Partition:
    """The working state of one partition inside a simulation (never leaves this module)."""

    replicas: tuple[int, ...]
    leader: int
    isr: set[int]
    epoch: int
    zk_id: str | None
    min_isr: int
    memory: dict[int, str | None]
    known: dict[int, int]
    # Replicas their broker marked Offline after rejecting the id (3.0): deaf to every
    # LeaderAndIsr until the broker restarts.
    offline: set[int] = field(default_factory=set)
    # Replicas that can catch up with a working leader: the ISR, the replicas whose only
    # trouble is the id, and every replica the simulation restarts. One out of the ISR for a
    # reason the model cannot see (lag, a bad disk) is not assumed to come back.
    catchable: set[int] = field(default_factory=set)

    def working(self, alive: Collection[int]) -> bool:
        return (
            self.leader >= 0
            and self.leader in alive
            and self.known.get(self.leader, -1) == self.epoch
        )

    def available(self, alive: Collection[int]) -> bool:
        need = min(self.min_isr, len(self.replicas))
        return self.working(alive) and sum(1 for r in self.isr if r in alive) >= need

    def copy(self) -> _Partition:
        return _Partition(
            self.replicas,
            self.leader,
            self.isr.copy(),
            self.epoch,
            self.zk_id,
            self.min_isr,
            self.memory.copy(),
            self.known.copy(),
            self.offline.copy(),
            self.catchable.copy(),
        )

    def converged(self, alive: Collection[int]) -> bool:
        return (
            self.working(alive)
            and self.isr == set(self.replicas)
            and all(self.memory.get(r) == self.zk_id for r in self.replicas)
        )

    def offer(self, replica: int) -> None:
        """A LeaderAndIsr at the current epoch reaches `replica`: it accepts when it holds
        ZooKeeper's id or none yet."""
        held = self.memory.get(replica)
        if replica in self.offline:
            return
        if held is None or held == self.zk_id:
            self.memory[replica] = self.zk_id
            self.known[replica] = self.epoch

    def bump(self, leader: int, isr: set[int], alive: Collection[int]) -> None:
        """A controller change of leader or ISR: a new epoch, offered to every live replica."""
        self.epoch += 1
        self.leader = leader
        self.isr = isr
        for replica in self.replicas:
            if replica in alive:
                self.offer(replica)

    def settle(self, alive: Collection[int]) -> None:
        """A working leader's ISR becomes every live replica at its epoch (they catch up, its
        AlterIsr is accepted); a fenced leader's ISR stays frozen."""
        settled = self.settled_isr(alive)
        if settled is not None:
            self.isr = settled

    def settled_isr(self, alive: Collection[int]) -> set[int] | None:
        """The ISR `settle` would leave; None when the leader is not working."""
        if not self.working(alive):
            return None
        return {self.leader} | {
            r
            for r in self.replicas
            if r in alive and r in self.catchable and self.known.get(r, -1) == self.epoch
        }

    def unsettled(self, alive: Collection[int]) -> bool:
        """Whether `settle` would change the ISR."""
        settled = self.settled_isr(alive)
        return settled is not None and settled != self.isr

    def elected(self, alive: Collection[int]) -> bool:
        """Whether a controller election (every live replica offered the current epoch, then
        `settle`) would change anything."""
        for replica in self.replicas:
            if replica not in alive or replica in self.offline:
                continue
            held = self.memory.get(replica)
            if (held is None or held == self.zk_id) and (
                held != self.zk_id or self.known.get(replica, -1) != self.epoch
            ):
                return True
        return self.unsettled(alive)


@dataclass(frozen=True)
class Phase:
    """The model's view after one action: partitions unavailable while it ran and after it,
    those of its broker it could not rejoin, those it was the last in-sync replica of."""

    during: frozenset[TopicPartition]
    after: frozenset[TopicPartition]
    out_of_isr_after: frozenset[TopicPartition] = frozenset()
    last_in_isr: frozenset[TopicPartition] = frozenset()
    # Available before the action, then with a working leader but fewer in-sync replicas than
    # min.insync.replicas: the ordinary restart-safety breach (not the stale id's doing), with
    # the ISR before the action and the partition's min.insync.replicas.
    below_min: Mapping[TopicPartition, tuple[tuple[int, ...], int]] = field(default_factory=dict)


@dataclass(frozen=True)
class PredictedTimeline:
    """The model's prediction for a sequence of actions."""

    unavailable_now: frozenset[TopicPartition]
    phases: tuple[Phase, ...]
    converged: bool
    unconverged: tuple[TopicPartition, ...] = ()
    # (partition, broker) still Offline on its broker at the end (3.0): a restart heals it.
    offline_after: tuple[tuple[TopicPartition, int], ...] = ()
    # Each phase's name in the plan: "step N" unless a phase is a batch of steps ("steps
    # N-M", plan/batches.py).
    labels: tuple[str, ...] = field(default=(), compare=False)

    def windows(self) -> dict[TopicPartition, tuple[str, ...]]:
        """Per partition, the phases it is unavailable in: "now", "step N", "after step N"
        (N counts from 1; a batch's phase "steps N-M")."""
        found: dict[TopicPartition, list[str]] = {}
        for tp in sorted(self.unavailable_now):
            found.setdefault(tp, []).append("now")
        for number, phase in enumerate(self.phases, 1):
            label = self.labels[number - 1] if self.labels else f"step {number}"
            for tp in sorted(phase.during):
                found.setdefault(tp, []).append(label)
            for tp in sorted(phase.after):
                found.setdefault(tp, []).append(f"after {label}")
        return {tp: tuple(w) for tp, w in sorted(found.items())}

    def newly_unavailable(self) -> dict[TopicPartition, tuple[str, ...]]:
        """The partitions available now that some phase leaves unavailable, with the phases."""
        return {tp: w for tp, w in self.windows().items() if tp not in self.unavailable_now}

    @property
    def unavailable_phases(self) -> int:
        """How many (partition, phase) pairs from the first step on are unavailable."""
        return sum(len(p.during) + len(p.after) for p in self.phases)


@dataclass(frozen=True)
class Model:
    """The cluster as the scan saw it, as the simulation starts from it."""

    partitions: Mapping[TopicPartition, _Partition]
    alive: frozenset[int]
    controller: int | None
    # Each broker's release line: what a restart, a rejection and a move do there.
    lines: KafkaLines
    topics: frozenset[str] = field(default_factory=frozenset)

    def offline(self) -> frozenset[tuple[TopicPartition, int]]:
        """(partition, broker) Offline on its broker now (3.0): only a restart reaches it."""
        return frozenset((tp, b) for tp, p in self.partitions.items() for b in p.offline)

    # Indexes a simulation reads instead of walking every partition (computed once per model).

    @cached_property
    def on(self) -> Mapping[int, tuple[TopicPartition, ...]]:
        """Per broker, the partitions with a replica on it, in order."""
        found: dict[int, list[TopicPartition]] = {}
        for tp in sorted(self.partitions):
            for replica in self.partitions[tp].replicas:
                found.setdefault(replica, []).append(tp)
        return {broker: tuple(tps) for broker, tps in found.items()}

    @cached_property
    def of_topic(self) -> Mapping[str, tuple[TopicPartition, ...]]:
        found: dict[str, list[TopicPartition]] = {}
        for tp in sorted(self.partitions):
            found.setdefault(tp.topic, []).append(tp)
        return {topic: tuple(tps) for topic, tps in found.items()}

    @cached_property
    def unavailable(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, p in self.partitions.items() if not p.available(self.alive))

    @cached_property
    def unsettled(self) -> frozenset[TopicPartition]:
        """The partitions whose ISR the first `settle` changes: the scan's ISR lacks a replica
        the model takes to be caught up."""
        return frozenset(tp for tp, p in self.partitions.items() if p.unsettled(self.alive))


def _memory(
    state: ClusterState, findings: Iterable[Finding]
) -> tuple[dict[TopicPartition, dict[int, str | None]], set[TopicPartition]]:
    """(per partition, the id each inspected replica holds in memory; fenced partitions)."""
    memory: dict[TopicPartition, dict[int, str | None]] = {}
    fenced: set[TopicPartition] = set()
    for f in findings:
        if f.topic is None or f.partition is None or f.broker is None:
            continue
        tp = TopicPartition(f.topic, f.partition)
        if f.kind == FindingKind.LEADER_FENCED_BY_STALE_ID:
            fenced.add(tp)
        elif f.kind in (
            FindingKind.OK,
            FindingKind.TOPIC_ID_MISMATCH,
            FindingKind.TOPIC_ID_MISMATCH_OUT_OF_ISR,
        ):
            memory.setdefault(tp, {})[f.broker] = f.file_topic_id
        elif f.kind == FindingKind.METADATA_MISSING:
            memory.setdefault(tp, {})[f.broker] = None
        elif f.kind == FindingKind.METADATA_CORRUPT:
            memory.setdefault(tp, {})[f.broker] = UNREADABLE
    return memory, fenced


def build_model(
    state: ClusterState,
    findings: Sequence[Finding],
    *,
    min_isr: MinIsrRule,
    lines: KafkaLines,
    topics: Collection[str] | None = None,
) -> Model:
    """The model of `topics` (default: every topic) from the scan's facts. A replica the scan
    did not see (its broker not inspected) is taken to hold ZooKeeper's id. On a broker that
    marks rejected partitions Offline (3.0), a stale replica out of the ISR is taken to be
    Offline: it was rejected after a restart during the incident."""
    memory, fenced = _memory(state, findings)
    chosen = set(state.topics) if topics is None else set(topics) & set(state.topics)
    partitions: dict[TopicPartition, _Partition] = {}
    for name in sorted(chosen):
        topic = state.topics[name]
        for number, replicas in sorted(topic.assignment.partitions.items()):
            tp = TopicPartition(name, number)
            zk = state.partitions.get(tp)
            epoch = zk.leader_epoch if zk is not None else 0
            isr = set(zk.isr) if zk is not None else set()
            held = {r: memory.get(tp, {}).get(r, topic.topic_id) for r in replicas}
            known = {}
            offline = set()
            for r in replicas:
                stale = held[r] is not None and held[r] != topic.topic_id
                # A stale replica rejected the current epoch if the leader is fenced or if
                # it is out of the ISR; one still in a working ISR has not met a bump yet.
                known[r] = epoch - 1 if stale and (tp in fenced or r not in isr) else epoch
                if stale and r not in isr and lines.marks_offline(r):
                    offline.add(r)
            partitions[tp] = _Partition(
                replicas=tuple(replicas),
                leader=zk.leader if zk is not None else -1,
                isr=isr,
                epoch=epoch,
                zk_id=topic.topic_id,
                min_isr=state.min_insync_replicas(tp, min_isr),
                memory=held,
                known=known,
                offline=offline,
                catchable=isr
                | {r for r in replicas if held[r] is not None and held[r] != topic.topic_id},
            )
    return Model(
        partitions=partitions,
        alive=frozenset(state.brokers),
        controller=state.controller_id,
        lines=lines,
        topics=frozenset(chosen),
    )


def stale_leaders(model: Model) -> tuple[TopicPartition, ...]:
    """The partitions whose leader holds another id than ZooKeeper's: on 3.1 and later,
    consumers on clients 3.1 or later cannot read them."""
    return tuple(
        tp
        for tp, p in sorted(model.partitions.items())
        if p.leader >= 0
        and p.memory.get(p.leader) is not None
        and p.memory.get(p.leader) != p.zk_id
        and model.lines.consumers_fail_at_failover(p.leader)
    )


class Simulation:
    """One simulation, stepped through actions. It shares the model's partitions and copies
    one only when an action changes it, and it visits only the partitions an action can
    change: those on a stopped or started broker, a restored topic's, the moved and triggered
    ones, and, at a controller election, those changed since the last one (every partition
    at the first). Its results are those of walking every partition at every action
    (tests/plan/availability_reference.py, held equal by the tests)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.lines = model.lines
        self.alive = set(model.alive)
        self.controller = model.controller
        self.parts: dict[TopicPartition, _Partition] = dict(model.partitions)
        self._copied: set[TopicPartition] = set()
        self._down = set(model.unavailable)
        # Partitions whose availability may have changed since `unavailable` last looked.
        self._touched: set[TopicPartition] = set()
        # Partitions a `settle` may change: changed since the last one.
        self._unsettled = set(model.unsettled)
        # None until the first election, which visits every partition.
        self._since_election: set[TopicPartition] | None = None
        # Each partition's ISR before the batch running now first changed it.
        self._isr_before: dict[TopicPartition, tuple[int, ...]] | None = None

    # -- bookkeeping --------------------------------------------------------------------------

    def _mark(self, tp: TopicPartition) -> None:
        self._touched.add(tp)
        self._unsettled.add(tp)
        if self._since_election is not None:
            self._since_election.add(tp)

    def _write(self, tp: TopicPartition) -> _Partition:
        """The partition, to change: a copy of the model's the first time."""
        self._mark(tp)
        p = self.parts[tp]
        if self._isr_before is not None and tp not in self._isr_before:
            self._isr_before[tp] = tuple(sorted(p.isr))
        if tp not in self._copied:
            p = p.copy()
            self.parts[tp] = p
            self._copied.add(tp)
        return p

    def unavailable(self) -> frozenset[TopicPartition]:
        for tp in self._touched:
            if self.parts[tp].available(self.alive):
                self._down.discard(tp)
            else:
                self._down.add(tp)
        self._touched.clear()
        return frozenset(self._down)

    def on(self, broker: int) -> tuple[TopicPartition, ...]:
        return self.model.on.get(broker, ())

    def _settle(self) -> None:
        for tp in sorted(self._unsettled):
            if self.parts[tp].unsettled(self.alive):
                p = self._write(tp)
                p.settle(self.alive)
        self._unsettled.clear()

    # -- the actions --------------------------------------------------------------------------

    def elect_controller(self) -> None:
        """A new controller sends every partition's state at its current epoch."""
        self.controller = min(self.alive) if self.alive else None
        scope = self.parts if self._since_election is None else self._since_election
        self._since_election = set()
        for tp in sorted(scope):
            if self.parts[tp].elected(self.alive):
                p = self._write(tp)
                for replica in p.replicas:
                    if replica in self.alive:
                        p.offer(replica)
                p.settle(self.alive)
        # Every partition is settled now: those visited, and the others were already.
        self._unsettled.clear()
        self._since_election = set()

    def begin_batch(self) -> None:
        self._isr_before = {}

    def end_batch(self) -> dict[TopicPartition, tuple[int, ...]]:
        recorded, self._isr_before = self._isr_before or {}, None
        return recorded

    def stop(self, broker: int, shutting_down: Collection[int] = ()) -> frozenset[TopicPartition]:
        """Controlled shutdown of `broker`, with `shutting_down` (its batch) stopping too: as
        Kafka's controlled-shutdown election, the new leader and ISR leave out every broker
        shutting down. The partitions it was the last in-sync replica of."""
        leaving = set(shutting_down) | {broker}
        last = set()
        remaining = self.alive - {broker}
        for tp in self.on(broker):
            self._mark(tp)
            p = self.parts[tp]
            if p.leader == broker:
                successors = [
                    r for r in p.replicas if r not in leaving and r in p.isr and r in self.alive
                ]
                if successors:
                    self._write(tp).bump(successors[0], p.isr - leaving, remaining)
                else:
                    last.add(tp)
                    self._write(tp).bump(-1, set(p.isr), remaining)
            elif broker in p.isr and p.leader >= 0:
                self._write(tp).bump(p.leader, p.isr - {broker}, remaining)
        self.alive.discard(broker)
        if broker == self.controller:
            self.elect_controller()
        return frozenset(last)

    def start(self, broker: int, cleared: Collection[TopicPartition]) -> None:
        self.alive.add(broker)
        for tp in self.on(broker):
            p = self._write(tp)
            p.catchable.add(broker)
            p.offline.discard(broker)
            if tp in cleared:
                p.memory[broker] = None
            held = p.memory.get(broker)
            if held is None or held == p.zk_id:
                p.offer(broker)
            elif self.lines.lenient_first_leader_and_isr(broker):
                # 2.8: the first LeaderAndIsr after a restart is accepted; the log then loads
                # the file's id, and the next one is rejected.
                p.known[broker] = p.epoch
            elif self.lines.marks_offline(broker):
                # 3.0: rejected with no log attached, the partition is Offline on it.
                p.offline.add(broker)
            if p.leader < 0 and broker in p.isr:
                p.bump(broker, set(p.isr), self.alive)
        if self.controller is None:
            self.elect_controller()
        self._settle()

    def move(self, replicas: Collection[tuple[TopicPartition, int]]) -> None:
        for tp, broker in sorted(replicas):
            if not self.lines.moves_clear_ids([broker]):
                continue  # 3.x: the moved replica keeps its id
            p = self.parts.get(tp)
            if p is not None and broker in p.replicas:
                self._write(tp).memory[broker] = None

    def trigger(self, partitions: Collection[TopicPartition]) -> None:
        for tp in sorted(partitions):
            p = self.parts.get(tp)
            if p is None or p.leader < 0 or p.leader not in self.alive:
                continue
            p = self._write(tp)
            p.bump(p.leader, set(p.isr), self.alive)
            p.settle(self.alive)

    def restore(self, topic: str, topic_id: str) -> None:
        for tp in self.model.of_topic.get(topic, ()):
            self._write(tp).zk_id = topic_id
        self.elect_controller()

    def out_of_isr(self, broker: int) -> frozenset[TopicPartition]:
        return frozenset(
            tp
            for tp in self.on(broker)
            if not self.parts[tp].working(self.alive) or broker not in self.parts[tp].isr
        )

    # -- what the planner asks ----------------------------------------------------------------

    def run(self, operation: Operation) -> Phase:
        """Carry out `operation`; what the model predicts for it."""
        before = self.unavailable()
        if isinstance(operation, RestartOp):
            return _restart_phase(self, (operation,), before)
        if isinstance(operation, BatchOp):
            return _restart_phase(self, operation.restarts, before)
        if isinstance(operation, MoveOp):
            self.move(operation.replicas)
        elif isinstance(operation, TriggerOp):
            self.trigger(operation.partitions)
        else:
            self.restore(operation.topic, operation.topic_id)
        return Phase(during=before, after=self.unavailable())

    def timeline(self, phases: Sequence[Phase]) -> PredictedTimeline:
        """The prediction for the actions run so far, which gave `phases`."""
        unconverged = tuple(
            sorted(tp for tp, p in self.parts.items() if not p.converged(self.alive))
        )
        return PredictedTimeline(
            unavailable_now=self.model.unavailable,
            phases=tuple(phases),
            converged=not unconverged,
            unconverged=unconverged,
            offline_after=tuple(
                sorted((tp, broker) for tp, p in self.parts.items() for broker in p.offline)
            ),
        )

    def batch_blocker(self, brokers: Collection[int]) -> str | None:
        """Why `brokers` may not restart together now, or None: every partition writable now
        must keep at least its min.insync.replicas in-sync replicas outside the batch, among
        them one that could lead it (alive, at the current epoch, holding ZooKeeper's id or
        none). A partition already unwritable loses nothing more, nor does one no replica of
        which could lead it (each holds a stale id: the first restart of any of its in-sync
        replicas fences it, in a batch or alone); one whose replicas are no more than its
        min.insync.replicas is never counted, as the gates do."""
        batch = set(brokers)
        seen: set[TopicPartition] = set()
        for broker in sorted(batch):
            for tp in self.on(broker):
                if tp in seen:
                    continue
                seen.add(tp)
                p = self.parts[tp]
                if len(p.replicas) <= p.min_isr or not p.available(self.alive):
                    continue
                if not any(self._could_lead(p, r) for r in p.replicas):
                    continue
                outside = sorted(r for r in p.isr if r in self.alive and r not in batch)
                if len(outside) < p.min_isr:
                    return (
                        f"{tp} would keep {len(outside)} in-sync replica(s) outside the batch"
                        f" (isr {sorted(p.isr)}, min.insync.replicas {p.min_isr})"
                    )
                if not any(self._could_lead(p, r) for r in outside):
                    return f"{tp}: no in-sync replica outside the batch could lead it"
        return None

    def _could_lead(self, p: _Partition, replica: int) -> bool:
        return (
            replica in self.alive
            and replica not in p.offline
            and p.known.get(replica, -1) == p.epoch
            and p.memory.get(replica) in (None, p.zk_id)
        )


def _restart_phase(
    run: Simulation, batch: Sequence[RestartOp], before: frozenset[TopicPartition]
) -> Phase:
    run.begin_batch()
    last: set[TopicPartition] = set()
    leaving = {restart.broker for restart in batch}
    for restart in batch:
        last |= run.stop(restart.broker, leaving)
    during = run.unavailable()
    isr_before = run.end_batch()
    below_min = {}
    for tp in sorted(during - before):
        p = run.parts[tp]
        if p.working(run.alive):
            below_min[tp] = (isr_before.get(tp, tuple(sorted(p.isr))), p.min_isr)
    for restart in batch:
        run.start(restart.broker, restart.cleared)
    out: set[TopicPartition] = set()
    for restart in batch:
        out |= run.out_of_isr(restart.broker)
    return Phase(
        during=during,
        after=run.unavailable(),
        out_of_isr_after=frozenset(out),
        last_in_isr=frozenset(last),
        below_min=below_min,
    )


def simulate(model: Model, operations: Sequence[Operation]) -> PredictedTimeline:
    """The prediction for carrying out `operations` in order, from the model's state."""
    run = Simulation(model)
    return run.timeline([run.run(operation) for operation in operations])


def harm(timeline: PredictedTimeline, restarts: int) -> tuple[int, int, int, int]:
    """How bad a prediction is, least first: partitions made unavailable that are available
    now, not converging, (partition, phase) pairs unavailable, restarts."""
    return (
        len(timeline.newly_unavailable()),
        0 if timeline.converged else 1,
        timeline.unavailable_phases,
        restarts,
    )
