"""Which brokers restart together: batches chosen by least predicted harm. Pure.

A batch is allowed only if every partition writable at that point, as the availability model
predicts it, keeps at least its min.insync.replicas in-sync replicas outside the batch, among
them one that could lead it (`Simulation.batch_blocker`): the looser of the rules the rolling
tools use (../shared/reference/rolling.md), checked per partition, never inferred from racks.
Partitions already unwritable lose nothing more, and replicas holding a stale id are out of
their ISRs anyway, so the brokers in the ISRs of the incident's partitions may restart
together where no healthy partition needs them.

Three batchings are weighed, each packing brokers greedily while the rule allows and the cap
(`--max-batch-size`) leaves room: one broker at a time (today's roll), the restart order as it
is, and the order regrouped rack by rack (brokers of one rack first, as Koperator restarts a
rack). The active controller restarts alone and last in every one. The least harm wins (the
availability model's measure, the number of batches standing for the restarts), then the
batching that mixes the fewest racks, then the fewest batches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from remediate.plan.availability import (
    BatchOp,
    Model,
    Operation,
    Phase,
    PredictedTimeline,
    RestartOp,
    Simulation,
    harm,
)
from remediate.plan.model import BatchingSummary
from remediate.state import TopicPartition

ONE_AT_A_TIME, IN_ORDER, BY_RACK = "one at a time", "in order", "by rack"


@dataclass(frozen=True)
class Batch:
    brokers: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class Batching:
    """One way to group the restarts, and what the model predicts for it."""

    name: str
    batches: tuple[Batch, ...]
    timeline: PredictedTimeline = field(compare=False)
    racks_mixed: int = 0
    chosen: bool = False

    @property
    def harm(self) -> tuple[int, int, int, int]:
        return harm(self.timeline, len(self.batches))

    def summary(self) -> BatchingSummary:
        newly, unconverged, phases, batches = self.harm
        return BatchingSummary(
            name=self.name,
            chosen=self.chosen,
            batches=tuple(b.brokers for b in self.batches),
            harm={
                "newly_unavailable": newly,
                "converges": not unconverged,
                "unavailable_phases": phases,
                "batches": batches,
            },
            racks_mixed=self.racks_mixed,
        )


def _names(brokers: Sequence[int]) -> str:
    return ", ".join(str(b) for b in brokers)


def _rack_text(brokers: Sequence[int], racks: Mapping[int, str | None]) -> str:
    named = {racks.get(b) for b in brokers}
    if len(named) == 1 and None not in named:
        return f"; all in {named.pop()}"
    return ""


def _pack(
    model: Model,
    sequence: Sequence[int],
    cleared: Mapping[int, frozenset[TopicPartition]],
    before: Sequence[Operation],
    max_size: int | None,
    racks: Mapping[int, str | None],
) -> tuple[tuple[Batch, ...], PredictedTimeline]:
    """Batches of `sequence`'s brokers in its order, each as large as the rule and the cap
    allow, the controller alone; the timeline of `before` and then the batches."""
    run = Simulation(model)
    phases: list[Phase] = [run.run(op) for op in before]
    batches: list[Batch] = []
    current: list[int] = []
    # Why the first broker of the batch being built could not join the batch before it.
    apart = ""

    def flush() -> None:
        nonlocal current, apart
        if not current:
            return
        ops = tuple(RestartOp(b, cleared.get(b, frozenset())) for b in current)
        phases.append(run.run(BatchOp(ops)))
        if current == [model.controller]:
            reason = _alone(current[0], model.controller).reason
        elif len(current) > 1:
            reason = (
                f"brokers {_names(current)} restart together: every partition writable before"
                " the batch keeps at least its min.insync.replicas in-sync replicas, and a"
                " replica that could lead it, outside the batch" + _rack_text(current, racks)
            )
        else:
            reason = f"broker {current[0]} alone" + (f": {apart}" if apart else "")
        batches.append(Batch(tuple(current), reason))
        current, apart = [], ""

    for broker in sequence:
        if broker == model.controller:
            flush()
            current = [broker]
            flush()
            continue
        if current:
            if max_size == 1:
                why = ""
            elif max_size is not None and len(current) >= max_size:
                why = (
                    f"the batch of broker(s) {_names(current)} is full"
                    f" (--max-batch-size {max_size})"
                )
            else:
                why = run.batch_blocker([*current, broker]) or ""
                if not why:
                    current.append(broker)
                    continue
                why = f"not with broker(s) {_names(current)}: {why}"
            flush()
            apart = why
        current = [broker]
    flush()
    labels = [f"step {n}" for n in range(1, len(before) + 1)]
    first = len(before) + 1
    for batch in batches:
        last = first + len(batch.brokers) - 1
        labels.append(f"step {first}" if first == last else f"steps {first}-{last}")
        first = last + 1
    return tuple(batches), replace(run.timeline(phases), labels=tuple(labels))


def _alone(broker: int, controller: int | None) -> Batch:
    if broker == controller:
        return Batch((broker,), "the active controller: alone and last")
    return Batch((broker,), f"broker {broker} alone")


def _by_rack(order: Sequence[int], racks: Mapping[int, str | None]) -> list[int]:
    """`order` regrouped rack by rack, racks in the order their first broker comes."""
    first: dict[str | None, int] = {}
    for position, broker in enumerate(order):
        first.setdefault(racks.get(broker), position)
    return sorted(order, key=lambda b: (first[racks.get(b)], order.index(b)))


def _racks_mixed(batches: Sequence[Batch], racks: Mapping[int, str | None]) -> int:
    return sum(len({racks.get(b) for b in batch.brokers}) - 1 for batch in batches)


def choose_batches(
    model: Model,
    order: Sequence[int],
    cleared: Mapping[int, frozenset[TopicPartition]],
    *,
    before: Sequence[Operation] = (),
    max_size: int | None = None,
    racks: Mapping[int, str | None] | None = None,
    alone: PredictedTimeline | None = None,
) -> tuple[Batching, ...]:
    """Every batching weighed, the chosen one first. `order` is the restart order (the
    controller last); `cleared[b]` the partitions whose files broker b's restart deletes;
    `before` the plan's actions ahead of the restarts (its restores); `alone`, when known,
    the timeline of `before` and then `order` one broker at a time."""
    racks = racks or {}
    others = [b for b in order if b != model.controller]
    last = [b for b in order if b == model.controller]
    sequences = {ONE_AT_A_TIME: list(order)}
    if max_size != 1 and len(others) > 1:
        sequences[IN_ORDER] = list(order)
        if len({racks.get(b) for b in others} - {None}) > 1:
            sequences[BY_RACK] = [*_by_rack(others, racks), *last]
    weighed: list[Batching] = []
    for name, sequence in sequences.items():
        if name == ONE_AT_A_TIME and alone is not None:
            # The order search simulated exactly this already.
            batches = tuple(_alone(b, model.controller) for b in sequence)
            timeline = alone
        else:
            batches, timeline = _pack(
                model, sequence, cleared, before, 1 if name == ONE_AT_A_TIME else max_size, racks
            )
        if any(b.batches == batches for b in weighed):
            continue
        weighed.append(Batching(name, batches, timeline, _racks_mixed(batches, racks)))
    rank = {name: i for i, name in enumerate(sequences)}
    best = min(weighed, key=lambda b: (b.harm, b.racks_mixed, len(b.batches), rank[b.name]))
    chosen = Batching(best.name, best.batches, best.timeline, best.racks_mixed, chosen=True)
    return (chosen, *(b for b in weighed if b is not best))
