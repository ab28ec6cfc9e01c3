"""The incremental simulation (remediate/plan/availability.py) against the plain one that walks
every partition at every action (tests/plan/availability_reference.py): the same timeline for
any cluster state and any sequence of actions, batches included. Generated with hypothesis:
brokers of mixed releases, partitions in every state the model knows (stale, missing and
unreadable ids, fenced leaders, replicas out of the ISR or Offline), restarts alone and in
batches, restores, moves and triggers, the controller among the restarted."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.kafka_lines import KafkaLines
from remediate.plan.availability import (
    UNREADABLE,
    BatchOp,
    Model,
    MoveOp,
    Operation,
    RestartOp,
    RestoreOp,
    TriggerOp,
    _Partition,
    simulate,
)
from remediate.state import TopicPartition
from tests.plan import availability_reference as reference

ZK, OTHER = "ZKID", "OTHERID"
RELEASES = [(2, 8), (3, 0), (3, 4), (3, 9)]


@st.composite
def partitions(draw: st.DrawFn, brokers: list[int]) -> _Partition:
    replicas = draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=3, unique=True))
    isr = set(draw(st.lists(st.sampled_from(replicas), max_size=3, unique=True)))
    leader = draw(st.sampled_from([-1, *replicas]))
    epoch = draw(st.integers(min_value=1, max_value=5))
    memory = {r: draw(st.sampled_from([ZK, OTHER, None, UNREADABLE])) for r in replicas}
    known = {r: epoch - draw(st.integers(min_value=0, max_value=1)) for r in replicas}
    offline = {r for r in replicas if memory[r] == OTHER and draw(st.booleans())}
    return _Partition(
        replicas=tuple(replicas),
        leader=leader,
        isr=isr,
        epoch=epoch,
        zk_id=draw(st.sampled_from([ZK, OTHER])),
        min_isr=draw(st.integers(min_value=1, max_value=3)),
        memory=memory,
        known=known,
        offline=offline,
        catchable=isr | {r for r in replicas if draw(st.booleans())},
    )


@st.composite
def models(draw: st.DrawFn) -> Model:
    brokers = list(range(1, draw(st.integers(min_value=2, max_value=5)) + 1))
    topics = draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True))
    parts = {
        TopicPartition(topic, n): draw(partitions(brokers))
        for topic in topics
        for n in range(draw(st.integers(min_value=1, max_value=4)))
    }
    alive = frozenset(draw(st.lists(st.sampled_from(brokers), min_size=1, unique=True)))
    lines = KafkaLines.read({b: draw(st.sampled_from(RELEASES)) for b in brokers})
    return Model(
        partitions=parts,
        alive=alive,
        controller=draw(st.sampled_from([None, *sorted(alive)])),
        lines=lines,
        topics=frozenset(topics),
    )


@st.composite
def operations(draw: st.DrawFn, model: Model) -> list[Operation]:
    brokers = sorted({r for p in model.partitions.values() for r in p.replicas} | model.alive)
    tps = sorted(model.partitions)

    def restart() -> RestartOp:
        cleared = draw(st.lists(st.sampled_from(tps), max_size=3, unique=True))
        return RestartOp(draw(st.sampled_from(brokers)), frozenset(cleared))

    ops: list[Operation] = []
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        kind = draw(st.sampled_from(["restart", "batch", "restore", "move", "trigger"]))
        if kind == "restart":
            ops.append(restart())
        elif kind == "batch":
            chosen = draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=3, unique=True))
            ops.append(BatchOp(tuple(RestartOp(b, restart().cleared) for b in chosen)))
        elif kind == "restore":
            ops.append(
                RestoreOp(draw(st.sampled_from(tps)).topic, draw(st.sampled_from([ZK, OTHER])))
            )
        else:
            picked = draw(st.lists(st.sampled_from(tps), min_size=1, max_size=4, unique=True))
            if kind == "trigger":
                ops.append(TriggerOp(frozenset(picked)))
            else:
                ops.append(
                    MoveOp(
                        frozenset(
                            (tp, draw(st.sampled_from(model.partitions[tp].replicas)))
                            for tp in picked
                        )
                    )
                )
    return ops


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_incremental_simulation_predicts_what_the_plain_one_does(data: st.DataObject) -> None:
    model = data.draw(models())
    ops = data.draw(operations(model))
    assert simulate(model, ops) == reference.simulate(model, ops)


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_a_simulation_leaves_its_model_as_it_was(data: st.DataObject) -> None:
    model = data.draw(models())
    before = {tp: p.copy() for tp, p in model.partitions.items()}
    simulate(model, data.draw(operations(model)))
    assert dict(model.partitions) == before


def test_a_batch_of_one_is_a_restart() -> None:
    model = Model(
        partitions={
            TopicPartition("a", 0): _Partition(
                replicas=(1, 2, 3),
                leader=1,
                isr={1, 2, 3},
                epoch=3,
                zk_id=ZK,
                min_isr=2,
                memory={1: ZK, 2: OTHER, 3: ZK},
                known={1: 3, 2: 3, 3: 3},
                catchable={1, 2, 3},
            )
        },
        alive=frozenset({1, 2, 3}),
        controller=3,
        lines=KafkaLines.uniform((2, 8), [1, 2, 3]),
    )
    alone = simulate(model, [RestartOp(2), RestartOp(1)])
    batched = simulate(model, [BatchOp((RestartOp(2),)), BatchOp((RestartOp(1),))])
    assert alone == batched
    assert alone.phases[0].during == frozenset()
