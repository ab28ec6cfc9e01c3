"""Restarts in batches (remediate/plan/batches.py): which brokers may restart together, which
batching the planner takes, and what the plan says of it. Plain data; the rule itself on
generated clusters."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.plan.availability import BatchOp, Model, RestartOp, Simulation
from remediate.plan.batches import BY_RACK, IN_ORDER, ONE_AT_A_TIME, choose_batches
from remediate.plan.model import Plan
from remediate.state import ClusterState
from tests.plan.model import cluster, findings_for
from tests.plan.test_availability_equivalence import models
from tests.plan.test_planner import plan_for

# Six brokers in three racks, every partition with one replica per rack (Kafka's rack-aware
# assignment): the brokers of a rack share no partition.
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b", 6: "rack-c"}
PLACEMENT = {0: [1, 2, 3], 1: [4, 5, 6], 2: [2, 3, 4], 3: [5, 6, 1], 4: [3, 4, 5], 5: [6, 1, 2]}


def six_in_three_racks() -> ClusterState:
    return cluster(
        brokers=sorted(RACKS),
        topics={"orders": PLACEMENT, "payments": PLACEMENT},
        controller=1,
        racks=RACKS,
    )


def incident_plan(max_batch_size: int | None = None) -> Plan:
    """Every replica of "orders" holds the old id: every broker restarts (keep-zk-id)."""
    state = six_in_three_racks()
    stale = {(b, "orders", p): "TOPIC_ID_MISMATCH" for p, rs in PLACEMENT.items() for b in rs}
    return plan_for(state, findings_for(state, stale), max_batch_size=max_batch_size)


def batches_of(plan: Plan) -> list[tuple[int, ...]]:
    seen: list[tuple[int, ...]] = []
    for step in plan.restarts:
        batch = step.batch or (step.broker,)
        if not seen or seen[-1] != batch:
            seen.append(batch)
    return seen


def test_the_brokers_of_a_rack_restart_together_and_the_controller_alone_last() -> None:
    plan = incident_plan()
    batches = batches_of(plan)
    assert batches[-1] == (1,)
    assert sorted(b for batch in batches for b in batch) == sorted(RACKS)
    for batch in batches[:-1]:
        assert len({RACKS[b] for b in batch}) == 1
    assert sorted(batches[:-1]) == [(2, 5), (3, 6), (4,)]
    chosen = plan.batchings[0]
    assert chosen.chosen and chosen.name == BY_RACK
    assert {b.name for b in plan.batchings} >= {ONE_AT_A_TIME, BY_RACK}
    one_at_a_time = next(b for b in plan.batchings if b.name == ONE_AT_A_TIME)
    assert chosen.harm["unavailable_phases"] < one_at_a_time.harm["unavailable_phases"]
    assert chosen.harm["batches"] == 4 and one_at_a_time.harm["batches"] == 6
    together = next(s for s in plan.restarts if s.batched)
    assert "restart together" in together.batch_reason and "all in rack-" in together.batch_reason
    # Steps of one batch share their prediction: one phase of the timeline.
    for step in plan.restarts:
        partners = [s for s in plan.restarts if s.batch == step.batch]
        assert all(s.predicted == step.predicted for s in partners)
    # Batches take the estimate down with them: four restart phases, not six.
    alone = incident_plan(max_batch_size=1)
    assert plan.estimate_s < alone.estimate_s


def test_one_at_a_time_weighs_nothing_and_says_nothing_of_batches() -> None:
    plan = incident_plan(max_batch_size=1)
    assert plan.batchings == ()
    assert all(not s.batch and not s.batch_reason for s in plan.restarts)
    assert "batch" not in plan.to_json()["steps"][0]
    assert "batchings" not in plan.to_json()


def test_the_cap_holds_every_batch_to_its_size() -> None:
    state = cluster(
        brokers=[1, 2, 3, 4, 5, 6, 7],
        topics={"orders": {p: [p % 7 + 1] for p in range(7)}},
        controller=7,
        min_isr={"orders": 1},
    )
    stale = {(p % 7 + 1, "orders", p): "TOPIC_ID_MISMATCH" for p in range(7)}
    for cap, largest in ((None, 6), (4, 4), (2, 2)):
        plan = plan_for(state, findings_for(state, stale), max_batch_size=cap)
        assert max(len(b) for b in batches_of(plan)) == largest
        assert batches_of(plan)[-1] == (7,)


def test_brokers_sharing_a_healthy_partition_at_its_minimum_do_not_restart_together() -> None:
    plan = incident_plan()
    in_order = next((b for b in plan.batchings if b.name == IN_ORDER), None)
    batches = [set(b) for b in (in_order.batches if in_order else batches_of(plan))]
    for batch in batches:
        for replicas in PLACEMENT.values():
            # payments is healthy, min.insync.replicas 2: at most one of its replicas down.
            assert len(batch & set(replicas)) <= 1
    alone = [s for s in plan.restarts if not s.batched and s.broker != 1]
    assert all("not with broker(s)" in s.batch_reason for s in alone)


@settings(max_examples=80, deadline=None)
@given(model=models(), cap=st.sampled_from([None, 1, 2, 3]))
def test_every_batch_chosen_keeps_the_rule_where_it_runs(model: Model, cap: int | None) -> None:
    order = sorted(model.on, key=lambda b: (b == model.controller, b))
    weighed = choose_batches(model, order, {}, max_size=cap)
    chosen = weighed[0]
    assert chosen.chosen and not any(b.chosen for b in weighed[1:])
    assert sorted(b for batch in chosen.batches for b in batch.brokers) == sorted(order)
    run = Simulation(model)
    for batch in chosen.batches:
        if model.controller in batch.brokers:
            assert batch.brokers == (model.controller,)
        if cap is not None:
            assert len(batch.brokers) <= cap
        if len(batch.brokers) > 1:
            assert run.batch_blocker(batch.brokers) is None
        run.run(BatchOp(tuple(RestartOp(b) for b in batch.brokers)))
    alone = next(b for b in weighed if b.name == ONE_AT_A_TIME)
    assert chosen.harm <= alone.harm
