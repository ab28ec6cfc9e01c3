"""The scan's result: findings and per-broker summary, their worst severity, and the JSON and
exit code README.md promises ("Exit codes": 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from remediate.scan.kinds import CHECKED_KINDS, MISMATCH_KINDS, SEVERITY, FindingKind, Severity

# The scan's status, least bad first (UNKNOWN only when nothing CRITICAL was found).
STATUS_ORDER = (Severity.OK, Severity.WARNING, Severity.UNKNOWN, Severity.CRITICAL)
EXIT_CODES = {Severity.OK: 0, Severity.WARNING: 1, Severity.CRITICAL: 2, Severity.UNKNOWN: 3}
# Worst first when sorting findings for people.
SEVERITY_RANK = {
    Severity.CRITICAL: 0,
    Severity.UNKNOWN: 1,
    Severity.WARNING: 2,
    Severity.INFO: 3,
    Severity.OK: 4,
}


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    cluster: str
    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    file_topic_id: str | None = None
    zk_topic_id: str | None = None
    in_isr: bool | None = None
    log_dir: str | None = None
    dir: str | None = None
    detail: str | None = None
    # The facts a finding rests on, by name (LEADER_FENCED_BY_STALE_ID); Spark's rows carry
    # them as a JSON object in a string.
    evidence: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        # Rows from Spark and tests carry the kind as a string; an unknown one is an error.
        object.__setattr__(self, "kind", FindingKind(self.kind))
        if isinstance(self.evidence, str):
            object.__setattr__(self, "evidence", json.loads(self.evidence))

    @property
    def severity(self) -> Severity:
        return SEVERITY[self.kind]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "cluster": self.cluster,
            "broker": self.broker,
            "topic": self.topic,
            "partition": self.partition,
            "file_topic_id": self.file_topic_id,
            "zk_topic_id": self.zk_topic_id,
            "in_isr": self.in_isr,
            "log_dir": self.log_dir,
            "dir": self.dir,
            "detail": self.detail,
            **({"evidence": dict(self.evidence)} if self.evidence is not None else {}),
        }

    def sort_key(self) -> tuple[Any, ...]:
        return (
            SEVERITY_RANK[self.severity],
            self.kind,
            self.cluster,
            self.broker if self.broker is not None else -1,
            self.topic or "",
            self.partition if self.partition is not None else -1,
            self.dir or "",
        )


@dataclass(frozen=True)
class BrokerSummary:
    cluster: str
    id: int
    is_controller: bool
    registered: bool
    reachable: bool
    counts: Mapping[str, int]

    @property
    def needs_fix(self) -> bool:
        return any(self.counts.get(kind, 0) for kind in MISMATCH_KINDS)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "id": self.id,
            "is_controller": self.is_controller,
            "registered": self.registered,
            "reachable": self.reachable,
            "needs_fix": self.needs_fix,
            "counts": dict(sorted(self.counts.items())),
        }


def worst(statuses: Iterable[Severity]) -> Severity:
    result = Severity.OK
    for status in statuses:
        if status in STATUS_ORDER and STATUS_ORDER.index(status) > STATUS_ORDER.index(result):
            result = status
    return result


@dataclass(frozen=True)
class ScanReport:
    """Findings (OK replicas only when asked for) and the counts of every kind."""

    clusters: tuple[str, ...]
    findings: tuple[Finding, ...]
    brokers: tuple[BrokerSummary, ...]
    problems: tuple[str, ...] = field(default_factory=tuple)
    kind_counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def status(self) -> Severity:
        statuses = [
            f.severity for f in self.findings if f.severity not in (Severity.INFO, Severity.OK)
        ]
        if self.problems:
            statuses.append(Severity.UNKNOWN)
        return worst(statuses)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def counts(self) -> Counter[str]:
        return (
            Counter(self.kind_counts)
            if self.kind_counts
            else Counter(f.kind for f in self.findings)
        )

    def to_json(self, *, include_ok: bool = False) -> dict[str, Any]:
        findings = [f for f in self.findings if include_ok or f.kind != FindingKind.OK]
        return {
            "cluster": self.clusters[0] if len(self.clusters) == 1 else list(self.clusters),
            "status": self.status,
            "counts": dict(sorted(self.counts().items())),
            "problems": list(self.problems),
            "findings": [f.to_json() for f in sorted(findings, key=Finding.sort_key)],
            "brokers": [b.to_json() for b in self.brokers],
        }

    def summary_line(self) -> str:
        counts = self.counts()
        shown = [f"{kind}={n}" for kind, n in sorted(counts.items()) if kind != FindingKind.OK]
        replicas = sum(n for kind, n in counts.items() if kind in CHECKED_KINDS)
        text = f"{self.status}: {replicas} replicas checked"
        if shown:
            text += "; " + ", ".join(shown)
        if self.problems:
            text += f"; {len(self.problems)} problem(s) reading the cluster"
        return text


def build_report(
    findings: Sequence[Mapping[str, Any]],
    counts: Sequence[Mapping[str, Any]],
    brokers: Sequence[Mapping[str, Any]],
    *,
    clusters: Sequence[str],
    problems: Sequence[str] = (),
) -> ScanReport:
    """A ScanReport from the rows the Spark job produced: findings (maybe without the OK
    ones), counts per (cluster, broker, kind), and the brokers table."""
    per_broker: dict[tuple[str, int], dict[str, int]] = {}
    totals: Counter[str] = Counter()
    for row in counts:
        totals[row["kind"]] += int(row["n"])
        if row["broker"] is not None:
            per_broker.setdefault((row["cluster"], row["broker"]), {})[row["kind"]] = int(row["n"])
    summaries = [
        BrokerSummary(
            cluster=row["cluster"],
            id=row["broker"],
            is_controller=bool(row["is_controller"]),
            registered=bool(row["registered"]),
            reachable=bool(row["reachable"]),
            counts=per_broker.get((row["cluster"], row["broker"]), {}),
        )
        for row in brokers
    ]
    return ScanReport(
        clusters=tuple(clusters),
        findings=tuple(Finding(**dict(row)) for row in findings),
        brokers=tuple(sorted(summaries, key=lambda b: (b.cluster, b.id))),
        problems=tuple(problems),
        kind_counts=dict(totals),
    )


def unpack_summary(
    rows: Iterable[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(finding rows, count rows) from the summary's rows (rules.summary_sql): each count row
    is (cluster, broker, kind, n), each listed finding gets its group's cluster."""
    findings: list[dict[str, Any]] = []
    counts: list[dict[str, Any]] = []
    for row in rows:
        counts.append({k: row[k] for k in ("cluster", "broker", "kind", "n")})
        findings += [{"cluster": row["cluster"], **listed} for listed in row["listed"] or ()]
    return findings, counts
