"""The plan: findings + cluster state + playbook -> an ordered, reviewable, digest-stamped plan.

    model.py        the steps, the Plan, its JSON in and out, its digest
    fingerprint.py  the state a plan was made from, with its "broker:path" file keys
    restart.py      restart planning: which brokers, in what order, with which files
    restore.py      restore planning: the id every replica agrees on, written back
    planner.py      make_plan, which puts them together

Everything here is pure: no I/O, no clock.
"""

from remediate.plan.fingerprint import FileKey, Fingerprint, replica_file
from remediate.plan.model import (
    PLAN_FORMAT,
    AnyStep,
    Candidate,
    MoveStep,
    Plan,
    PlanOptions,
    PlanVerdict,
    Prediction,
    RestartStep,
    RestoreStep,
    TriggerStep,
    canonical,
    compute_digest,
    plan_from_json,
    with_digest,
)
from remediate.plan.planner import make_plan
from remediate.plan.restore import Agreement, agreements, is_restore_playbook, topic_agreement

__all__ = [
    "PLAN_FORMAT",
    "Agreement",
    "AnyStep",
    "Candidate",
    "FileKey",
    "Fingerprint",
    "MoveStep",
    "Plan",
    "PlanOptions",
    "PlanVerdict",
    "Prediction",
    "RestartStep",
    "RestoreStep",
    "TriggerStep",
    "agreements",
    "canonical",
    "compute_digest",
    "is_restore_playbook",
    "make_plan",
    "plan_from_json",
    "replica_file",
    "topic_agreement",
    "with_digest",
]
