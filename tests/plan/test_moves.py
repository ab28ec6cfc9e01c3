"""The repair without restarts on plain data: where a replica can move (plan/moves.py), what
the availability model predicts for a move and a trigger, and the candidate the planner
offers or says why not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from remediate.cli.common import candidate_option
from remediate.config.models import KafkaConfig
from remediate.errors import ConfigError
from remediate.kafka_lines import KafkaLines
from remediate.minisr import MinIsrRule
from remediate.plan import (
    MoveStep,
    PlanOptions,
    RestoreStep,
    TriggerStep,
    make_plan,
    plan_from_json,
)
from remediate.plan.availability import MoveOp, TriggerOp, build_model, simulate
from remediate.plan.candidates import NAMES
from remediate.plan.moves import ReplicaMove, assign, bytes_per_broker
from remediate.plan.render import plan_markdown
from remediate.playbook import Action, load_playbook, parse_playbook
from remediate.state import BrokerDisks, MoveFacts, TopicPartition
from tests.plan.model import NEW, OLD, cluster, findings_for

REPAIR = load_playbook("topicid-mismatch")
MOVES = load_playbook("move-replicas")
ORDERS = {"orders": {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}}
T0, T1, T2, T3, T4, T5 = (TopicPartition("orders", p) for p in range(6))
MiB, GiB = 1 << 20, 1 << 30
MOVE_KEEP, MOVE_RESTORE = "move-keep-zk-id", "move-restore-id"


def disks(
    broker: int,
    *,
    version: tuple[int, int] | None = (2, 8),
    dirs: tuple[str, ...] = ("/d0", "/d1"),
    offline: tuple[str, ...] = (),
    free: dict[str, int] | None = None,
    size: int = GiB,
    added_size: int = MiB,
) -> BrokerDisks:
    return BrokerDisks(
        broker=broker,
        kafka_version=version,
        online_dirs=dirs,
        offline_dirs=offline,
        free_bytes=free if free is not None else {d: 10 * GiB for d in dirs},
        replicas={
            **{tp: (dirs[0], size) for tp in (T0, T1, T2)},
            **{tp: (dirs[0], added_size) for tp in (T3, T4, T5)},
        },
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
    model = build_model(
        state, found, min_isr=MinIsrRule(1), lines=KafkaLines.uniform((2, 8), state.brokers)
    )
    moved = frozenset((tp, b) for tp in (T0, T1) for b in (1, 2, 3))
    timeline = simulate(model, [MoveOp(moved), TriggerOp(frozenset({T0, T1, T2}))])
    assert timeline.unavailable_now == {T0, T1, T2}
    assert timeline.phases[0].after == {T0, T1, T2}  # a move alone heals nothing
    assert timeline.phases[1].after == {T2}  # its replicas were not moved: still fenced
    on_3x = build_model(
        state, found, min_isr=MinIsrRule(1), lines=KafkaLines.uniform((3, 4), state.brokers)
    )
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
    """The plan, with each broker's release as its disks' facts give it (2.8 without)."""
    read = {b: (2, 8) for b in state.brokers}
    if disks_facts is not None:
        read |= {b: d.kafka_version for b, d in disks_facts.brokers.items() if d.kafka_version}
    return make_plan(
        cluster="c",
        state=state,
        findings=found,
        playbook=REPAIR,
        lines=KafkaLines.read(read),
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


def test_both_moves_are_weighed_and_the_one_that_copies_less_is_chosen() -> None:
    state, found = incident()
    chosen = plan(state, found, facts())
    names = {c.name: c for c in chosen.candidates}
    assert set(names) == {"keep-zk-id", "restore-id", MOVE_KEEP, MOVE_RESTORE}
    assert names[MOVE_KEEP].restarts == names[MOVE_RESTORE].restarts == 0
    assert names[MOVE_KEEP].bytes_to_copy == {1: 3 * GiB, 2: 3 * GiB, 3: 3 * GiB}
    # The same harm; the partitions the legacy client added are the small ones.
    assert names[MOVE_RESTORE].bytes_to_copy == {1: 3 * MiB, 2: 3 * MiB, 3: 3 * MiB}
    assert names[MOVE_RESTORE].chosen
    move, restore = chosen.steps
    assert isinstance(move, MoveStep) and isinstance(restore, RestoreStep)
    assert {m.partition for m in move.moves} == {T3, T4, T5} and len(move.moves) == 9
    assert restore.topic_id == OLD and restore.zk_topic_id == NEW
    assert restore.reelect and restore.rolled_later == ()
    assert restore.predicted.after == () and not chosen.needs_acceptance
    assert not chosen.restarts and not chosen.triggers
    again = plan_from_json(chosen.to_json())
    assert again == chosen and again.digest == chosen.digest
    assert "none of their data copied" in names[MOVE_RESTORE].summary


def test_move_keep_zk_id_when_the_old_partitions_are_the_small_ones() -> None:
    state, found = incident()
    chosen = plan(state, found, facts(**{b: {"size": MiB, "added_size": GiB} for b in "123"}))
    assert [c.name for c in chosen.candidates if c.chosen] == [MOVE_KEEP]
    move, trigger = chosen.steps
    assert isinstance(move, MoveStep) and isinstance(trigger, TriggerStep)
    assert len(move.moves) == 9 and {m.to_dir for m in move.moves} == {"/d1"}
    assert move.actions == (
        Action.GATE_MOVE_SAFETY,
        Action.THROTTLE_SET,
        Action.MOVE_REPLICAS,
        Action.WAIT_MOVED,
        Action.THROTTLE_REMOVE,
    )
    assert move.throttle is None
    assert trigger.partitions == (T0, T1, T2)
    assert trigger.moved == {tp: (1, 2, 3) for tp in (T0, T1, T2)}
    assert trigger.predicted.after == ()
    assert not chosen.needs_acceptance
    again = plan_from_json(chosen.to_json())
    assert again == chosen and again.digest == chosen.digest
    markdown = plan_markdown(chosen)
    assert "Move replicas to another log dir of their broker (no restart)" in markdown
    assert "broker 2, `orders-1`: `/d0` → `/d1` (1.0 MiB)" in markdown


def test_the_copy_throttle_is_in_the_plan_and_shown() -> None:
    state, found = incident()
    chosen = plan(state, found, facts(), move_throttle_bytes_per_s=50 * MiB)
    (move,) = chosen.moves
    assert move.throttle == 50 * MiB
    assert plan_from_json(chosen.to_json()) == chosen
    assert chosen.to_json()["steps"][0]["throttle_bytes_per_s"] == 50 * MiB
    assert "throttled to 50.0 MiB/s per broker (put back afterwards)" in plan_markdown(chosen)


def test_where_it_cannot_move_the_plan_says_why_and_restarts() -> None:
    state, found = incident()
    chosen = plan(state, found, facts(**{"3": {"dirs": ("/d0",)}}))
    assert not {MOVE_KEEP, MOVE_RESTORE} & {c.name for c in chosen.candidates}
    assert chosen.restarts
    for name in (MOVE_KEEP, MOVE_RESTORE):
        assert (
            f"{name} (no restart) is not offered: broker 3 has one log dir: a replica has"
            " nowhere to move" in chosen.notes
        )


def test_move_restore_id_needs_exactly_one_other_id() -> None:
    state, found = incident()
    third = [
        replace(f, file_topic_id="ZZZZZZZZZZZZZZZZZZZZZZ")
        if (f.broker, f.partition) == (1, 0)
        else f
        for f in found
    ]
    chosen = plan(state, third, facts())
    assert MOVE_RESTORE not in {c.name for c in chosen.candidates}
    assert (
        f"{MOVE_RESTORE} (no restart) is not offered: orders: its replicas hold 2 ids other"
        " than ZooKeeper's" in chosen.notes
    )
    assert MOVE_KEEP in {c.name for c in chosen.candidates}


def test_on_kafka_3_the_moves_are_not_offered_and_the_plan_says_why() -> None:
    state, found = incident()
    chosen = plan(state, found, facts(**{b: {"version": (3, 4)} for b in "123"}))
    assert not {MOVE_KEEP, MOVE_RESTORE} & {c.name for c in chosen.candidates}
    assert (
        f"{MOVE_KEEP} and {MOVE_RESTORE} (no restart) are not offered: a moved replica keeps"
        " its id on Kafka 3.0 and later (KAFKA-12426), and broker(s) 1, 2, 3 do not run 2.8"
        " (Kafka 3.4 on broker(s) 1, 2, 3)" in chosen.notes
    )


def test_without_facts_of_the_disks_nothing_changes() -> None:
    state, found = incident()
    assert plan(state, found, None) == make_plan(
        cluster="c",
        state=state,
        findings=found,
        playbook=REPAIR,
        lines=KafkaLines.uniform((2, 8), state.brokers),
        options=PlanOptions(),
        known_brokers=sorted(state.brokers),
        restore=load_playbook("restore-zk-topic-id"),
    )


def test_the_operator_can_ask_for_the_restarts() -> None:
    state, found = incident()
    chosen = plan(state, found, facts(), candidate="keep-zk-id")
    assert [c.name for c in chosen.candidates if c.chosen] == ["keep-zk-id"]
    assert chosen.restarts and not chosen.moves
    # The move playbook's waits are not the plan's when it moves nothing.
    assert set(chosen.gates) == {"topicid-mismatch", "restore-zk-topic-id"}


def test_a_plan_that_moves_records_the_move_playbooks_gates_too() -> None:
    """apply waits by the plan's gates only: a plan that moves carries the move playbook's."""
    state, found = incident()
    chosen = plan(state, found, facts(**{b: {"size": MiB, "added_size": GiB} for b in "123"}))
    assert chosen.moves and chosen.triggers
    assert chosen.gates["move-replicas"] == MOVES.gates.model_dump(mode="json")
    assert set(chosen.gates) == {"topicid-mismatch", "restore-zk-topic-id", "move-replicas"}


def test_a_replica_move_is_ordered_and_frozen() -> None:
    move = ReplicaMove(1, T0, "/d0", "/d1", 10)
    assert sorted([ReplicaMove(2, T0, "/a", "/b", 1), move])[0] == move


MOVES_FILE = Path(__file__).resolve().parents[2] / "remediate" / "playbooks" / "move-replicas.yaml"


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            ["throttle: set", "move: replicas", "wait: moved", "throttle: remove"],
            "a 'gate' must come before 'move'",
        ),
        (
            ["gate: move-safety", "throttle: set", "move: replicas", "wait: moved"],
            "a throttle that is set must be removed",
        ),
        (
            ["gate: move-safety", "throttle: remove", "move: replicas", "throttle: set"],
            "a throttle that is set must be removed",
        ),
        (["gate: move-safety", "throttle: now", "move: replicas"], "'remove', 'set'"),
    ],
    ids=["no gate", "never removed", "removed before set", "unknown argument"],
)
def test_a_move_playbook_out_of_order_is_refused(steps: list[str], expected: str) -> None:
    document = yaml.safe_load(MOVES_FILE.read_text())
    document["steps"] = [dict([step.split(": ")]) for step in steps]
    with pytest.raises(ConfigError) as raised:
        parse_playbook(document, source="playbooks/bad.yaml")
    assert expected in str(raised.value)


@pytest.mark.parametrize("value", ["50", True, 1.5, [1]])
def test_a_plan_whose_throttle_is_not_an_integer_is_not_read(value: Any) -> None:
    state, found = incident()
    document = plan(state, found, facts(), move_throttle_bytes_per_s=MiB).to_json()
    document["steps"][0]["throttle_bytes_per_s"] = value
    with pytest.raises(ValueError, match="throttle_bytes_per_s: expected an integer or null"):
        plan_from_json(document)


@pytest.mark.parametrize(("value", "ok"), [(1024, True), (1023, False), (0, False)])
def test_the_configured_throttle_is_at_least_a_kibibyte(value: int, ok: bool) -> None:
    if ok:
        assert KafkaConfig(move_throttle_bytes_per_s=value).move_throttle_bytes_per_s == value
    else:
        with pytest.raises(pydantic.ValidationError, match="greater than or equal to 1024"):
            KafkaConfig(move_throttle_bytes_per_s=value)


def test_the_cli_offers_every_candidate() -> None:
    # click.option keeps its options on the function, in an attribute click's types omit.
    params = candidate_option(lambda: None).__click_params__  # type: ignore[attr-defined]
    assert tuple(params[0].type.choices) == (
        "auto",
        *NAMES,
    )
