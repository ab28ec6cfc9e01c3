"""The decisions that hold a run to the plan's prediction, on plain data: what the pre-gate
accepts, what counts as newly degraded, the controlled-shutdown allowance, the convergence
gate's scope and its verdicts."""

from __future__ import annotations

import pytest

from remediate.collect.snapshot import ReplicaRow
from remediate.execute import steps
from remediate.execute.decisions import (
    ConvergenceScope,
    converged_files_blocker,
    convergence_scope,
)
from remediate.gates import (
    Degraded,
    StaleIdHolder,
    converged_blocker,
    degraded,
    newly_degraded_blocker,
    pre_restart_blocker,
    shutdown_allowance,
)
from remediate.minisr import MinIsrRule
from remediate.plan import Fingerprint, Plan, RestartStep, RestoreStep
from remediate.playbook import Action
from remediate.state import ClusterState, ReplicaRef, TopicPartition
from tests.plan.model import NEW, OLD, cluster

ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)

ORDERS = {"orders": {0: [1, 2, 3], 1: [2, 3, 1]}}
AT_MIN = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=1, isr={("orders", 0): [1, 3]})
STALE_LEADER = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=1, leaders={("orders", 1): 2})


def pre_gate(
    state: ClusterState, *, accepted: set[tuple[str, int]], stale: bool = False
) -> str | None:
    holders = StaleIdHolder({ORDERS_1: frozenset({2})} if stale else {})
    return pre_restart_blocker(
        state,
        3,
        expected=[1, 2, 3],
        targeted=set(),
        stale=holders,
        min_isr=MinIsrRule(2),
        accepted={TopicPartition(*tp) for tp in accepted},
    )


@pytest.mark.parametrize(
    ("state", "stale", "accepted", "expected"),
    [
        (
            AT_MIN,
            False,
            set(),
            "orders-0 has exactly min.insync.replicas=2 in sync (isr [1, 3]); restarting"
            " broker 3 would take it below",
        ),
        (AT_MIN, False, {("orders", 0)}, None),
        (
            AT_MIN,
            False,
            {("orders", 1)},
            "orders-0 has exactly min.insync.replicas=2 in sync (isr [1, 3]); restarting"
            " broker 3 would take it below",
        ),
        (
            STALE_LEADER,
            True,
            set(),
            "orders-1: its leader, broker 2, holds a topic id ZooKeeper no longer has; it would"
            " refuse the ISR change a restart of broker 3 causes and stop acknowledging acks=all"
            " writes",
        ),
        (STALE_LEADER, True, {("orders", 1)}, None),
    ],
)
def test_the_pre_gate_accepts_exactly_the_predicted_partitions(
    state: ClusterState, stale: bool, accepted: set[tuple[str, int]], expected: str | None
) -> None:
    assert pre_gate(state, accepted=accepted, stale=stale) == expected


def names(*offline: str, below: tuple[str, ...] = ()) -> Degraded:
    return Degraded.from_json(
        {"offline_partitions": list(offline), "below_min_isr_partitions": list(below)}
    )


@pytest.mark.parametrize(
    ("before", "now", "allowed", "expected"),
    [
        (names(), names(), (), None),
        (names("a-0"), names("a-0"), (), None),
        (names(), names("a-0"), (TopicPartition("a", 0),), None),
        (names(), names("a-0"), (), "newly offline: a-0 (the plan did not predict them)"),
        (
            names(),
            names("a-0", below=("a-0", "b-1")),
            (),
            "newly offline: a-0; newly under min.insync.replicas: b-1 (the plan did not"
            " predict them)",
        ),
        (names(below=("b-1",)), names(below=("b-1",)), (), None),
    ],
)
def test_newly_degraded_partitions_outside_the_prediction_block(
    before: Degraded, now: Degraded, allowed: tuple[TopicPartition, ...], expected: str | None
) -> None:
    assert newly_degraded_blocker(before, now, allowed=allowed) == expected


def test_degraded_reads_offline_and_below_min_isr() -> None:
    state = cluster(
        brokers=[1, 2, 3],
        topics=ORDERS,
        isr={("orders", 0): [1], ("orders", 1): [2, 3]},
        leaders={("orders", 1): -1},
    )
    found = degraded(state, MinIsrRule(2))
    assert found.to_json() == {
        "offline_partitions": ["orders-1"],
        "below_min_isr_partitions": ["orders-0"],
    }
    assert Degraded.from_json(found.to_json()) == found


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        (None, (3, 5000, 15.0, "defaults")),
        ({}, (3, 5000, 15.0, "b:/p")),
        (
            {"controlled.shutdown.max.retries": "2", "controlled.shutdown.retry.backoff.ms": "100"},
            (2, 100, 0.2, "b:/p"),
        ),
        ({"controlled.shutdown.max.retries": "many"}, (3, 5000, 15.0, "b:/p")),
    ],
)
def test_the_controlled_shutdown_allowance(
    properties: dict[str, str] | None, expected: tuple[int, int, float, str]
) -> None:
    found = shutdown_allowance(properties, source="b:/p")
    assert (found.max_retries, found.backoff_ms, found.seconds, found.source) == expected


def plan(*steps_: RestartStep | RestoreStep) -> Plan:
    return Plan(
        cluster="c",
        cluster_id=None,
        playbook="topicid-mismatch",
        playbook_version=1,
        controller=1,
        fingerprint=Fingerprint(
            cluster_id=None, brokers=(1, 2, 3), controller_epoch=None, files={}
        ),
        steps=steps_,
        skipped=(),
        refusals=(),
        allow_unsafe=False,
        estimate_s=0.0,
    )


def restart(
    broker: int, partitions: tuple[TopicPartition, ...], actions: tuple[Action, ...]
) -> RestartStep:
    return RestartStep(broker, "r", partitions, (), actions, (), is_controller=False)


def restore(rolled_later: tuple[ReplicaRef, ...]) -> RestoreStep:
    return RestoreStep(
        topic="orders",
        topic_id=str(OLD),
        zk_topic_id=str(NEW),
        znode_version=1,
        reelect=True,
        reason="r",
        partitions=(ORDERS_0, ORDERS_1),
        actions=steps.RESTORE_ACTIONS,
        impact=(),
        playbook="restore-zk-topic-id",
        rolled_later=rolled_later,
    )


@pytest.mark.parametrize(
    ("the_plan", "expected"),
    [
        (plan(restart(3, (ORDERS_0,), (Action.STOP, Action.START))), None),
        (plan(restore(())), None),
        (
            plan(restart(3, (ORDERS_0,), steps.RESTART_ACTIONS)),
            ConvergenceScope(frozenset({"orders"}), frozenset()),
        ),
        (
            plan(
                restore((ReplicaRef(2, ORDERS_1), ReplicaRef(3, ORDERS_1))),
                restart(3, (TopicPartition("payments", 0),), steps.RESTART_ACTIONS),
            ),
            ConvergenceScope(frozenset({"orders", "payments"}), frozenset({ORDERS_1})),
        ),
    ],
)
def test_the_convergence_scope(the_plan: Plan, expected: ConvergenceScope | None) -> None:
    assert convergence_scope(the_plan) == expected


def test_convergence_needs_a_leader_and_the_full_isr_of_every_partition() -> None:
    healthy = cluster(brokers=[1, 2, 3], topics=ORDERS)
    assert converged_blocker(healthy, ["orders"]) is None
    short = cluster(brokers=[1, 2, 3], topics=ORDERS, isr={("orders", 1): [2, 3]})
    assert converged_blocker(short, ["orders"]) == (
        "1 partition(s) without a leader and their full ISR: orders-1"
    )
    assert converged_blocker(short, ["orders"], excused={ORDERS_1}) is None
    assert converged_blocker(healthy, ["gone"]) == "topic gone is not in ZooKeeper"


def row(topic: str, partition: int, file_id: str | None, state: str = "ok") -> ReplicaRow:
    return ReplicaRow(
        log_dir="/d",
        dir=f"{topic}-{partition}",
        dir_hex="",
        topic=topic,
        partition=partition,
        dir_kind="live",
        name_problem=None,
        metadata_state=state,
        file_topic_id=file_id,
        metadata_problem=None,
        epoch_latest=None,
    )


def test_convergence_needs_zookeepers_id_in_every_file_of_the_scope() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS)
    scope = ConvergenceScope(frozenset({"orders"}), frozenset())
    good = [row("orders", 0, str(NEW)), row("orders", 1, None, "missing")]
    assert converged_files_blocker(state, scope, {1: good}) is None
    bad = [row("orders", 0, str(OLD)), row("other", 0, str(OLD))]
    assert converged_files_blocker(state, scope, {2: bad}) == (
        f"files still disagree with ZooKeeper: orders-0 holds {OLD} on broker 2"
    )
    excused = ConvergenceScope(frozenset({"orders"}), frozenset({ORDERS_0}))
    assert converged_files_blocker(state, excused, {2: bad}) is None
    assert converged_files_blocker(state, scope, {3: "ssh: refused"}) == (
        "broker 3 could not be inspected (ssh: refused)"
    )
