"""The preflight before a ZooKeeper-to-KRaft migration (`check --before kraft-migration`): a
pure decision, from one scan and what the brokers say of their disks, of what the migration
would do to this cluster's topic ids and data.

A migration (KIP-866) copies each topic znode's `topic_id` into KRaft's metadata, where it
never changes again, and Kafka's migration does the rest by those ids (Kafka's source, 3.4 to
3.9: KRaftMigrationDriver, ReplicaManager and LogManager's stray handling):

- a topic znode without `topic_id` stops the migration: from 3.5 the KRaft controller exits
  on a fatal fault, on 3.4 the migration stalls with nothing logged;
- a replica whose partition.metadata holds another id is a stray: from 3.6.2, the KRaft
  controller's first full LeaderAndIsr moves it aside as `-stray` and recreates it empty,
  and KRaft-mode brokers of 3.4 to 3.6 delete it at start-up (3.7 and later move it aside).
  Where no replica of a partition holds ZooKeeper's id, the partition's data is no longer
  served: only the `-stray` directories keep it;
- a replica without partition.metadata is a stray from 3.7.1 (KAFKA-16814), and on 3.6.2 to
  3.7.0 the KRaft controller's full LeaderAndIsr fails on it ("does not have a topic ID").

Nothing here does I/O: remediate/workflows.py gathers the facts, the CLI prints the verdict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from remediate.scan.findings import Finding, ScanReport
from remediate.scan.kinds import MISMATCH_KINDS, FindingKind
from remediate.state import ClusterState, MoveFacts, TopicPartition

EVENT = "kraft-migration"

# A replica the migration sets aside (or fails on) because of what its file holds.
AT_RISK_KINDS = MISMATCH_KINDS | {FindingKind.METADATA_MISSING, FindingKind.METADATA_CORRUPT}
# The exit code of a preflight that found a hazard (README.md, "Exit codes": CRITICAL).
EXIT_HAZARD = 2


class HazardKind(StrEnum):
    MIGRATION_BEGUN = "MIGRATION_BEGUN"
    TOPIC_WITHOUT_ID = "TOPIC_WITHOUT_ID"
    STRAY_REPLICAS = "STRAY_REPLICAS"


@dataclass(frozen=True)
class Hazard:
    """One reason the migration is not safe for topic ids. For STRAY_REPLICAS, one partition:
    its replicas the migration would set aside, those that hold ZooKeeper's id (its data
    survives when there is one), and the bytes at risk as the brokers report them (None when
    a broker's size is not known)."""

    kind: HazardKind
    detail: str
    topic: str | None = None
    partition: int | None = None
    stray: tuple[int, ...] = ()
    holding_zk_id: tuple[int, ...] = ()
    bytes_at_risk: int | None = None

    @property
    def data_survives(self) -> bool | None:
        if self.kind != HazardKind.STRAY_REPLICAS:
            return None
        return bool(self.holding_zk_id)

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"kind": self.kind, "detail": self.detail}
        if self.kind == HazardKind.STRAY_REPLICAS:
            document.update(
                topic=self.topic,
                partition=self.partition,
                stray=list(self.stray),
                holding_zk_id=list(self.holding_zk_id),
                data_survives=self.data_survives,
                bytes_at_risk=self.bytes_at_risk,
            )
        elif self.topic is not None:
            document["topic"] = self.topic
        return document


@dataclass(frozen=True)
class Preflight:
    """The verdict: safe only with no hazard and a check that found nothing worse than info.
    `report` is the check the verdict was made from."""

    report: ScanReport
    hazards: tuple[Hazard, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def safe(self) -> bool:
        return not self.hazards and self.report.exit_code == 0

    @property
    def exit_code(self) -> int:
        return EXIT_HAZARD if self.hazards else self.report.exit_code

    def to_json(self) -> dict[str, Any]:
        return {
            "before": EVENT,
            "safe": self.safe,
            "hazards": [h.to_json() for h in self.hazards],
            "notes": list(self.notes),
            "check": self.report.to_json(),
        }

    def lines(self) -> list[str]:
        """The text form: the verdict, then one line per hazard and note."""
        if self.safe:
            head = "SAFE to migrate to KRaft: every topic has an id and every replica holds it"
        elif self.hazards:
            head = f"NOT SAFE to migrate to KRaft: {len(self.hazards)} hazard(s)"
        else:
            head = f"NOT SAFE to migrate to KRaft: the check is {self.report.status}"
        body = [f"- {h.kind}: {h.detail}" for h in self.hazards]
        return [head, *body, *(f"note: {n}" for n in self.notes), self.report.summary_line()]


def _bytes(facts: MoveFacts | None, tp: TopicPartition, brokers: Sequence[int]) -> int | None:
    if facts is None:
        return None
    total = 0
    for broker in brokers:
        disks = facts.brokers.get(broker)
        where = disks.replicas.get(tp) if disks is not None else None
        if where is None:
            return None
        total += where[1]
    return total


def _holds(finding: Finding) -> str:
    if finding.kind == FindingKind.METADATA_MISSING:
        return "no partition.metadata"
    if finding.kind == FindingKind.METADATA_CORRUPT:
        return "an unreadable partition.metadata"
    return f"holds {finding.file_topic_id}"


def _stray_detail(
    tp: TopicPartition,
    stray: Mapping[int, Finding],
    holding: Sequence[int],
    size: int | None,
) -> str:
    held = [f"broker {b} ({_holds(f)})" for b, f in sorted(stray.items())]
    survives = (
        f"broker(s) {', '.join(map(str, holding))} hold ZooKeeper's id: the data survives there"
        if holding
        else "no replica holds ZooKeeper's id: the partition's data would be served by none"
        " (only the -stray directories would keep it)"
    )
    size_text = "size not known" if size is None else f"{size} bytes at risk"
    return f"{tp}: the migration would set aside {'; '.join(held)}; {survives}; {size_text}"


def stray_hazards(
    state: ClusterState, findings: Sequence[Finding], facts: MoveFacts | None
) -> list[Hazard]:
    """Per partition, the replicas the migration would set aside as strays."""
    at_risk: dict[TopicPartition, dict[int, Finding]] = defaultdict(dict)
    holding: dict[TopicPartition, set[int]] = defaultdict(set)
    for f in findings:
        if f.topic is None or f.partition is None or f.broker is None:
            continue
        tp = TopicPartition(f.topic, f.partition)
        if f.kind in AT_RISK_KINDS:
            at_risk[tp][f.broker] = f
        elif f.kind == FindingKind.OK and f.zk_topic_id is not None:
            holding[tp].add(f.broker)
    hazards = []
    for tp, stray in sorted(at_risk.items()):
        kept = sorted(holding[tp])
        size = _bytes(facts, tp, sorted(stray))
        hazards.append(
            Hazard(
                kind=HazardKind.STRAY_REPLICAS,
                detail=_stray_detail(tp, stray, kept, size),
                topic=tp.topic,
                partition=tp.partition,
                stray=tuple(sorted(stray)),
                holding_zk_id=tuple(kept),
                bytes_at_risk=size,
            )
        )
    return hazards


def kraft_preflight(state: ClusterState, report: ScanReport, facts: MoveFacts | None) -> Preflight:
    """What a migration to KRaft would do to this cluster now (`report` scanned with its OK
    replicas; `facts`: what the brokers say of the replicas' sizes, None when not asked)."""
    hazards: list[Hazard] = [
        Hazard(HazardKind.MIGRATION_BEGUN, f.detail or "a migration to KRaft has begun")
        for f in report.findings
        if f.kind == FindingKind.KRAFT_MIGRATION
    ]
    hazards += [
        Hazard(
            HazardKind.TOPIC_WITHOUT_ID,
            f"topic {f.topic} has no topic_id in ZooKeeper: the migration would stop on it"
            " (from 3.5 the KRaft controller exits on a fatal fault; on 3.4 it stalls)",
            topic=f.topic,
        )
        for f in sorted(report.findings, key=Finding.sort_key)
        if f.kind == FindingKind.ZK_TOPIC_ID_MISSING
    ]
    hazards += stray_hazards(state, report.findings, facts)
    notes = []
    if facts is None:
        notes.append(
            "bytes at risk not known: cluster.yaml has no kafka section (Kafka's admin API"
            " reports each replica's size)"
        )
    elif facts.problem is not None and any(h.kind == HazardKind.STRAY_REPLICAS for h in hazards):
        notes.append(f"bytes at risk not known: {facts.problem}")
    return Preflight(report=report, hazards=tuple(hazards), notes=tuple(notes))
