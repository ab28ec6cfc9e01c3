"""The repair without restarts (candidate "move-keep-zk-id", Kafka 2.8 JBOD brokers only).

A move step sends AlterReplicaLogDirs for every replica that holds another id than
ZooKeeper's, each to the log dir of its broker the plan chose, and waits until each is there
with no future log left (DescribeLogDirs): on 2.8 the moved replica holds no id. A trigger
step then reassigns each partition to its own replicas; the LeaderAndIsr that follows carries
ZooKeeper's id, which every moved replica takes. No broker restarts, no file is deleted.

With a copy throttle in the plan, each moving broker's replica.alter.log.dirs.io.max.bytes.
per.second is set before the moves (what it was is journaled first) and put back after them.

Each action is journaled before and after and gated on state read right before it:
- the move's gate: nothing offline or below min.insync.replicas beyond the plan's
  prediction, and room left in each destination (read again with `df`);
- a move already done is not sent again, one under way is waited for, never started twice;
  one its broker forgot (it restarted before it made the future log: the replica is where it
  was, with no future log) is asked again while the wait goes on;
- a partition is triggered only once every replica the plan moved has swapped, its leader
  and at least one other in-sync replica among the ready ones; a partition already healed
  is left alone, and a trigger whose epoch bump is already in ZooKeeper is never repeated.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from remediate.collect.collector import collect_brokers
from remediate.collect.disks import free_space
from remediate.collect.snapshot import ReplicaRow
from remediate.errors import ConfigError, HaltedError, KafkaAdminError, StopRequestedError
from remediate.execute.decisions import disagreement_blocker, replica_hosts
from remediate.execute.journal import JournalEvent
from remediate.execute.stepbase import StepRun
from remediate.execute.steps import StepKey
from remediate.gates import degraded, migration_blocker, topic_in_sync_blocker
from remediate.plan import MoveStep, TriggerStep
from remediate.plan.moves import HEADROOM, ReplicaMove
from remediate.playbook import Action, Timeouts
from remediate.ports import MOVE_THROTTLE, BrokerLogDirs, KafkaAdmin
from remediate.state import ClusterState, ReplicaRef, TopicPartition

# How long a move found forgotten (its replica in the source dir with no future log) waits
# before it is asked again: its broker may be creating the future log right now.
RESEND_S = 10.0


class _Admin:
    """The step's client of Kafka's admin requests, opened when first needed."""

    def __init__(self, run: StepRun[Any]) -> None:
        self.run = run

    @contextmanager
    def open(self, state: ClusterState) -> Iterator[KafkaAdmin]:
        factory = self.run.services.kafka_admin
        if factory is None:
            raise HaltedError(
                "the plan moves replicas but no client of Kafka's admin API was given (the"
                " kafka section of cluster.yaml)"
            )
        try:
            admin = factory(state)
        except (KafkaAdminError, ConfigError) as exc:
            raise HaltedError(f"Kafka's admin API cannot be reached: {exc}") from exc
        try:
            yield admin
        finally:
            admin.close()


def _described(admin: KafkaAdmin, moves: tuple[ReplicaMove, ...]) -> dict[int, BrokerLogDirs]:
    try:
        return admin.log_dirs(
            sorted({m.broker for m in moves}),
            sorted({m.partition for m in moves}),
        )
    except KafkaAdminError as exc:
        raise HaltedError(str(exc)) from exc


def _where(
    described: Mapping[int, BrokerLogDirs], move: ReplicaMove
) -> tuple[str | None, str | None]:
    """(the replica's current log dir, its future log's dir) as its broker reports them."""
    dirs = described.get(move.broker)
    if dirs is None:
        return None, None
    current = dirs.replicas.get(move.partition)
    return (current[0] if current else None), dirs.futures.get(move.partition)


def _gates(run: StepRun[Any], playbook: str) -> Timeouts:
    gates = run.services.gates
    return gates.get(playbook) or gates[run.plan.playbook]


class MoveRun(StepRun[MoveStep]):
    """Carries out one move step of `plan`."""

    def key(self, action: str) -> StepKey:
        return StepKey.for_cluster(self.index, action)

    def run(self) -> None:
        try:
            self._run()
        except StopRequestedError:
            self.note_throttle()
            raise
        except HaltedError as exc:
            left = self.note_throttle()
            if left is None:
                raise
            raise HaltedError(f"{exc}; {left}") from exc

    def note_throttle(self) -> str | None:
        """If the run stops with the copy throttle set and not yet put back, say so in the
        journal (and return it for the halt's message): who sees the halt must know that the
        brokers still copy slowly, and that `resume` puts it back."""
        finished = self.recorder.finished
        if not self.step.throttle or not finished(self.key(Action.THROTTLE_SET)):
            return None
        if finished(self.key(Action.THROTTLE_REMOVE)):
            return None
        brokers = sorted(self.step.brokers)
        left = (
            f"the copy throttle ({MOVE_THROTTLE}={self.step.throttle}) is still set on"
            f" broker(s) {brokers}: `resume` puts it back as it was once the moves are done"
        )
        self.recorder.record(
            JournalEvent.NOTE, step=str(self.key(Action.THROTTLE_REMOVE)), decision=left
        )
        return left

    def _run(self) -> None:
        step, recorder = self.step, self.recorder
        self.services.progress(f"moving {len(step.moves)} replica(s): {step.reason}")
        for action in step.actions:
            key = self.key(action)
            if action == Action.GATE_MOVE_SAFETY:
                recorder.act(key, self.gate)
            elif action in (Action.THROTTLE_SET, Action.THROTTLE_REMOVE) and not step.throttle:
                recorder.skip(key, "the plan sets no copy throttle")
            elif action == Action.THROTTLE_SET:
                recorder.act(key, self.set_throttle, destructive=True)
            elif action == Action.MOVE_REPLICAS:
                recorder.act(key, self.move, destructive=True)
            elif action == Action.WAIT_MOVED:
                recorder.act(key, self.wait_moved)
            elif action == Action.THROTTLE_REMOVE:
                recorder.act(key, self.remove_throttle, destructive=True)
            else:
                raise HaltedError(f"step {self.index + 1}: unknown action {action!r} in the plan")

    def gate(self) -> dict[str, Any]:
        state = self.probes.read()
        with _Admin(self).open(state) as admin:
            described = _described(admin, self.step.moves)
        blocker = (
            migration_blocker(state) or self.health_blocker(state) or self.space_blocker(described)
        )
        self.recorder.record(
            JournalEvent.GATE, step=str(self.key(Action.GATE_MOVE_SAFETY)), blocker=blocker
        )
        if blocker:
            raise HaltedError(f"the move is refused: {blocker}")
        return {"blocker": None}

    def health_blocker(self, state: ClusterState) -> str | None:
        """A partition offline or below min.insync.replicas that the plan did not expect."""
        found = degraded(state, self.services.min_isr)
        allowed = self.step.predicted.expected | set(self.plan.unavailable_now)
        unexpected = sorted(str(tp) for tp in found.partitions - allowed)
        if unexpected:
            return "unavailable, and not predicted by the plan: " + ", ".join(unexpected[:6])
        return None

    def space_blocker(self, described: Mapping[int, BrokerLogDirs]) -> str | None:
        """Room in every destination for what still has to move there (read again now)."""
        needed: dict[tuple[int, str], int] = {}
        for move in self.step.moves:
            current, _ = _where(described, move)
            if current == move.to_dir:
                continue
            key = (move.broker, move.to_dir)
            needed[key] = needed.get(key, 0) + move.size + int(move.size * HEADROOM)
        for (broker, log_dir), need in sorted(needed.items()):
            free = free_space(self.services.transport_for(broker), [log_dir]).get(log_dir)
            if free is None:
                return f"broker {broker}: the free space of {log_dir} could not be read"
            if free < need:
                return f"broker {broker}: {log_dir} has {free} bytes free, the moves need {need}"
        return None

    def throttles_before(self) -> dict[int, str | None] | None:
        """Each broker's own copy throttle before this run set it, as first journaled."""
        key = str(self.key(Action.THROTTLE_SET))
        for record in self.recorder.journal.records():
            if record.get("event") == JournalEvent.NOTE and record.get("step") == key:
                before = record.get("throttle_before")
                if isinstance(before, dict):
                    return {int(b): None if v is None else str(v) for b, v in before.items()}
        return None

    def set_throttle(self) -> dict[str, Any]:
        """Each moving broker's copy throttle set to the plan's, what it was journaled first
        (once: a resumed run must not take its own throttle for the broker's)."""
        value = str(self.step.throttle)
        with _Admin(self).open(self.probes.read()) as admin:
            before = self.throttles_before()
            if before is None:
                before = {b: admin.broker_setting(b, MOVE_THROTTLE) for b in self.step.brokers}
                self.recorder.record(
                    JournalEvent.NOTE,
                    step=str(self.key(Action.THROTTLE_SET)),
                    throttle_before={str(b): v for b, v in before.items()},
                )
            self.recorder.lock.ensure_held()
            errors = {b: admin.set_broker_setting(b, MOVE_THROTTLE, value) for b in before}
        failed = {b: e for b, e in errors.items() if e is not None}
        if failed:
            raise HaltedError(
                f"{MOVE_THROTTLE} could not be set: "
                + ", ".join(f"broker {b}: {e}" for b, e in sorted(failed.items()))
            )
        self.services.progress(f"copy throttle {value} bytes/s on broker(s) {sorted(before)}")
        return {"throttle": value, "before": {str(b): v for b, v in before.items()}}

    def remove_throttle(self) -> dict[str, Any]:
        """Each broker's copy throttle put back as it was before the run set it."""
        before = self.throttles_before()
        if before is None:
            raise HaltedError(
                "the journal holds no record of the throttles before the run set them; they"
                f" are left as they are ({MOVE_THROTTLE} on broker(s) {list(self.step.brokers)})"
            )
        with _Admin(self).open(self.probes.read()) as admin:
            self.recorder.lock.ensure_held()
            errors = {b: admin.set_broker_setting(b, MOVE_THROTTLE, v) for b, v in before.items()}
        failed = {b: e for b, e in errors.items() if e is not None}
        if failed:
            raise HaltedError(
                f"{MOVE_THROTTLE} could not be put back: "
                + ", ".join(f"broker {b}: {e}" for b, e in sorted(failed.items()))
            )
        self.services.progress("copy throttle put back as it was")
        return {"restored": {str(b): v for b, v in before.items()}}

    def move(self) -> dict[str, Any]:
        state = self.probes.read()
        with _Admin(self).open(state) as admin:
            described = _described(admin, self.step.moves)
            submit: dict[ReplicaRef, str] = {}
            already, under_way = [], []
            for move in self.step.moves:
                current, future = _where(described, move)
                name = f"{move.partition} on broker {move.broker}"
                if current == move.to_dir and future is None:
                    already.append(name)
                elif future == move.to_dir:
                    under_way.append(name)  # resumed: the copy goes on, never a second one
                elif current is None:
                    raise HaltedError(f"{name}: its broker reports no such replica")
                else:
                    submit[ReplicaRef(move.broker, move.partition)] = move.to_dir
            self.recorder.lock.ensure_held()
            answers = admin.alter_replica_log_dirs(submit) if submit else {}
        refused = {k: e for k, e in answers.items() if e is not None}
        if refused:
            raise HaltedError(
                "AlterReplicaLogDirs refused: "
                + ", ".join(
                    f"{replica}: {refused[replica]}"
                    for replica in sorted(refused, key=lambda r: (r.partition, r.broker))
                )
            )
        moving = sorted(submit, key=lambda r: (r.partition, r.broker))
        for replica in moving:
            self.services.progress(
                f"broker {replica.broker}: moving {replica.partition} to {submit[replica]}"
            )
        return {
            "moving": [str(replica) for replica in moving],
            "already": already,
            "under_way": under_way,
        }

    def wait_moved(self) -> dict[str, Any]:
        state = self.probes.read()
        clock = self.services.clock
        sent_again: dict[ReplicaRef, float] = {}
        refused = [""]  # what the brokers last said to a move asked again
        with _Admin(self).open(state) as admin:

            def blocker() -> str | None:
                described = _described(admin, self.step.moves)
                left, lost = [], {}
                for m in self.step.moves:
                    current, future = _where(described, m)
                    if (current, future) == (m.to_dir, None):
                        continue
                    left.append(f"{m.partition} on broker {m.broker}")
                    replica = ReplicaRef(m.broker, m.partition)
                    due = clock.monotonic() - sent_again.get(replica, -RESEND_S) >= RESEND_S
                    if current is not None and future is None and due:
                        lost[replica] = m.to_dir
                if lost:
                    refused[0] = self._send_again(admin, lost, sent_again)
                said = f" (asked again, refused: {refused[0]})" if refused[0] else ""
                return f"not yet moved: {', '.join(left[:6])}{said}" if left else None

            took = self.probes.wait(
                blocker,
                timeout=_gates(self, self.step.playbook).in_sync_timeout_s,
                what="every replica to move to its destination",
            )
        self.services.progress(f"{len(self.step.moves)} replica(s) moved")
        result: dict[str, Any] = {"moved_after_s": took}
        if sent_again:
            ordered = sorted(sent_again, key=lambda r: (r.partition, r.broker))
            result["sent_again"] = [str(r) for r in ordered]
        return result

    def _send_again(
        self, admin: KafkaAdmin, lost: Mapping[ReplicaRef, str], sent: dict[ReplicaRef, float]
    ) -> str:
        """Moves their brokers forgot: a broker that restarts before it has made a replica's
        future log keeps the replica where it was, with no future log, and would never move
        it. Asked again (the request moves nothing that is moved or moving already); what
        the brokers refused, for the wait's message (asked again later)."""
        self.recorder.lock.ensure_held()
        answers = admin.alter_replica_log_dirs(lost)
        now = self.services.clock.monotonic()
        for replica in lost:
            sent[replica] = now
        ordered = sorted(lost, key=lambda r: (r.partition, r.broker))
        names = ", ".join(str(r) for r in ordered)
        self.services.progress(f"moves asked again, their brokers had forgotten them: {names}")
        return ", ".join(f"{r}: {answers[r]}" for r in ordered if answers.get(r) is not None)


class TriggerRun(StepRun[TriggerStep]):
    """Carries out one trigger step of `plan`."""

    def key(self, action: str) -> StepKey:
        return StepKey.for_cluster(self.index, action)

    @property
    def moves(self) -> tuple[ReplicaMove, ...]:
        return tuple(m for step in self.plan.moves for m in step.moves)

    def run(self) -> None:
        step, recorder = self.step, self.recorder
        self.services.progress(f"reassigning {len(step.partitions)} partition(s): {step.reason}")
        for action in step.actions:
            key = self.key(action)
            if action == Action.GATE_SWAPPED:
                recorder.act(key, self.gate)
            elif action == Action.TRIGGER_REASSIGNMENT:
                recorder.act(key, self.trigger, destructive=True)
            elif action == Action.WAIT_IN_SYNC:
                recorder.act(key, self.wait_in_sync)
            elif action == Action.VERIFY_TOPIC_IDS:
                recorder.act(key, self.verify)
            else:
                raise HaltedError(f"step {self.index + 1}: unknown action {action!r} in the plan")

    def gate(self) -> dict[str, Any]:
        state = self.probes.read()
        with _Admin(self).open(state) as admin:
            described = _described(admin, self.moves)
        blocker = self.swapped_blocker(state, described)
        self.recorder.record(
            JournalEvent.GATE, step=str(self.key(Action.GATE_SWAPPED)), blocker=blocker
        )
        if blocker:
            raise HaltedError(f"the trigger is refused: {blocker}")
        return {"blocker": None}

    def swapped_blocker(
        self, state: ClusterState, described: Mapping[int, BrokerLogDirs]
    ) -> str | None:
        """Every replica the plan moved is in its destination with no future log; each
        partition's leader and at least one other in-sync replica are among the ready ones."""
        destinations = {(m.partition, m.broker): m for m in self.moves}
        for tp in self.step.partitions:
            zk = state.partitions.get(tp)
            if zk is None or zk.leader < 0:
                return f"{tp} has no leader"
            ready = set()
            for broker in state.replicas(tp.topic, tp.partition):
                move = destinations.get((tp, broker))
                if move is None or _where(described, move) == (move.to_dir, None):
                    ready.add(broker)
                else:
                    return f"{tp}: the replica on broker {broker} has not moved yet"
            if zk.leader not in ready or not (set(zk.isr) & ready) - {zk.leader}:
                return f"{tp}: its leader and another in-sync replica have not both moved"
        return None

    def trigger(self) -> dict[str, Any]:
        key = self.key(Action.TRIGGER_REASSIGNMENT)
        state = self.probes.read()
        recorded: dict[str, int] = {}
        for record in self.recorder.journal.records():
            if record.get("event") == JournalEvent.NOTE and record.get("step") == str(key):
                recorded = dict(record.get("leader_epochs_before") or {})
        todo: dict[TopicPartition, list[int]] = {}
        already: list[str] = []
        for tp in self.step.partitions:
            zk = state.partitions.get(tp)
            before = recorded.get(str(tp))
            if zk is not None and before is not None and zk.leader_epoch > before:
                already.append(str(tp))  # resumed: its bump happened; never a second one
                continue
            todo[tp] = list(state.replicas(tp.topic, tp.partition))
        epochs = {
            str(tp): state.partitions[tp].leader_epoch
            for tp in self.step.partitions
            if tp in state.partitions and tp in todo
        }
        self.recorder.record(JournalEvent.NOTE, step=str(key), leader_epochs_before=epochs)
        answers: dict[TopicPartition, str | None] = {}
        if todo:
            with _Admin(self).open(state) as admin:
                self.recorder.lock.ensure_held()
                answers = admin.reassign(todo)
        refused = {k: e for k, e in answers.items() if e is not None}
        if refused:
            raise HaltedError(
                "AlterPartitionReassignments refused: "
                + ", ".join(f"{tp}: {e}" for tp, e in sorted(refused.items()))
            )
        self.services.progress(f"reassigned {len(todo)} partition(s) to their own replicas")
        return {"reassigned": [str(tp) for tp in sorted(todo)], "already": already}

    @property
    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.step.partitions})

    def wait_in_sync(self) -> dict[str, Any]:
        gates = _gates(self, self.step.playbook)

        def blocker() -> str | None:
            state = self.probes.sampled_read(self.topics)
            for topic in self.topics:
                reason = topic_in_sync_blocker(state, topic)
                if reason:
                    return reason
            return None

        held = self.probes.wait(
            blocker,
            timeout=gates.in_sync_timeout_s,
            what="every partition in sync",
            stable_for=gates.stability_window_s,
        )
        return {"in_sync_after_s": held}

    def verify(self) -> dict[str, Any]:
        state = self.probes.read()
        verified = {}
        for topic in self.topics:
            zk_id = state.topics[topic].topic_id if topic in state.topics else None
            if zk_id is None:
                raise HaltedError(f"topic {topic} has no id in ZooKeeper")
            blocker = disagreement_blocker(state, topic, zk_id, self.rows(state, topic))
            if blocker:
                raise HaltedError(f"topic {topic}: {blocker}")
            verified[topic] = zk_id
        return {"verified": verified}

    def rows(self, state: ClusterState, topic: str) -> dict[int, tuple[ReplicaRow, ...] | str]:
        reports = collect_brokers(
            self.services.config,
            replica_hosts(state, topic),
            transport_for=self.services.transport_for,
        )
        return {r.broker_id: r.replicas if r.reachable else str(r.error) for r in reports}
