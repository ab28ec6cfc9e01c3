"""The availability model's simulation as first written: every action walks every partition.
Slow on a fleet, plainly right: tests/plan/test_availability_equivalence.py holds the
incremental simulation in remediate/plan/availability.py equal to it on generated clusters.
A batch (several brokers stopped, then all started) is the same walk for each broker."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from remediate.plan.availability import (
    BatchOp,
    Model,
    MoveOp,
    Operation,
    Phase,
    PredictedTimeline,
    RestartOp,
    TriggerOp,
    _Partition,
)
from remediate.state import TopicPartition


class _Run:
    """One simulation: a private copy of the model's partitions, stepped through actions."""

    def __init__(self, model: Model) -> None:
        self.lines = model.lines
        self.alive = set(model.alive)
        self.controller = model.controller
        self.parts = {
            tp: _Partition(
                replicas=p.replicas,
                leader=p.leader,
                isr=set(p.isr),
                epoch=p.epoch,
                zk_id=p.zk_id,
                min_isr=p.min_isr,
                memory=dict(p.memory),
                known=dict(p.known),
                offline=set(p.offline),
                catchable=set(p.catchable),
            )
            for tp, p in model.partitions.items()
        }

    def unavailable(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, p in self.parts.items() if not p.available(self.alive))

    def on(self, broker: int) -> list[tuple[TopicPartition, _Partition]]:
        return [(tp, p) for tp, p in sorted(self.parts.items()) if broker in p.replicas]

    def elect_controller(self) -> None:
        """A new controller sends every partition's state at its current epoch."""
        self.controller = min(self.alive) if self.alive else None
        for p in self.parts.values():
            for replica in p.replicas:
                if replica in self.alive:
                    p.offer(replica)
            p.settle(self.alive)

    def stop(self, broker: int, shutting_down: Collection[int] = ()) -> frozenset[TopicPartition]:
        """Controlled shutdown of `broker`, with `shutting_down` (its batch) stopping too: as
        Kafka's controlled-shutdown election, the new leader and ISR leave out every broker
        shutting down. The partitions it was the last in-sync replica of."""
        leaving = set(shutting_down) | {broker}
        last = set()
        for tp, p in self.on(broker):
            if p.leader == broker:
                successors = [
                    r for r in p.replicas if r not in leaving and r in p.isr and r in self.alive
                ]
                if successors:
                    p.bump(successors[0], p.isr - leaving, self.alive - {broker})
                else:
                    last.add(tp)
                    p.bump(-1, set(p.isr), self.alive - {broker})
            elif broker in p.isr and p.leader >= 0:
                p.bump(p.leader, p.isr - {broker}, self.alive - {broker})
        self.alive.discard(broker)
        if broker == self.controller:
            self.elect_controller()
        return frozenset(last)

    def start(self, broker: int, cleared: Collection[TopicPartition]) -> None:
        self.alive.add(broker)
        for tp, p in self.on(broker):
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
        for p in self.parts.values():
            p.settle(self.alive)

    def move(self, replicas: Collection[tuple[TopicPartition, int]]) -> None:
        for tp, broker in replicas:
            if not self.lines.moves_clear_ids([broker]):
                continue  # 3.x: the moved replica keeps its id
            p = self.parts.get(tp)
            if p is not None and broker in p.replicas:
                p.memory[broker] = None

    def trigger(self, partitions: Collection[TopicPartition]) -> None:
        for tp in partitions:
            p = self.parts.get(tp)
            if p is None or p.leader < 0 or p.leader not in self.alive:
                continue
            p.bump(p.leader, set(p.isr), self.alive)
            p.settle(self.alive)

    def restore(self, topic: str, topic_id: str) -> None:
        for (name, _), p in self.parts.items():
            if name == topic:
                p.zk_id = topic_id
        self.elect_controller()

    def out_of_isr(self, broker: int) -> frozenset[TopicPartition]:
        return frozenset(
            tp for tp, p in self.on(broker) if not p.working(self.alive) or broker not in p.isr
        )


def simulate(model: Model, operations: Sequence[Operation]) -> PredictedTimeline:
    """The prediction for carrying out `operations` in order, from the model's state."""
    run = _Run(model)
    now = run.unavailable()
    phases = []
    for operation in operations:
        before = run.unavailable()
        if isinstance(operation, RestartOp | BatchOp):
            batch = operation.restarts if isinstance(operation, BatchOp) else (operation,)
            isr_before = {tp: tuple(sorted(p.isr)) for tp, p in run.parts.items()}
            last: frozenset[TopicPartition] = frozenset()
            leaving = {restart.broker for restart in batch}
            for restart in batch:
                last |= run.stop(restart.broker, leaving)
            during = run.unavailable()
            below_min = {
                tp: (isr_before[tp], p.min_isr)
                for tp, p in run.parts.items()
                if tp in during and tp not in before and p.working(run.alive)
            }
            for restart in batch:
                run.start(restart.broker, restart.cleared)
            out: frozenset[TopicPartition] = frozenset()
            for restart in batch:
                out |= run.out_of_isr(restart.broker)
            phases.append(
                Phase(
                    during=during,
                    after=run.unavailable(),
                    out_of_isr_after=out,
                    last_in_isr=last,
                    below_min=below_min,
                )
            )
        elif isinstance(operation, MoveOp):
            run.move(operation.replicas)
            phases.append(Phase(during=before, after=run.unavailable()))
        elif isinstance(operation, TriggerOp):
            run.trigger(operation.partitions)
            phases.append(Phase(during=before, after=run.unavailable()))
        else:
            run.restore(operation.topic, operation.topic_id)
            phases.append(Phase(during=before, after=run.unavailable()))
    unconverged = tuple(sorted(tp for tp, p in run.parts.items() if not p.converged(run.alive)))
    return PredictedTimeline(
        unavailable_now=now,
        phases=tuple(phases),
        converged=not unconverged,
        unconverged=unconverged,
        offline_after=tuple(
            sorted((tp, broker) for tp, p in run.parts.items() for broker in p.offline)
        ),
    )
