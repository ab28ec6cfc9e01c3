"""The order of the restarts: the one the availability model predicts least harm for, the
active controller last, each position with its reason. Pure.

The rule of thumb: the brokers in the ZooKeeper ISR of a
partition with a stale id restart back to back, since that partition stays unavailable from
the first of them until the last is back; a broker already out of those ISRs neither helps nor
hurts them, so it comes after them. The model checks the rule on the cluster at hand: where
the brokers are few it tries every order (controller last) and keeps the least harm, the rule
of thumb breaking ties; where they are many it starts from the rule of thumb's order and swaps
neighbours while that lowers the harm, within a budget counted in partitions visited.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import permutations
from math import factorial

from remediate.plan.availability import (
    Model,
    Operation,
    PredictedTimeline,
    RestartOp,
    harm,
    simulate,
)
from remediate.state import TopicPartition

# The most (partition x restart x order) the search may simulate: each order's simulation
# visits every partition of each restarted broker. Exhaustive within it, else neighbours of the
# rule of thumb's order swapped while it lasts; a count, not a time, so that the same cluster
# always gets the same plan (bench/plan_scale.py measures what it costs).
SEARCH_BUDGET = 60_000

IN_ISR, OUT_OF_ISR, ORDINARY = 0, 1, 2


@dataclass(frozen=True)
class Order:
    brokers: tuple[int, ...]
    reasons: Mapping[int, str]
    timeline: PredictedTimeline


def stale_partitions(model: Model) -> dict[TopicPartition, frozenset[int]]:
    """Per partition with a replica holding another id than ZooKeeper's, those replicas."""
    found = {}
    for tp, p in model.partitions.items():
        holders = frozenset(
            r for r, held in p.memory.items() if held is not None and held != p.zk_id
        )
        if holders:
            found[tp] = holders
    return found


def _names(tps: Sequence[TopicPartition]) -> str:
    shown = ", ".join(str(tp) for tp in tps[:4])
    return shown + (f" and {len(tps) - 4} more" if len(tps) > 4 else "")


def _rank(model: Model, stale_tps: Sequence[TopicPartition], broker: int) -> tuple[int, str]:
    stale = [tp for tp in stale_tps if broker in model.partitions[tp].replicas]
    if not stale:
        return ORDINARY, "hosts no partition with a stale id: an ordinary restart"
    in_isr = [tp for tp in stale if broker in model.partitions[tp].isr]
    if in_isr:
        return IN_ISR, (
            f"in the ZooKeeper ISR of {len(in_isr)} partition(s) with a stale id"
            f" ({_names(in_isr)}): restarted back to back with the other brokers in those"
            " ISRs, so their outage spans as few restarts as possible"
        )
    return OUT_OF_ISR, (
        f"already out of the ISR of every partition with a stale id it hosts"
        f" ({_names(stale)}): its restart neither helps nor hurts them"
    )


def order_restarts(
    model: Model,
    brokers: Sequence[int],
    cleared: Mapping[int, frozenset[TopicPartition]],
    *,
    before: Sequence[Operation] = (),
) -> Order:
    """The order of `brokers`' restarts (each deleting the files of `cleared[broker]`),
    after the actions `before` (the plan's restores). The timeline covers both."""
    stale_tps = sorted(stale_partitions(model))
    ranks = {b: _rank(model, stale_tps, b) for b in brokers}
    controller = [b for b in brokers if b == model.controller]
    others = [b for b in brokers if b != model.controller]
    thumb = sorted(others, key=lambda b: (ranks[b][0], b))

    def run(order: Sequence[int]) -> PredictedTimeline:
        return simulate(
            model,
            [*before, *(RestartOp(b, cleared.get(b, frozenset())) for b in (*order, *controller))],
        )

    best = tuple(thumb)
    timeline = run(best)
    cost = max(1, sum(len(model.on.get(b, ())) for b in brokers))
    affordable = SEARCH_BUDGET // cost - 1
    score = (harm(timeline, len(brokers)), [ranks[b][0] for b in best], best)

    def weigh(candidate: tuple[int, ...]) -> bool:
        nonlocal score, best, timeline
        predicted = run(candidate)
        key = (harm(predicted, len(brokers)), [ranks[b][0] for b in candidate], candidate)
        if key < score:
            score, best, timeline = key, candidate, predicted
            return True
        return False

    if 1 < factorial(len(others)) <= affordable:
        for candidate in permutations(others):
            if candidate != tuple(thumb):
                weigh(candidate)
    elif len(others) > 1:
        # Too many orders: from the rule of thumb's, swap neighbours while that helps.
        improved = True
        while improved and affordable > 0:
            improved = False
            for i in range(len(best) - 1):
                if affordable <= 0:
                    break
                affordable -= 1
                swapped = (*best[:i], best[i + 1], best[i], *best[i + 2 :])
                improved = weigh(swapped) or improved
    reasons = {}
    for position, b in enumerate(best):
        reason = ranks[b][1]
        if b != thumb[position]:
            reason += (
                "; the availability model predicts less unavailability with it in this"
                " position than in the rule of thumb's (brokers in the ISRs of stale"
                " partitions first, back to back)"
            )
        elif ranks[b][0] == OUT_OF_ISR:
            reason += ", so it comes after the brokers in those ISRs"
        reasons[b] = reason
    for b in controller:
        reasons[b] = (
            "the active controller: last, so the run has one controller election and it comes"
            " after every other broker is back"
            + ("" if ranks[b][0] == ORDINARY else f"; it is {ranks[b][1].split(':')[0]}")
        )
    return Order(brokers=(*best, *controller), reasons=reasons, timeline=timeline)
