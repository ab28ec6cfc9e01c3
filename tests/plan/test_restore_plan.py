"""Restore steps in the plan: the repair without restarts, where every replica agrees."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from remediate.kafka_lines import KafkaLines
from remediate.plan import (
    Plan,
    PlanOptions,
    RestartStep,
    RestoreStep,
    make_plan,
    plan_from_json,
)
from remediate.plan.render import plan_markdown
from remediate.playbook import load_playbook
from remediate.scan.findings import Finding
from remediate.scan.kinds import FindingKind
from remediate.state import ClusterState, ReplicaRef, TopicPartition
from tests.plan.model import NEW, OLD, cluster, findings_for

REPAIR = load_playbook("topicid-mismatch")
RESTORE = load_playbook("restore-zk-topic-id")
ORDERS = {"orders": {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}}


def plan_for(
    state: ClusterState,
    findings: list[Finding],
    lines: KafkaLines | None = None,
    **options: Any,
) -> Plan:
    return make_plan(
        cluster="c",
        state=state,
        findings=findings,
        playbook=REPAIR,
        options=PlanOptions(**options),
        known_brokers=sorted(state.brokers),
        lines=lines if lines is not None else KafkaLines.uniform((2, 8), state.brokers),
        restore=RESTORE,
    )


def all_old(state: ClusterState, topic: str = "orders") -> dict[tuple[int, str, int], str]:
    return {
        (b, t, p): "TOPIC_ID_MISMATCH"
        for (t, p) in state.partitions
        if t == topic
        for b in state.replicas(t, p)
    }


def without_zk_id(state: ClusterState, topic: str) -> ClusterState:
    topics = dict(state.topics)
    old = topics[topic]
    topics[topic] = replace(
        old, assignment=replace(old.assignment, topic_id=None, version=1), znode_version=7
    )
    return replace(state, topics=topics)


def missing_findings(state: ClusterState, topic: str) -> list[Finding]:
    """After the legacy write: the replicas all hold OLD, ZooKeeper holds nothing."""
    result = []
    for f in findings_for(state):
        if f.topic == topic:
            f = replace(f, kind=FindingKind.OK, file_topic_id=OLD, zk_topic_id=None)
        result.append(f)
    return [*result, Finding(kind=FindingKind.ZK_TOPIC_ID_MISSING, cluster="c", topic=topic)]


def test_every_replica_holding_the_old_id_is_one_restore_and_no_restart() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=2)
    plan = plan_for(state, findings_for(state, all_old(state)))
    assert [type(s) for s in plan.steps] == [RestoreStep]
    (step,) = plan.restores
    assert (step.topic, step.topic_id, step.zk_topic_id, step.reelect) == (
        "orders",
        OLD,
        NEW,
        True,
    )
    assert step.znode_version == 4
    assert "zk-write controller-election" in step.actions
    assert not plan.refused, plan.refusals
    assert len(plan.fingerprint.files) == 9
    assert set(plan.fingerprint.files.values()) == {OLD}


def test_a_topic_whose_replicas_hold_two_ids_gets_both_candidates_weighed() -> None:
    topics = {"orders": {0: [1, 2, 3], 1: [2, 3, 1]}}
    state = cluster(brokers=[1, 2, 3], topics=topics, controller=2)
    kinds = {(b, "orders", 0): "TOPIC_ID_MISMATCH" for b in (1, 2, 3)}
    plan = plan_for(state, findings_for(state, kinds))
    # Keeping ZooKeeper's id fences orders-0 (every replica holds OLD) until its last replica
    # is back; restoring OLD would fence orders-1 the same way during its roll: a tie on
    # newly unavailable partitions, which keep-zk-id wins on fewer phases.
    assert plan.restores == ()
    assert [s.broker for s in plan.restarts] == [1, 3, 2]
    keep, restore = plan.candidates
    assert (keep.name, keep.chosen, restore.name, restore.chosen) == (
        "keep-zk-id",
        True,
        "restore-id",
        False,
    )
    assert restore.targets == {"orders": OLD} and keep.targets == {"orders": NEW}
    assert plan.notes == ()
    chosen = plan_for(state, findings_for(state, kinds), candidate="restore-id")
    (step,) = chosen.restores
    assert (step.topic_id, step.zk_topic_id) == (OLD, NEW)
    assert step.rolled_later == tuple(ReplicaRef(b, TopicPartition("orders", 1)) for b in (1, 2, 3))
    assert [str(r) for r in step.rolled_later] == [f"orders-1 on broker {b}" for b in (1, 2, 3)]


def test_a_lost_id_is_restored_without_election_before_anything_else() -> None:
    base = cluster(brokers=[1, 2, 3], topics={**ORDERS, "t": {0: [1, 2, 3]}}, controller=1)
    state = without_zk_id(base, "orders")
    findings = missing_findings(state, "orders")
    findings = [
        replace(f, kind=FindingKind.TOPIC_ID_MISMATCH) if f.topic == "t" and f.broker == 3 else f
        for f in findings
    ]
    plan = plan_for(state, findings)
    assert isinstance(plan.steps[0], RestoreStep)
    assert (plan.steps[0].topic, plan.steps[0].reelect, plan.steps[0].zk_topic_id) == (
        "orders",
        False,
        None,
    )
    assert "zk-write controller-election" not in plan.steps[0].actions
    assert plan.steps[0].znode_version == 7
    assert [s.broker for s in plan.restarts] == [3]
    assert not plan.refused, plan.refusals


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda f: replace(f, file_topic_id=NEW) if f.broker == 2 and f.partition == 1 else f,
            "replicas disagree",
        ),
        (
            lambda f: (
                replace(f, kind="METADATA_CORRUPT", file_topic_id=None)
                if f.broker == 1 and f.partition == 2
                else f
            ),
            "orders-2 on broker 1 has a partition.metadata Kafka cannot read",
        ),
    ],
)
def test_a_lost_id_without_agreement_is_refused_with_the_reason(change: Any, reason: str) -> None:
    state = without_zk_id(cluster(brokers=[1, 2, 3], topics=ORDERS, controller=1), "orders")
    findings = [change(f) if f.topic == "orders" else f for f in missing_findings(state, "orders")]
    plan = plan_for(state, findings)
    assert plan.refused
    assert plan.restores == ()
    assert any(
        r.startswith("orders: ZooKeeper lost its topic id and it cannot be restored")
        and reason in r
        for r in plan.refusals
    ), plan.refusals


def test_an_unreachable_broker_blocks_the_restore() -> None:
    state = without_zk_id(cluster(brokers=[1, 2, 3], topics=ORDERS, controller=1), "orders")
    findings = [f for f in missing_findings(state, "orders") if f.broker != 3]
    findings.append(
        Finding(kind=FindingKind.BROKER_UNREACHABLE, cluster="c", broker=3, detail="ssh: no")
    )
    plan = plan_for(state, findings)
    assert plan.refused
    assert any("broker(s) [3] hosting orders could not be inspected" in r for r in plan.refusals)


def test_an_election_is_refused_while_another_topic_has_no_id() -> None:
    base = cluster(brokers=[1, 2, 3], topics={**ORDERS, "lost": {0: [1, 2, 3]}}, controller=2)
    state = without_zk_id(base, "lost")
    findings = [f for f in findings_for(base, all_old(base)) if f.topic == "orders"]
    # "lost" has replicas that disagree: nothing to restore, and an election would mint an id.
    findings += [
        replace(f, file_topic_id=NEW if f.broker == 2 else OLD, zk_topic_id=None)
        for f in findings_for(base)
        if f.topic == "lost"
    ]
    findings.append(Finding(kind=FindingKind.ZK_TOPIC_ID_MISSING, cluster="c", topic="lost"))
    plan = plan_for(state, findings)
    assert plan.refused
    assert any("mints a new id for lost" in r for r in plan.refusals), plan.refusals


def test_a_plan_with_a_restore_survives_its_json_and_renders() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=2)
    plan = plan_for(state, findings_for(state, all_old(state)))
    document = json.loads(json.dumps(plan.to_json()))
    assert document["steps"][0]["kind"] == "restore"
    assert document["steps"][0]["broker"] is None
    again = plan_from_json(document)
    assert again.digest == plan.digest
    assert again.restores == plan.restores
    text = plan_markdown(plan)
    assert "Restore the topic id of `orders` (no restart)" in text
    assert f"Write `{OLD}` into `/brokers/topics/orders`" in text


def test_restart_steps_keep_their_kind_in_json() -> None:
    state = cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=2)
    plan = plan_for(state, findings_for(state, {(3, "t", 0): "TOPIC_ID_MISMATCH"}))
    assert all(isinstance(s, RestartStep) for s in plan.steps)
    assert plan.to_json()["steps"][0]["kind"] == "restart"


def test_replicas_without_a_file_take_the_restored_id_and_do_not_block() -> None:
    state = without_zk_id(cluster(brokers=[1, 2, 3], topics=ORDERS, controller=1), "orders")
    findings = [
        replace(f, kind=FindingKind.METADATA_MISSING, file_topic_id=None)
        if f.topic == "orders" and f.partition == 2
        else f
        for f in missing_findings(state, "orders")
    ]
    plan = plan_for(state, findings)
    assert not plan.refused, plan.refusals
    assert [(s.topic, s.topic_id) for s in plan.restores] == [("orders", OLD)]


def test_no_file_anywhere_means_nothing_to_restore() -> None:
    state = without_zk_id(cluster(brokers=[1, 2, 3], topics=ORDERS, controller=1), "orders")
    findings = [
        replace(f, kind=FindingKind.METADATA_MISSING, file_topic_id=None)
        if f.topic == "orders"
        else f
        for f in missing_findings(state, "orders")
    ]
    plan = plan_for(state, findings)
    assert plan.restores == ()
    assert not plan.refused, plan.refusals


def test_brokers_left_out_say_the_restore_repairs_them() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=2)
    plan = plan_for(state, findings_for(state, all_old(state)))
    assert plan.skipped == tuple(
        (b, "no restart: the restore of orders repairs its replicas") for b in (1, 2, 3)
    )


def test_the_plan_carries_its_playbooks_gates_under_its_digest() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=2)
    plan = plan_for(state, findings_for(state, all_old(state)))
    assert set(plan.gates) == {"topicid-mismatch", "restore-zk-topic-id"}
    assert plan.gates["restore-zk-topic-id"]["stability_window_s"] == 5
    document = json.loads(json.dumps(plan.to_json()))
    document["gates"]["topicid-mismatch"]["stability_window_s"] = 0
    assert plan_from_json(document).digest != plan.digest


def test_the_restore_phase_alone_ends_the_outage_without_a_restart() -> None:
    topics = {"orders": {0: [1, 2, 3], 1: [2, 3, 1]}}
    state = cluster(brokers=[1, 2, 3], topics=topics, controller=2)
    kinds = {(b, "orders", 0): "TOPIC_ID_MISMATCH" for b in (1, 2, 3)}
    plan = plan_for(state, findings_for(state, kinds), restore_only=True)
    assert [s.kind for s in plan.steps] == ["restore"]
    assert plan.restarts == ()
    assert {b for b, _ in plan.skipped} >= {1, 2, 3}
    assert any("restore phase only" in n for n in plan.notes)


def test_a_candidate_that_is_not_possible_is_an_error_naming_the_possible_ones() -> None:
    state = cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=1)
    findings = findings_for(state, {(2, "t", 0): "TOPIC_ID_MISMATCH"})
    # Only broker 2 holds another id: restoring it is a candidate, so both are possible.
    assert {c.name for c in plan_for(state, findings).candidates} == {"keep-zk-id", "restore-id"}
    with pytest.raises(ValueError, match="possible"):
        plan_for(state, findings, candidate="no-such-candidate")


def test_a_lost_id_no_replica_claims_gets_a_controller_election_that_mints_one() -> None:
    state = without_zk_id(cluster(brokers=[1, 2, 3], topics=ORDERS, controller=2), "orders")
    findings = [
        replace(f, kind=FindingKind.METADATA_MISSING, file_topic_id=None, zk_topic_id=None)
        if f.topic == "orders"
        else f
        for f in findings_for(state)
    ]
    findings.append(Finding(kind=FindingKind.ZK_TOPIC_ID_MISSING, cluster="c", topic="orders"))
    plan = plan_for(state, findings)
    assert not plan.refused, plan.refusals
    (step,) = plan.steps
    assert isinstance(step, RestoreStep)
    assert (step.mint, step.reelect, step.topic_id) == (True, True, "")
    assert "zk-write topic-id" not in step.actions
    assert "zk-write controller-election" in step.actions
    assert plan_from_json(plan.to_json()) == plan
    assert "mints the id" in plan_markdown(plan)


def restarted_during_the_incident(state: ClusterState) -> tuple[ClusterState, list[Finding]]:
    """Every replica holds OLD; broker 1 restarted after the failover and was rejected: it
    is out of every ISR."""
    isr: dict[tuple[str, int], list[int]] = {
        tp: [b for b in state.replicas(*tp) if b != 1] for tp in state.partitions
    }
    leaders: dict[tuple[str, int], int] = {
        tp: next(b for b in state.replicas(*tp) if b != 1) for tp in state.partitions
    }
    again = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=2, isr=isr, leaders=leaders)
    kinds = {
        key: "TOPIC_ID_MISMATCH_OUT_OF_ISR" if key[0] == 1 else kind
        for key, kind in all_old(again).items()
    }
    return again, findings_for(again, kinds)


def test_on_3_0_a_restore_names_the_replicas_that_still_need_a_restart() -> None:
    state, found = restarted_during_the_incident(cluster(brokers=[1, 2, 3], topics=ORDERS))
    on_30 = plan_for(state, found, lines=KafkaLines.uniform((3, 0), state.brokers))
    # The restore heals brokers 2 and 3; broker 1's replicas are Offline on it and only a
    # restart after the restore reaches them.
    assert [type(s) for s in on_30.steps] == [RestoreStep, RestartStep]
    (restart,) = on_30.restarts
    assert restart.broker == 1
    # The wait after the restore's election excuses them from the ISR, and nothing else.
    (restore,) = on_30.restores
    assert restore.offline_until_restart == tuple(
        ReplicaRef(1, TopicPartition("orders", p)) for p in (0, 1, 2)
    )
    assert restart.reason.startswith(
        "3 replica(s) rejected their id after a restart during the incident and are Offline on"
        " this Kafka 3.0 broker (orders-0, orders-1, orders-2)"
    ), restart.reason
    assert not [n for n in on_30.notes if n.startswith("on Kafka 3.0")]
    # From 3.1 the replicas stay Online: the restore reaches them, no restart.
    on_34 = plan_for(state, found, lines=KafkaLines.uniform((3, 4), state.brokers))
    assert [type(s) for s in on_34.steps] == [RestoreStep]
    assert on_34.restores[0].offline_until_restart == ()


def test_on_3_0_a_restore_alone_says_which_replicas_stay_offline() -> None:
    state, found = restarted_during_the_incident(cluster(brokers=[1, 2, 3], topics=ORDERS))
    lines = KafkaLines.uniform((3, 0), state.brokers)
    alone = plan_for(state, found, lines=lines, restore_only=True)
    assert [type(s) for s in alone.steps] == [RestoreStep]
    # Left Offline for a roll planned later: the wait after the election does not halt on it.
    assert {r.broker for r in alone.restores[0].offline_until_restart} == {1}
    (offline,) = [n for n in alone.notes if n.startswith("on Kafka 3.0")]
    assert offline.endswith("orders-0 on broker 1, orders-1 on broker 1, orders-2 on broker 1")


@pytest.mark.parametrize(("line", "warned"), [((2, 8), False), ((3, 0), False), ((3, 1), True)])
def test_from_3_1_the_plan_says_consumers_are_down_since_the_failover(
    line: tuple[int, int], warned: bool
) -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=2)
    plan = plan_for(state, findings_for(state, all_old(state)), KafkaLines.uniform(line, [1, 2, 3]))
    said = [n for n in plan.notes if "INCONSISTENT_TOPIC_ID" in n]
    assert bool(said) is warned
    if warned:
        assert said[0].startswith(
            "3 partition(s) have a leader holding another id than ZooKeeper's on Kafka 3.1 or"
            " later (orders-0, orders-1, orders-2)"
        )


def test_a_live_broker_whose_release_is_not_known_refuses_a_plan_with_steps() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=2)
    lines = KafkaLines.read({1: (3, 9), 2: (3, 9), 3: "ApiVersions failed: timed out"})
    plan = plan_for(state, findings_for(state, all_old(state)), lines)
    assert plan.refused
    assert plan.refusals[0].startswith("the Kafka release of broker(s) 3 is not known")
    assert KafkaLines.from_json(plan.to_json()["kafka"]) == lines
    healthy = plan_for(state, findings_for(state), lines)
    assert healthy.steps == () and not healthy.refused
