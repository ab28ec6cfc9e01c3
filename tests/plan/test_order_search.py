"""The order search's budget, counted in partitions visited (partition x restart x order): it
never simulates past it, whatever the cluster; it never returns an order the model predicts
more harm for than the rule of thumb's; and where every order is affordable it finds the least
harm of them all. Generated clusters (tests/plan/test_availability_equivalence.py)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.plan import order as order_module
from remediate.plan.availability import (
    Model,
    Operation,
    PredictedTimeline,
    RestartOp,
    harm,
    simulate,
)
from tests.plan.test_availability_equivalence import models


def brokers_of(model: Model) -> list[int]:
    return sorted(model.on)


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []

    def counting(model: Model, operations: Sequence[Operation]) -> PredictedTimeline:
        calls.append(1)
        return simulate(model, operations)

    monkeypatch.setattr(order_module, "simulate", counting)
    return calls


@settings(max_examples=60, deadline=None)
@given(model=models(), budget=st.integers(min_value=0, max_value=400))
def test_the_search_stays_within_its_budget_and_never_does_worse_than_the_rule_of_thumb(
    model: Model, budget: int
) -> None:
    brokers = brokers_of(model)
    cost = max(1, sum(len(model.on.get(b, ())) for b in brokers))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(order_module, "SEARCH_BUDGET", budget)
        calls = counted(patch)
        found = order_module.order_restarts(model, brokers, {})
    # The rule of thumb's order, always; then at most what the budget affords.
    assert len(calls) <= 1 + max(0, budget // cost - 1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(order_module, "SEARCH_BUDGET", 0)
        thumb = order_module.order_restarts(model, brokers, {})
    assert harm(found.timeline, len(brokers)) <= harm(thumb.timeline, len(brokers))
    assert sorted(found.brokers) == brokers


@settings(max_examples=40, deadline=None)
@given(model=models())
def test_with_every_order_affordable_the_search_finds_the_least_harm(model: Model) -> None:
    brokers = brokers_of(model)
    others = [b for b in brokers if b != model.controller]
    last = [b for b in brokers if b == model.controller]
    found = order_module.order_restarts(model, brokers, {})
    least = min(
        harm(simulate(model, [RestartOp(b) for b in (*candidate, *last)]), len(brokers))
        for candidate in permutations(others)
    )
    assert harm(found.timeline, len(brokers)) == least
