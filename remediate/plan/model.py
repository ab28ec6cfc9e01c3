"""The plan: its steps, its JSON (out and back in) and its digest.

The plan is canonical JSON; its digest is the sha256 of that JSON without the digest, so any
change to any field changes it. Everything that reads a plan (apply, the executor, the
renderers, the run report) goes through this module.

Inside, a plan is typed: partitions are `TopicPartition`s, replicas `ReplicaRef`s, actions
`Action`s. Their text ("orders-3", "orders-3 on broker 2", "wait in-sync") is made by the
`to_json` methods here and read back by the `from_json` ones, nowhere else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from remediate.kafka_lines import KafkaLines
from remediate.minisr import MinIsrRule, PlannedMinIsr
from remediate.plan.estimate import ObservedRestarts
from remediate.plan.fingerprint import Fingerprint
from remediate.plan.moves import ReplicaMove
from remediate.playbook import Action
from remediate.state import ReplicaRef, TopicPartition

PLAN_FORMAT = 1
V = TypeVar("V")


def names(partitions: Iterable[TopicPartition]) -> list[str]:
    """The partitions' names ("topic-N"), in the order given."""
    return [str(tp) for tp in partitions]


def partitions_from_json(texts: Iterable[str]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition.parse(str(text)) for text in texts)


def by_name(mapping: Mapping[TopicPartition, V]) -> list[tuple[TopicPartition, V]]:
    """The entries in the order of their partitions' names, as the plan's JSON lists them
    ("t-10" before "t-2")."""
    return sorted(mapping.items(), key=lambda item: str(item[0]))


def _phases_to_json(phases: Mapping[TopicPartition, tuple[str, ...]]) -> dict[str, list[str]]:
    return {str(tp): list(w) for tp, w in by_name(phases)}


def _phases_from_json(document: Mapping[str, Any]) -> dict[TopicPartition, tuple[str, ...]]:
    return {TopicPartition.parse(str(p)): tuple(w) for p, w in dict(document).items()}


def _actions_from_json(actions: Iterable[str]) -> tuple[Action, ...]:
    return tuple(Action(str(a)) for a in actions)


@dataclass(frozen=True)
class PlanOptions:
    """What the operator asks of the planner (the plan records `allow_unsafe`, `created_at`)."""

    allow_unsafe: bool = False
    include_topics: frozenset[str] = frozenset()
    min_isr_default: int = 1
    # Where `min_isr_default` came from and each broker's own (remediate/minisr.py); the plan
    # records it.
    min_isr: PlannedMinIsr | None = None
    created_at: str | None = None
    # Which repair to plan: "auto" (the least harm the model predicts), "keep-zk-id" or
    # "restore-id" (plan/availability.py); with `restore_only`, only the restore phase of
    # "restore-id" (ends the outage now, no restart; the roll is planned later).
    candidate: str = "auto"
    restore_only: bool = False
    # The copy throttle of the repairs that move replicas (cluster.yaml's kafka section).
    move_throttle_bytes_per_s: int | None = None
    # The most brokers restarted together (--max-batch-size); None: as many as the batch rule
    # allows (plan/batches.py), 1: one at a time.
    max_batch_size: int | None = None
    # How long each broker's restart took in earlier runs (plan/estimate.py): the estimate.
    observed_restarts: ObservedRestarts | None = None

    @property
    def min_isr_rule(self) -> MinIsrRule:
        """Each partition's min.insync.replicas without a topic override (remediate/minisr.py):
        as resolved from the brokers, else `min_isr_default` for every broker."""
        return self.min_isr.rule() if self.min_isr is not None else MinIsrRule(self.min_isr_default)


@dataclass(frozen=True)
class BatchingSummary:
    """A batching as the plan's JSON keeps it: its batches and its harm, no timeline."""

    name: str
    chosen: bool
    batches: tuple[tuple[int, ...], ...]
    harm: Mapping[str, Any]
    racks_mixed: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "chosen": self.chosen,
            "batches": [list(b) for b in self.batches],
            "harm": dict(self.harm),
            "racks_mixed": self.racks_mixed,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> BatchingSummary:
        return cls(
            name=str(document["name"]),
            chosen=bool(document["chosen"]),
            batches=tuple(tuple(int(b) for b in batch) for batch in document["batches"]),
            harm=dict(document["harm"]),
            racks_mixed=int(document.get("racks_mixed", 0)),
        )


@dataclass(frozen=True)
class Prediction:
    """What the availability model (plan/availability.py) predicts for one step.
    "Unavailable": no leader that accepts acks=all writes (no leader, a leader fenced by a
    stale topic id, or fewer in-sync replicas than min.insync.replicas).

    - `during`: unavailable at some point while the step runs (its broker down, an election);
    - `after`: still unavailable once the step has finished;
    - `out_of_isr_after`: partitions of the step's broker that it cannot rejoin the ISR of
      when it is back (their leader still holds a stale id), so the post-gate does not wait;
    - `last_in_isr`: partitions whose only in-sync replica is the step's broker: its
      controlled shutdown retries, then the partition is offline until the broker returns.
    """

    during: tuple[TopicPartition, ...] = ()
    after: tuple[TopicPartition, ...] = ()
    out_of_isr_after: tuple[TopicPartition, ...] = ()
    last_in_isr: tuple[TopicPartition, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "during": names(self.during),
            "after": names(self.after),
            "out_of_isr_after": names(self.out_of_isr_after),
            "last_in_isr": names(self.last_in_isr),
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any] | None) -> Prediction:
        document = document or {}
        return cls(
            during=partitions_from_json(document.get("during", ())),
            after=partitions_from_json(document.get("after", ())),
            out_of_isr_after=partitions_from_json(document.get("out_of_isr_after", ())),
            last_in_isr=partitions_from_json(document.get("last_in_isr", ())),
        )

    @property
    def expected(self) -> frozenset[TopicPartition]:
        """Every partition this step is allowed to leave unavailable or out of the ISR."""
        return frozenset(self.during) | frozenset(self.after) | frozenset(self.out_of_isr_after)


@dataclass(frozen=True)
class Candidate:
    """One way to repair the plan's topics, with the harm the model predicts for it.

    `name` is "keep-zk-id" (delete the files that disagree with ZooKeeper, restart their
    brokers) or "restore-id" (write the id the other replicas hold back into ZooKeeper,
    re-elect the controller, then roll the brokers whose files hold ZooKeeper's current id).
    `windows` maps every partition the candidate leaves unavailable at some phase to those
    phases ("now", "step N", "after step N"); `newly_unavailable` are the ones available now.
    `targets` maps each topic to the id it ends with.
    """

    name: str
    chosen: bool
    summary: str
    targets: Mapping[str, str]
    restarts: int
    newly_unavailable: tuple[TopicPartition, ...]
    unavailable_phases: int
    windows: Mapping[TopicPartition, tuple[str, ...]]
    converges: bool
    blocked: str | None = None
    # What a move candidate copies, per broker, in bytes (absent for the others).
    bytes_to_copy: Mapping[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.bytes_to_copy:
            extra["bytes_to_copy"] = {str(b): n for b, n in sorted(self.bytes_to_copy.items())}
        return {
            **extra,
            "name": self.name,
            "chosen": self.chosen,
            "summary": self.summary,
            "targets": dict(sorted(self.targets.items())),
            "restarts": self.restarts,
            "newly_unavailable": names(self.newly_unavailable),
            "unavailable_phases": self.unavailable_phases,
            "windows": _phases_to_json(self.windows),
            "converges": self.converges,
            "blocked": self.blocked,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Candidate:
        return cls(
            name=str(d["name"]),
            chosen=bool(d["chosen"]),
            summary=str(d["summary"]),
            targets={str(k): str(v) for k, v in dict(d["targets"]).items()},
            restarts=int(d["restarts"]),
            newly_unavailable=partitions_from_json(d["newly_unavailable"]),
            unavailable_phases=int(d["unavailable_phases"]),
            windows=_phases_from_json(d["windows"]),
            converges=bool(d["converges"]),
            blocked=None if d.get("blocked") is None else str(d["blocked"]),
            bytes_to_copy={int(b): int(n) for b, n in dict(d.get("bytes_to_copy", {})).items()},
        )


@dataclass(frozen=True)
class RestartStep:
    """Restart one broker through the playbook's steps, with the files it deletes."""

    broker: int
    reason: str
    # In the order of their names, as the plan has always listed them.
    partitions: tuple[TopicPartition, ...]
    files: tuple[str, ...]
    actions: tuple[Action, ...]
    impact: tuple[str, ...]
    is_controller: bool
    # Why the step is in this position of the order, and what the model predicts for it.
    order_reason: str = ""
    predicted: Prediction = field(default_factory=Prediction)
    # The brokers restarted together with this one, itself included (plan/batches.py), and
    # why; the executor runs consecutive steps of one batch as one. Empty: alone.
    batch: tuple[int, ...] = ()
    batch_reason: str = ""

    kind = "restart"

    @property
    def batched(self) -> bool:
        return len(self.batch) > 1

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broker": self.broker,
            "reason": self.reason,
            "partitions": names(self.partitions),
            "files": list(self.files),
            "actions": list(self.actions),
            "impact": list(self.impact),
            "is_controller": self.is_controller,
            "order_reason": self.order_reason,
            "predicted": self.predicted.to_json(),
            **(
                {"batch": list(self.batch), "batch_reason": self.batch_reason}
                if self.batch_reason
                else {}
            ),
        }


def restart_batches(steps: Iterable[RestartStep]) -> list[tuple[int, ...]]:
    """The brokers of each batch of `steps`, in order (plan/batches.py): consecutive steps of
    one batch together, a step of none alone."""
    batches: list[tuple[int, ...]] = []
    for step in steps:
        batch = step.batch or (step.broker,)
        if not batches or batches[-1] != batch:
            batches.append(batch)
    return batches


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
    partitions: tuple[TopicPartition, ...]
    actions: tuple[Action, ...]
    impact: tuple[str, ...]
    playbook: str
    # Replicas whose files hold another id, left for the restart steps that follow (candidate
    # "restore-id"); the executor's agreement check allows exactly these.
    rolled_later: tuple[ReplicaRef, ...] = ()
    predicted: Prediction = field(default_factory=Prediction)
    # No id to write (ZooKeeper lost it before any replica wrote partition.metadata): only the
    # controller election, whose new controller mints an id every replica takes. `topic_id`
    # is then empty.
    mint: bool = False
    # Replicas their Kafka 3.0 broker marked Offline when it rejected its id during the
    # incident: the restored id does not reach them and they stay out of the ISR until the
    # restart steps that follow (the wait after the election excuses exactly these).
    offline_until_restart: tuple[ReplicaRef, ...] = ()

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
            "partitions": names(self.partitions),
            "files": [],
            "actions": list(self.actions),
            "impact": list(self.impact),
            "playbook": self.playbook,
            "rolled_later": [str(r) for r in self.rolled_later],
            "predicted": self.predicted.to_json(),
            "mint": self.mint,
            # Only where a 3.0 broker left replicas Offline: plans made before it read back
            # byte for byte.
            **(
                {"offline_until_restart": [str(r) for r in self.offline_until_restart]}
                if self.offline_until_restart
                else {}
            ),
        }


@dataclass(frozen=True)
class MoveStep:
    """Move every replica that holds another id than ZooKeeper's to another log dir of its
    own broker (plan/moves.py), all brokers at once: on Kafka 2.8 they hold no id afterwards.
    Nothing becomes unavailable: no leader, epoch or ISR changes."""

    moves: tuple[ReplicaMove, ...]
    reason: str
    actions: tuple[Action, ...]
    playbook: str
    predicted: Prediction = field(default_factory=Prediction)
    # The copy's throttle on each broker while its replicas move (bytes per second;
    # replica.alter.log.dirs.io.max.bytes.per.second), put back as it was afterwards.
    throttle: int | None = None

    kind = "move"
    broker = None
    is_controller = False

    @property
    def partitions(self) -> tuple[TopicPartition, ...]:
        return tuple(sorted({m.partition for m in self.moves}, key=str))

    @property
    def brokers(self) -> tuple[int, ...]:
        return tuple(sorted({m.broker for m in self.moves}))

    @property
    def files(self) -> tuple[str, ...]:
        return ()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broker": None,
            "reason": self.reason,
            "partitions": names(self.partitions),
            "files": [],
            "moves": [
                {
                    "broker": m.broker,
                    "partition": str(m.partition),
                    "from_dir": m.from_dir,
                    "to_dir": m.to_dir,
                    "bytes": m.size,
                }
                for m in self.moves
            ],
            "throttle_bytes_per_s": self.throttle,
            "actions": list(self.actions),
            "playbook": self.playbook,
            "predicted": self.predicted.to_json(),
        }


@dataclass(frozen=True)
class TriggerStep:
    """Reassign each partition to its own replicas, once their moved replicas hold no id: the
    LeaderAndIsr that follows carries ZooKeeper's id, which they take."""

    partitions: tuple[TopicPartition, ...]
    reason: str
    actions: tuple[Action, ...]
    playbook: str
    # Per partition, the brokers whose replica the plan moved (the gate waits for them).
    moved: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    predicted: Prediction = field(default_factory=Prediction)

    kind = "trigger"
    broker = None
    is_controller = False

    @property
    def files(self) -> tuple[str, ...]:
        return ()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broker": None,
            "reason": self.reason,
            "partitions": names(self.partitions),
            "files": [],
            "moved": {str(tp): list(b) for tp, b in by_name(self.moved)},
            "actions": list(self.actions),
            "playbook": self.playbook,
            "predicted": self.predicted.to_json(),
        }


AnyStep = RestartStep | RestoreStep | MoveStep | TriggerStep


class PlanVerdict(StrEnum):
    """What a plan allows: to be applied as it is, only once someone accepts the partitions
    it makes unavailable (`--accept-unavailable`, or approving its digest), or nothing."""

    READY = "ready"
    NEEDS_ACCEPTANCE = "needs-acceptance"
    REFUSED = "refused"


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
    # The repairs weighed (plan/availability.py) and the partitions the chosen one makes
    # unavailable that are available now, with their phases: what the approval accepts.
    candidates: tuple[Candidate, ...] = ()
    newly_unavailable: Mapping[TopicPartition, tuple[str, ...]] = field(default_factory=dict)
    unavailable_now: tuple[TopicPartition, ...] = ()
    # The min.insync.replicas a topic without an override gets, and each topic the plan
    # touches with where its value came from (the gates and the model used these).
    min_isr: PlannedMinIsr | None = None
    min_isr_topics: Mapping[str, PlannedMinIsr] = field(default_factory=dict)
    # The Kafka release line each broker runs, as read when planning: the rules used.
    kafka_lines: KafkaLines | None = None
    # The batchings of the restarts weighed, the chosen one first (plan/batches.py); empty
    # when there was no choice (one broker, or --max-batch-size 1).
    batchings: tuple[BatchingSummary, ...] = ()
    digest: str = field(default="", compare=False)

    @property
    def refused(self) -> bool:
        return bool(self.refusals) and not self.allow_unsafe

    @property
    def needs_acceptance(self) -> bool:
        """The plan makes partitions unavailable that are available now."""
        return bool(self.newly_unavailable)

    @property
    def verdict(self) -> PlanVerdict:
        if self.refused:
            return PlanVerdict.REFUSED
        if self.needs_acceptance:
            return PlanVerdict.NEEDS_ACCEPTANCE
        return PlanVerdict.READY

    @property
    def restarts(self) -> tuple[RestartStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, RestartStep))

    @property
    def restores(self) -> tuple[RestoreStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, RestoreStep))

    @property
    def moves(self) -> tuple[MoveStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, MoveStep))

    @property
    def triggers(self) -> tuple[TriggerStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, TriggerStep))

    def body(self) -> dict[str, Any]:
        """Everything the digest covers: what the plan does and the state it was made from.
        Not when it was made: a plan made again from the same state, with the same options,
        has the same digest (`fix --yes --approve` relies on it)."""
        return {
            "format": PLAN_FORMAT,
            "cluster": self.cluster,
            "cluster_id": self.cluster_id,
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
            "candidates": [c.to_json() for c in self.candidates],
            "newly_unavailable": _phases_to_json(self.newly_unavailable),
            "unavailable_now": names(self.unavailable_now),
            **(
                {
                    "min_isr": {
                        "brokers": self.min_isr.to_json(),
                        "topics": {t: m.to_json() for t, m in sorted(self.min_isr_topics.items())},
                    }
                }
                if self.min_isr is not None
                else {}
            ),
            **({"kafka": self.kafka_lines.to_json()} if self.kafka_lines is not None else {}),
            **({"batchings": [b.to_json() for b in self.batchings]} if self.batchings else {}),
        }

    def to_json(self) -> dict[str, Any]:
        body = self.body()
        head = {key: body.pop(key) for key in ("format", "cluster", "cluster_id")}
        return {
            "digest": self.digest or compute_digest(self.body()),
            "refused": self.refused,
            **head,
            "created_at": self.created_at,
            **body,
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


def _optional_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected an integer or null, got {value!r}")
    return value


def _step_from_json(s: Mapping[str, Any]) -> AnyStep:
    kind = s.get("kind", "restart")
    if kind == "move":
        return MoveStep(
            moves=tuple(
                ReplicaMove(
                    broker=int(m["broker"]),
                    partition=TopicPartition.parse(str(m["partition"])),
                    from_dir=str(m["from_dir"]),
                    to_dir=str(m["to_dir"]),
                    size=int(m["bytes"]),
                )
                for m in s["moves"]
            ),
            reason=str(s["reason"]),
            actions=_actions_from_json(s["actions"]),
            playbook=str(s["playbook"]),
            predicted=Prediction.from_json(s.get("predicted")),
            throttle=_optional_int(s.get("throttle_bytes_per_s"), "throttle_bytes_per_s"),
        )
    if kind == "trigger":
        return TriggerStep(
            partitions=partitions_from_json(s["partitions"]),
            reason=str(s["reason"]),
            actions=_actions_from_json(s["actions"]),
            playbook=str(s["playbook"]),
            moved={
                TopicPartition.parse(str(p)): tuple(int(b) for b in brokers)
                for p, brokers in dict(s.get("moved", {})).items()
            },
            predicted=Prediction.from_json(s.get("predicted")),
        )
    if kind == "restore":
        return RestoreStep(
            topic=str(s["topic"]),
            topic_id=str(s["topic_id"]),
            zk_topic_id=None if s["zk_topic_id"] is None else str(s["zk_topic_id"]),
            znode_version=int(s["znode_version"]),
            reelect=bool(s["reelect"]),
            reason=str(s["reason"]),
            partitions=partitions_from_json(s["partitions"]),
            actions=_actions_from_json(s["actions"]),
            impact=tuple(s["impact"]),
            playbook=str(s["playbook"]),
            rolled_later=tuple(ReplicaRef.parse(str(r)) for r in s.get("rolled_later", ())),
            predicted=Prediction.from_json(s.get("predicted")),
            mint=bool(s.get("mint", False)),
            offline_until_restart=tuple(
                ReplicaRef.parse(str(r)) for r in s.get("offline_until_restart", ())
            ),
        )
    return RestartStep(
        broker=int(s["broker"]),
        reason=str(s["reason"]),
        partitions=partitions_from_json(s["partitions"]),
        files=tuple(s["files"]),
        actions=_actions_from_json(s["actions"]),
        impact=tuple(s["impact"]),
        is_controller=bool(s["is_controller"]),
        order_reason=str(s.get("order_reason", "")),
        predicted=Prediction.from_json(s.get("predicted")),
        batch=tuple(int(b) for b in s.get("batch", ())),
        batch_reason=str(s.get("batch_reason", "")),
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
        candidates=tuple(Candidate.from_json(c) for c in document.get("candidates", ())),
        newly_unavailable=_phases_from_json(document.get("newly_unavailable", {})),
        unavailable_now=partitions_from_json(document.get("unavailable_now", ())),
        **_min_isr_from_json(document.get("min_isr")),
        kafka_lines=KafkaLines.from_json(document["kafka"]) if "kafka" in document else None,
        batchings=tuple(BatchingSummary.from_json(b) for b in document.get("batchings", ())),
    )
    return with_digest(plan)


def _min_isr_from_json(document: Mapping[str, Any] | None) -> dict[str, Any]:
    if not document:
        return {}
    return {
        "min_isr": PlannedMinIsr.from_json(document["brokers"]),
        "min_isr_topics": {
            str(t): PlannedMinIsr.from_json(m) for t, m in dict(document["topics"]).items()
        },
    }
