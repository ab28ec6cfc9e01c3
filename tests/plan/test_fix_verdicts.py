"""What `fix` does with a plan before anything changes, table-driven on recorded plans: a
refused plan, an unreviewed one (its digest is not the one approved), one that makes working
partitions unavailable and nobody accepted it, a dry run. Each says why, with its own outcome
and exit code, and never reaches the run."""

from __future__ import annotations

from typing import Any

import pytest

from remediate.config import ClusterConfig
from remediate.exit_codes import EXIT_NEEDS_ACCEPTANCE, EXIT_REFUSED
from remediate.plan import Plan, PlanVerdict
from remediate.plan.model import plan_from_json
from remediate.workflows import FixOutcome, FixResult, fix
from tests.config.test_config import MINIMAL, parse
from tests.plan.test_recorded_plans import ENTRIES

PLANS = [plan_from_json(e["document"]) for e in ENTRIES]
REFUSED = next(p for p in PLANS if p.refused)
UNACCEPTED = next(p for p in PLANS if p.needs_acceptance and not p.refused)
READY = next(p for p in PLANS if p.steps and p.verdict == PlanVerdict.READY)


def never_applied(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("the run was reached")


def run_fix(plan: Plan, **options: Any) -> FixResult:
    config: ClusterConfig = parse(MINIMAL)
    arguments: dict[str, Any] = {
        "apply": True,
        "accept_unavailable": False,
        "approved_digest": None,
        "approved_by": "test",
        "spark_master": None,
        "log_json": False,
        "progress": lambda _message: None,
        "write_report": never_applied,
        **options,
    }
    return fix(config, plan, **arguments)


def test_the_verdicts_of_the_recorded_plans() -> None:
    assert REFUSED.verdict == PlanVerdict.REFUSED
    assert UNACCEPTED.verdict == PlanVerdict.NEEDS_ACCEPTANCE
    assert READY.verdict == PlanVerdict.READY


OTHER = "0" * 64


@pytest.mark.parametrize(
    ("plan", "options", "outcome", "code", "said"),
    [
        # Refused is refused, whatever was approved or accepted: escalate.
        (REFUSED, {}, FixOutcome.REFUSED, EXIT_REFUSED, "the plan is refused ("),
        (
            REFUSED,
            {"approved_digest": REFUSED.digest, "accept_unavailable": True},
            FixOutcome.REFUSED,
            EXIT_REFUSED,
            "Escalate",
        ),
        # A digest that is not the plan made now: whatever changed, nothing is done.
        (READY, {"approved_digest": OTHER}, FixOutcome.NOT_REVIEWED, EXIT_REFUSED, OTHER),
        (
            UNACCEPTED,
            {"approved_digest": OTHER, "accept_unavailable": True},
            FixOutcome.NOT_REVIEWED,
            EXIT_REFUSED,
            "is not the plan reviewed",
        ),
        # Partitions made unavailable: review, then accept or approve; not "escalate".
        (
            UNACCEPTED,
            {},
            FixOutcome.NEEDS_ACCEPTANCE,
            EXIT_NEEDS_ACCEPTANCE,
            f"--approve {UNACCEPTED.digest}",
        ),
        (
            UNACCEPTED,
            {"apply": False},
            FixOutcome.NEEDS_ACCEPTANCE,
            EXIT_NEEDS_ACCEPTANCE,
            "makes partitions unavailable that are available now",
        ),
        # Approving the digest of the plan reviewed accepts what it names.
        (
            UNACCEPTED,
            {"apply": False, "approved_digest": UNACCEPTED.digest.upper()},
            FixOutcome.DRY_RUN,
            0,
            UNACCEPTED.digest,
        ),
        (
            UNACCEPTED,
            {"apply": False, "accept_unavailable": True},
            FixOutcome.DRY_RUN,
            0,
            "nothing was changed",
        ),
        # A dry run prints the digest and how to apply exactly that plan.
        (READY, {"apply": False}, FixOutcome.DRY_RUN, 0, f"--yes --approve {READY.digest}"),
    ],
)
def test_fix_stops_before_the_run_and_says_why(
    plan: Plan, options: dict[str, Any], outcome: FixOutcome, code: int, said: str
) -> None:
    # With apply (the default), reaching the run would fail: MINIMAL's ZooKeeper does not
    # exist, and the report writer raises.
    result = run_fix(plan, **options)
    assert (result.outcome, result.code) == (outcome, code), result.message
    assert said in result.message
    assert result.document["outcome"] == outcome
    assert result.document["applied"] is False
    assert result.document["plan"]["digest"] == plan.digest
