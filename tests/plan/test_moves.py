"""The repair without restarts on plain data: where a replica can move (plan/moves.py), what
the availability model predicts for a move and a trigger, and the candidate the planner
offers or says why not."""

from __future__ import annotations

from typing import Any

import pytest

from remediate.plan import MoveStep, PlanOptions, TriggerStep, make_plan, plan_from_json
from remediate.plan.availability import MoveOp, TriggerOp, build_model, simulate
from remediate.plan.moves import ReplicaMove, assign, bytes_per_broker
from remediate.plan.render import plan_markdown
from remediate.playbook import Action, load_playbook
from remediate.state import BrokerDisks, MoveFacts, TopicPartition
from tests.plan.model import cluster, findings_for

REPAIR = load_playbook("topicid-mismatch")
MOVES = load_playbook("move-replicas")
ORDERS = {"orders": {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}}
T0, T1, T2 = (TopicPartition("orders", p) for p in range(3))
GiB = 1 << 30


def disks(
    broker: int,
    *,
    version: tuple[int, int] | None = (2, 8),
    dirs: tuple[str, ...] = ("/d0", "/d1"),
    offline: tuple[str, ...] = (),
    free: dict[str, int] | None = None,
    size: int = GiB,
) -> BrokerDisks:
    return BrokerDisks(
        broker=broker,
        kafka_version=version,
        online_dirs=dirs,
        offline_dirs=offline,
        free_bytes=free if free is not None else {d: 10 * GiB for d in dirs},
        replicas={tp: (dirs[0], size) for tp in (T0, T1, T2)},
    )


def facts(**per_broker: Any) -> MoveFacts:
    return MoveFacts({b: disks(b, **per_broker.get(str(b), {})) for b in (1, 2, 3)})


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"2": {"version": (3, 4)}}, "broker 2 runs Kafka 3.4: from 3.0 a moved replica keeps"),
        ({"2": {"version": None}}, "broker 2: its Kafka version could not be read"),
        ({"3": {"dirs": ("/d0",)}}, "broker 3 has one log dir: a replica has nowhere to move"),
        ({"1": {"offline": ("/d2",)}}, "broker 1 has an offline log dir (/d2)"),
        (
            {"1": {"free": {"/d0": 10 * GiB, "/d1": GiB}}},
            "broker 1: no log dir other than /d0 has room for orders-0",
        ),
    ],
    ids=["3.x", "version unknown", "one log dir", "offline dir", "no room"],
)
def test_a_precondition_that_fails_says_which_and_for_which_broker(
    changes: dict[str, dict[str, Any]], why: str
) -> None:
    moves, reason = assign([(T0, b) for b in (1, 2, 3)], facts(**changes))
    assert moves == ()
    assert reason is not None and reason.startswith(why), reason


def test_each_replica_goes_to_the_other_dir_with_the_most_room_left() -> None:
    three = {"dirs": ("/d0", "/d1", "/d2"), "free": {"/d0": 0, "/d1": 3 * GiB, "/d2": 2 * GiB}}
    moves, reason = assign([(T0, 1), (T1, 1)], facts(**{"1": three}))
    assert reason is None
    # 1.1 GiB each with the headroom: the first fills /d1 to 2 GiB left, the second ties and
    # goes to the first in name order with the most room.
    assert [(m.partition, m.to_dir) for m in moves] == [(T0, "/d1"), (T1, "/d1")]
    assert bytes_per_broker(moves) == {1: 2 * GiB}


def test_the_model_heals_a_fenced_partition_at_the_trigger_only_where_the_id_moved() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=3)
    kinds = {(b, "orders", p): "TOPIC_ID_MISMATCH" for b in (1, 2, 3) for p in (0, 1, 2)}
    found = findings_for(state, kinds) + [_fenced(state, tp) for tp in (T0, T1, T2)]
    model = build_model(state, found, min_isr_default=1)
    moved = frozenset((tp, b) for tp in (T0, T1) for b in (1, 2, 3))
    timeline = simulate(model, [MoveOp(moved), TriggerOp(frozenset({T0, T1, T2}))])
    assert timeline.unavailable_now == {T0, T1, T2}
    assert timeline.phases[0].after == {T0, T1, T2}  # a move alone heals nothing
    assert timeline.phases[1].after == {T2}  # its replicas were not moved: still fenced
    on_3x = build_model(state, found, min_isr_default=1, loophole=False)
    assert simulate(on_3x, [MoveOp(moved), TriggerOp(frozenset({T0}))]).phases[1].after == {
        T0,
        T1,
        T2,
    }


def _fenced(state: Any, tp: TopicPartition) -> Any:
    from tests.plan.model import replica  # noqa: PLC0415

    leader = state.partitions[tp].leader
    return replica("LEADER_FENCED_BY_STALE_ID", leader, tp.topic, tp.partition, in_isr=True)


def plan(state: Any, found: Any, disks_facts: MoveFacts | None, **options: Any) -> Any:
    return make_plan(
        cluster="c",
        state=state,
        findings=found,
        playbook=REPAIR,
        options=PlanOptions(**options),
        known_brokers=sorted(state.brokers),
        restore=load_playbook("restore-zk-topic-id"),
        moves=MOVES,
        disks=disks_facts,
    )


def incident() -> tuple[Any, Any]:
    """The 2.8 incident: the old partitions' replicas hold the old id and their leaders are
    fenced; the partitions the legacy client added hold ZooKeeper's."""
    topics = {"orders": {**ORDERS["orders"], 3: [1, 3, 2], 4: [2, 1, 3], 5: [3, 2, 1]}}
    state = cluster(brokers=[1, 2, 3], topics=topics, controller=3)
    kinds = {(b, "orders", p): "TOPIC_ID_MISMATCH" for b in (1, 2, 3) for p in (0, 1, 2)}
    return state, findings_for(state, kinds) + [_fenced(state, tp) for tp in (T0, T1, T2)]


def test_the_move_candidate_is_chosen_with_no_restart_and_round_trips() -> None:
    state, found = incident()
    chosen = plan(state, found, facts())
    names = {c.name: c for c in chosen.candidates}
    assert set(names) == {"keep-zk-id", "restore-id", "move-keep-zk-id"}
    assert names["move-keep-zk-id"].chosen and names["move-keep-zk-id"].restarts == 0
    assert names["move-keep-zk-id"].bytes_to_copy == {1: 3 * GiB, 2: 3 * GiB, 3: 3 * GiB}
    move, trigger = chosen.steps
    assert isinstance(move, MoveStep) and isinstance(trigger, TriggerStep)
    assert len(move.moves) == 9 and {m.to_dir for m in move.moves} == {"/d1"}
    assert move.actions == (Action.GATE_MOVE_SAFETY, Action.MOVE_REPLICAS, Action.WAIT_MOVED)
    assert trigger.partitions == (T0, T1, T2)
    assert trigger.moved == {tp: (1, 2, 3) for tp in (T0, T1, T2)}
    assert trigger.predicted.after == ()
    assert not chosen.needs_acceptance
    again = plan_from_json(chosen.to_json())
    assert again == chosen and again.digest == chosen.digest
    markdown = plan_markdown(chosen)
    assert "Move replicas to another log dir of their broker (no restart)" in markdown
    assert "broker 2, `orders-1`: `/d0` → `/d1` (1.0 GiB)" in markdown


def test_where_it_cannot_move_the_plan_says_why_and_restarts() -> None:
    state, found = incident()
    chosen = plan(state, found, facts(**{"3": {"dirs": ("/d0",)}}))
    assert "move-keep-zk-id" not in {c.name for c in chosen.candidates}
    assert chosen.restarts
    assert (
        "move-keep-zk-id (no restart) is not offered: broker 3 has one log dir: a replica has"
        " nowhere to move" in chosen.notes
    )


def test_on_kafka_3_the_repair_is_not_weighed_at_all() -> None:
    state, found = incident()
    chosen = plan(state, found, facts(**{b: {"version": (3, 4)} for b in "123"}))
    assert "move-keep-zk-id" not in {c.name for c in chosen.candidates}
    assert not [n for n in chosen.notes if "move-keep-zk-id" in n]


def test_without_facts_of_the_disks_nothing_changes() -> None:
    state, found = incident()
    assert plan(state, found, None) == make_plan(
        cluster="c",
        state=state,
        findings=found,
        playbook=REPAIR,
        options=PlanOptions(),
        known_brokers=sorted(state.brokers),
        restore=load_playbook("restore-zk-topic-id"),
    )


def test_the_operator_can_ask_for_the_restarts() -> None:
    state, found = incident()
    chosen = plan(state, found, facts(), candidate="keep-zk-id")
    assert [c.name for c in chosen.candidates if c.chosen] == ["keep-zk-id"]
    assert chosen.restarts and not chosen.moves


def test_a_replica_move_is_ordered_and_frozen() -> None:
    move = ReplicaMove(1, T0, "/d0", "/d1", 10)
    assert sorted([ReplicaMove(2, T0, "/a", "/b", 1), move])[0] == move
