"""The plan: its steps, its JSON (out and back in) and its digest.

The plan is canonical JSON; its digest is the sha256 of that JSON without the digest, so any
change to any field changes it. Everything that reads a plan (apply, the executor, the
renderers, the run report) goes through this module.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from remediate.plan.fingerprint import Fingerprint

PLAN_FORMAT = 1


@dataclass(frozen=True)
class PlanOptions:
    """What the operator asks of the planner (the plan records `allow_unsafe`, `created_at`)."""

    allow_unsafe: bool = False
    include_topics: frozenset[str] = frozenset()
    min_isr_default: int = 1
    created_at: str | None = None


@dataclass(frozen=True)
class RestartStep:
    """Restart one broker through the playbook's steps, with the files it deletes."""

    broker: int
    reason: str
    partitions: tuple[str, ...]
    files: tuple[str, ...]
    actions: tuple[str, ...]
    impact: tuple[str, ...]
    is_controller: bool

    kind = "restart"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broker": self.broker,
            "reason": self.reason,
            "partitions": list(self.partitions),
            "files": list(self.files),
            "actions": list(self.actions),
            "impact": list(self.impact),
            "is_controller": self.is_controller,
        }


@dataclass(frozen=True)
class RestoreStep:
    """Write the id every replica agrees on into the topic znode (CAS on `znode_version`);
    with `reelect`, have the controller re-elected so it loads and sends that id."""

    topic: str
    topic_id: str
    zk_topic_id: str | None
    znode_version: int
    reelect: bool
    reason: str
    partitions: tuple[str, ...]
    actions: tuple[str, ...]
    impact: tuple[str, ...]
    playbook: str

    kind = "restore"
    broker = None
    files: tuple[str, ...] = ()
    is_controller = False

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broker": None,
            "topic": self.topic,
            "topic_id": self.topic_id,
            "zk_topic_id": self.zk_topic_id,
            "znode_version": self.znode_version,
            "reelect": self.reelect,
            "reason": self.reason,
            "partitions": list(self.partitions),
            "files": [],
            "actions": list(self.actions),
            "impact": list(self.impact),
            "playbook": self.playbook,
        }


AnyStep = RestartStep | RestoreStep


@dataclass(frozen=True)
class Plan:
    cluster: str
    cluster_id: str | None
    playbook: str
    playbook_version: int
    controller: int | None
    fingerprint: Fingerprint
    steps: tuple[AnyStep, ...]
    skipped: tuple[tuple[int, str], ...]
    refusals: tuple[str, ...]
    allow_unsafe: bool
    estimate_s: float
    created_at: str | None = None
    notes: tuple[str, ...] = ()
    # The gate parameters of every playbook the plan uses: approved with it, run with it.
    gates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    digest: str = field(default="", compare=False)

    @property
    def refused(self) -> bool:
        return bool(self.refusals) and not self.allow_unsafe

    @property
    def restarts(self) -> tuple[RestartStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, RestartStep))

    @property
    def restores(self) -> tuple[RestoreStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, RestoreStep))

    def body(self) -> dict[str, Any]:
        """Everything the digest covers."""
        return {
            "format": PLAN_FORMAT,
            "cluster": self.cluster,
            "cluster_id": self.cluster_id,
            "created_at": self.created_at,
            "playbook": self.playbook,
            "playbook_version": self.playbook_version,
            "controller": self.controller,
            "fingerprint": self.fingerprint.to_json(),
            "steps": [s.to_json() for s in self.steps],
            "skipped": [{"broker": b, "reason": r} for b, r in self.skipped],
            "refusals": list(self.refusals),
            "allow_unsafe": self.allow_unsafe,
            "estimate_s": self.estimate_s,
            "notes": list(self.notes),
            "gates": {name: dict(values) for name, values in sorted(self.gates.items())},
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest or compute_digest(self.body()),
            "refused": self.refused,
            **self.body(),
        }


def canonical(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode(
        "ascii"
    )


def compute_digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(body)).hexdigest()


def with_digest(plan: Plan) -> Plan:
    return Plan(**{**plan.__dict__, "digest": compute_digest(plan.body())})


# -- reading a plan back -------------------------------------------------------------------------


def _step_from_json(s: Mapping[str, Any]) -> AnyStep:
    if s.get("kind", "restart") == "restore":
        return RestoreStep(
            topic=str(s["topic"]),
            topic_id=str(s["topic_id"]),
            zk_topic_id=None if s["zk_topic_id"] is None else str(s["zk_topic_id"]),
            znode_version=int(s["znode_version"]),
            reelect=bool(s["reelect"]),
            reason=str(s["reason"]),
            partitions=tuple(s["partitions"]),
            actions=tuple(s["actions"]),
            impact=tuple(s["impact"]),
            playbook=str(s["playbook"]),
        )
    return RestartStep(
        broker=int(s["broker"]),
        reason=str(s["reason"]),
        partitions=tuple(s["partitions"]),
        files=tuple(s["files"]),
        actions=tuple(s["actions"]),
        impact=tuple(s["impact"]),
        is_controller=bool(s["is_controller"]),
    )


def plan_from_json(document: Mapping[str, Any]) -> Plan:
    """Rebuild a Plan from its JSON (the digest is recomputed, never trusted)."""
    plan = Plan(
        cluster=document["cluster"],
        cluster_id=document["cluster_id"],
        playbook=document["playbook"],
        playbook_version=int(document["playbook_version"]),
        controller=document["controller"],
        fingerprint=Fingerprint.from_json(document["fingerprint"]),
        steps=tuple(_step_from_json(s) for s in document["steps"]),
        skipped=tuple((int(s["broker"]), str(s["reason"])) for s in document["skipped"]),
        refusals=tuple(document["refusals"]),
        allow_unsafe=bool(document["allow_unsafe"]),
        estimate_s=float(document["estimate_s"]),
        created_at=document.get("created_at"),
        notes=tuple(document.get("notes", ())),
        gates=dict(document.get("gates", {})),
    )
    return with_digest(plan)
