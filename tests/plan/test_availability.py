"""The availability model, rule by rule (../shared/reference/kafka-zk.md, "The 2.8
post-failover state and the restart repair"), on plain data: one partition, replicas 1, 2, 3,
min.insync.replicas 2, ZooKeeper holding NEW, the old id OLD in the files that say so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from remediate.kafka_lines import KafkaLines
from remediate.minisr import MinIsrRule
from remediate.plan.availability import (
    PredictedTimeline,
    RestartOp,
    RestoreOp,
    build_model,
    harm,
    simulate,
)
from remediate.plan.order import order_restarts
from remediate.scan.findings import Finding
from remediate.scan.kinds import FindingKind
from remediate.state import ClusterState, TopicPartition
from tests.plan.model import OLD, cluster, findings_for

T0 = TopicPartition("t", 0)

P = TopicPartition("t", 0)
ALL = frozenset({P})


def one_partition(
    *,
    isr: Sequence[int] = (1, 2, 3),
    leader: int = 1,
    stale: Sequence[int] = (),
    fenced: bool = False,
    controller: int = 3,
    min_isr: int = 2,
) -> tuple[ClusterState, list[Finding]]:
    state = cluster(
        brokers=[1, 2, 3],
        topics={"t": {0: [1, 2, 3]}},
        isr={P: list(isr)},
        leaders={P: leader},
        controller=controller,
        min_isr={"t": min_isr},
    )
    findings = findings_for(state, {(b, "t", 0): "TOPIC_ID_MISMATCH" for b in stale})
    if fenced:
        findings.append(
            Finding(
                kind=FindingKind.LEADER_FENCED_BY_STALE_ID,
                cluster="c",
                broker=leader,
                topic="t",
                partition=0,
                file_topic_id=OLD,
            )
        )
    return state, findings


def predict(
    state: ClusterState,
    findings: list[Finding],
    actions: Sequence[RestartOp | RestoreOp],
    *,
    line: tuple[int, int] = (2, 8),
) -> PredictedTimeline:
    lines = KafkaLines.uniform(line, state.brokers)
    model = build_model(state, findings, min_isr=MinIsrRule(1), lines=lines)
    return simulate(model, actions)


def windows(timeline: PredictedTimeline) -> Mapping[TopicPartition, tuple[str, ...]]:
    return timeline.windows()


def test_a_replica_with_zookeepers_id_everywhere_only_sees_ordinary_leader_moves() -> None:
    state, findings = one_partition()
    timeline = predict(state, findings, [RestartOp(1), RestartOp(2), RestartOp(3)])
    assert windows(timeline) == {}
    assert timeline.converged


def test_a_stale_leader_rejects_the_epoch_bump_a_follower_restart_causes() -> None:
    # Leader 1 holds OLD in memory and has met no bump yet: it works now. Follower 3's
    # controlled shutdown shrinks the ISR (+1 epoch): leader 1 rejects it and is fenced.
    state, findings = one_partition(stale=[1, 2])
    timeline = predict(state, findings, [RestartOp(3, ALL)])
    assert timeline.unavailable_now == frozenset()
    assert windows(timeline) == {T0: ("step 1", "after step 1")}
    # Broker 3, back with no file, is at a newer epoch than its leader: it cannot follow.
    assert timeline.phases[0].out_of_isr_after == ALL


def test_a_fenced_leader_is_unavailable_now() -> None:
    state, findings = one_partition(stale=[1, 2, 3], isr=(1, 2), fenced=True)
    timeline = predict(state, findings, [])
    assert timeline.unavailable_now == ALL


def test_a_stale_replica_made_leader_never_takes_the_leadership() -> None:
    # Leader 1 stops; the controller elects 2, which holds OLD and rejects.
    state, findings = one_partition(stale=[2])
    timeline = predict(state, findings, [RestartOp(1)])
    assert windows(timeline) == {T0: ("step 1", "after step 1")}


def test_the_last_in_sync_replica_retries_then_goes_offline_until_it_returns() -> None:
    state, findings = one_partition(stale=[1, 2, 3], isr=(3,), leader=3, fenced=True)
    timeline = predict(state, findings, [RestartOp(3, ALL)])
    phase = timeline.phases[0]
    assert phase.last_in_isr == ALL
    assert P in phase.during
    # Back with no file, broker 3 is elected with ZooKeeper's id; 1 and 2 still hold OLD and
    # reject it, so it leads alone: below min.insync.replicas=2, and with 1 it is writable.
    assert P in phase.after
    assert not timeline.converged
    state, findings = one_partition(stale=[1, 2, 3], isr=(3,), leader=3, fenced=True, min_isr=1)
    assert P not in predict(state, findings, [RestartOp(3, ALL)]).phases[0].after


def test_convergence_needs_every_old_replica_restarted_with_its_file_deleted() -> None:
    state, findings = one_partition(stale=[1, 2, 3], isr=(1, 2), fenced=True)
    cleared = [RestartOp(2, ALL), RestartOp(3, ALL), RestartOp(1, ALL)]
    assert predict(state, findings, cleared).converged
    # One broker restarted with its old file kept: the 2.8 loophole accepts one LeaderAndIsr,
    # the file's id is loaded, and the partition does not converge.
    kept = [RestartOp(2, ALL), RestartOp(3), RestartOp(1, ALL)]
    assert not predict(state, findings, kept).converged


@pytest.mark.parametrize(
    ("line", "in_isr_after"), [((2, 8), True), ((3, 0), False), ((3, 4), False), ((3, 9), False)]
)
def test_the_first_leader_and_isr_after_a_restart_is_accepted_on_2_8_only(
    line: tuple[int, int], in_isr_after: bool
) -> None:
    # Leader 1 holds ZooKeeper's id; broker 3 restarts with OLD on disk, not deleted.
    state, findings = one_partition(stale=[3])
    timeline = predict(state, findings, [RestartOp(3)], line=line)
    assert (P not in timeline.phases[0].out_of_isr_after) is in_isr_after


def test_a_restore_heals_at_once_every_partition_whose_replicas_all_hold_the_id() -> None:
    state, findings = one_partition(stale=[1, 2, 3], isr=(1, 2), fenced=True)
    timeline = predict(state, findings, [RestoreOp("t", OLD)])
    assert timeline.unavailable_now == ALL
    assert timeline.phases[0].after == frozenset()
    assert timeline.converged


def test_a_replica_out_of_the_isr_for_a_reason_the_model_cannot_see_is_not_assumed_back() -> None:
    state, findings = one_partition(isr=(1, 2))
    timeline = predict(state, findings, [RestartOp(2)])
    assert timeline.phases[0].out_of_isr_after == frozenset()
    assert not timeline.converged and timeline.unconverged == (P,)


def test_an_ordinary_breach_of_min_isr_is_told_apart_from_the_ids_doing() -> None:
    state, findings = one_partition(isr=(1, 2))
    phase = predict(state, findings, [RestartOp(2)]).phases[0]
    assert phase.below_min == {P: ((1, 2), 2)}
    stale_state, stale_findings = one_partition(stale=[1], isr=(1, 2))
    assert predict(stale_state, stale_findings, [RestartOp(2)]).phases[0].below_min == {}


def test_the_incident_after_reproduce_the_controller_last_heals_the_old_partitions() -> None:
    # `sandbox reproduce` on 2.8: old partitions' leaders fenced, broker 1 out of their ISR,
    # broker 2 the controller; the new partitions hold ZooKeeper's id everywhere.
    state = cluster(
        brokers=[1, 2, 3],
        topics={"o": {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 2, 3]}},
        isr={("o", 0): [2, 3], ("o", 1): [2, 3], ("o", 2): [3, 2]},
        leaders={("o", 0): 2},
        controller=2,
    )
    old = {(b, "o", p): "TOPIC_ID_MISMATCH" for b in (1, 2, 3) for p in (0, 1, 2)}
    findings = findings_for(state, old)
    findings += [
        Finding(
            kind=FindingKind.LEADER_FENCED_BY_STALE_ID,
            cluster="c",
            broker=leader,
            topic="o",
            partition=p,
            file_topic_id=OLD,
        )
        for p, leader in ((0, 2), (1, 2), (2, 3))
    ]
    model = build_model(
        state, findings, min_isr=MinIsrRule(1), lines=KafkaLines.uniform((2, 8), state.brokers)
    )
    stale = {TopicPartition("o", 0), TopicPartition("o", 1), TopicPartition("o", 2)}
    order = order_restarts(model, [1, 2, 3], {b: frozenset(stale) for b in (1, 2, 3)})
    assert order.brokers[-1] == 2
    assert order.timeline.unavailable_now == stale
    assert order.timeline.newly_unavailable() == {}
    assert order.timeline.converged
    # The new partition only sees leader moves.
    assert TopicPartition("o", 3) not in order.timeline.windows()
    assert "active controller" in order.reasons[2]


def test_harm_counts_newly_unavailable_partitions_first() -> None:
    state, findings = one_partition(stale=[1, 2])
    worse = predict(state, findings, [RestartOp(3, ALL)])
    better = predict(state, findings, [])
    assert harm(better, 0) < harm(worse, 1)


@pytest.mark.parametrize(
    ("line", "offline_after"), [((2, 8), ()), ((3, 0), ((T0, 3),)), ((3, 4), ()), ((3, 9), ())]
)
def test_on_3_0_a_replica_rejected_after_a_restart_stays_offline_through_a_restore(
    line: tuple[int, int], offline_after: tuple[tuple[TopicPartition, int], ...]
) -> None:
    # Broker 3 restarted during the incident and was rejected: out of the ISR with OLD.
    state, findings = one_partition(stale=[1, 2, 3], isr=(1, 2), fenced=True)
    restored = predict(state, findings, [RestoreOp("t", OLD)], line=line)
    assert restored.offline_after == offline_after
    assert restored.converged is (not offline_after)
    # One more restart of its broker, with the id now right, heals it on every line.
    again = predict(state, findings, [RestoreOp("t", OLD), RestartOp(3)], line=line)
    assert again.converged and again.offline_after == ()


def test_on_3_0_a_restart_with_the_old_file_kept_leaves_the_replica_offline() -> None:
    state, findings = one_partition(stale=[3])
    timeline = predict(state, findings, [RestartOp(3)], line=(3, 0))
    assert timeline.offline_after == ((T0, 3),)
    assert P in timeline.phases[0].out_of_isr_after


def test_a_broker_whose_release_is_not_known_is_modelled_at_its_strictest() -> None:
    state, findings = one_partition(stale=[1, 2, 3], isr=(1, 2), fenced=True)
    lines = KafkaLines.read({1: (3, 4), 2: (3, 4), 3: "did not answer"})
    model = build_model(state, findings, min_isr=MinIsrRule(1), lines=lines)
    assert simulate(model, [RestoreOp("t", OLD)]).offline_after == ((T0, 3),)
