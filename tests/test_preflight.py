"""The KRaft migration preflight's decision (remediate/preflight.py), on plain findings."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from remediate.preflight import HazardKind, kraft_preflight
from remediate.scan.findings import Finding, ScanReport
from remediate.scan.kinds import FindingKind as K
from remediate.state import BrokerDisks, MoveFacts, TopicPartition
from tests.plan.model import NEW, OLD, cluster

STATE = cluster(brokers=[1, 2, 3], topics={"orders": {0: [1, 2, 3], 1: [2, 3, 1]}}, controller=1)


def replica(kind: K, broker: int, partition: int, file_id: str | None = OLD) -> Finding:
    return Finding(
        kind=kind,
        cluster="c",
        broker=broker,
        topic="orders",
        partition=partition,
        file_topic_id=file_id,
        zk_topic_id=NEW,
    )


def healthy(partition: int, brokers: Sequence[int] = (1, 2, 3)) -> list[Finding]:
    return [replica(K.OK, b, partition, NEW) for b in brokers]


def facts(size: int = 100, missing: int | None = None) -> MoveFacts:
    tps = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    return MoveFacts(
        brokers={
            b: BrokerDisks(b, (3, 9), ("/d",), replicas={tp: ("/d", size * b) for tp in tps})
            for b in (1, 2, 3)
            if b != missing
        }
    )


MIGRATION = Finding(kind=K.KRAFT_MIGRATION, cluster="c", detail="a migration has begun: x")
LOST = Finding(kind=K.ZK_TOPIC_ID_MISSING, cluster="c", topic="orders")
UNREACHABLE = Finding(kind=K.BROKER_UNREACHABLE, cluster="c", broker=3)

CASES: list[tuple[str, list[Finding], MoveFacts | None, int, list[tuple[str, object]]]] = [
    ("a healthy cluster", [*healthy(0), *healthy(1)], facts(), 0, []),
    (
        "a topic without an id",
        [LOST, *healthy(0), *healthy(1)],
        facts(),
        2,
        [(HazardKind.TOPIC_WITHOUT_ID, "orders")],
    ),
    (
        "a migration already begun",
        [MIGRATION, *healthy(0), *healthy(1)],
        facts(),
        2,
        [(HazardKind.MIGRATION_BEGUN, None)],
    ),
    (
        "every replica of orders-0 holds the old id: its data would not be served",
        [*(replica(K.TOPIC_ID_MISMATCH, b, 0) for b in (1, 2, 3)), *healthy(1)],
        facts(),
        2,
        [(HazardKind.STRAY_REPLICAS, ((1, 2, 3), (), False, 600))],
    ),
    (
        "one stale replica: the others keep the data",
        [replica(K.TOPIC_ID_MISMATCH_OUT_OF_ISR, 3, 0), *healthy(0, (1, 2)), *healthy(1)],
        facts(),
        2,
        [(HazardKind.STRAY_REPLICAS, ((3,), (1, 2), True, 300))],
    ),
    (
        "a replica without partition.metadata, a size not known",
        [replica(K.METADATA_MISSING, 2, 1, None), *healthy(1, (1, 3)), *healthy(0)],
        facts(missing=2),
        2,
        [(HazardKind.STRAY_REPLICAS, ((2,), (1, 3), True, None))],
    ),
    (
        "nothing found, but a broker not inspected",
        [UNREACHABLE, *healthy(0, (1, 2)), *healthy(1, (1, 2))],
        facts(),
        3,
        [],
    ),
]


@pytest.mark.parametrize(
    ("findings", "disks", "exit_code", "hazards"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_the_preflight_names_each_hazard(
    findings: list[Finding],
    disks: MoveFacts | None,
    exit_code: int,
    hazards: list[tuple[str, object]],
) -> None:
    report = ScanReport(clusters=("c",), findings=tuple(findings), brokers=())
    verdict = kraft_preflight(STATE, report, disks)
    assert verdict.exit_code == exit_code
    assert verdict.safe is (exit_code == 0)
    seen: list[tuple[str, object]] = []
    for h in verdict.hazards:
        if h.kind == HazardKind.STRAY_REPLICAS:
            seen.append((h.kind, (h.stray, h.holding_zk_id, h.data_survives, h.bytes_at_risk)))
        else:
            seen.append((h.kind, h.topic))
    assert seen == hazards
    document = verdict.to_json()
    assert document["before"] == "kraft-migration"
    assert len(document["hazards"]) == len(hazards)
    lines = verdict.lines()
    assert lines[0].startswith("SAFE" if exit_code == 0 else "NOT SAFE")
    assert lines[-1] == report.summary_line()


def test_each_stray_hazard_says_what_survives_and_what_it_costs() -> None:
    findings = [*(replica(K.TOPIC_ID_MISMATCH, b, 0) for b in (1, 2, 3)), *healthy(1)]
    report = ScanReport(clusters=("c",), findings=tuple(findings), brokers=())
    (hazard,) = kraft_preflight(STATE, report, facts()).hazards
    assert hazard.detail == (
        f"orders-0: the migration would set aside broker 1 (holds {OLD}); broker 2 (holds {OLD});"
        f" broker 3 (holds {OLD}); no replica holds ZooKeeper's id: the partition's data would"
        " be served by none (only the -stray directories would keep it); 600 bytes at risk"
    )
    assert hazard.to_json()["data_survives"] is False


@pytest.mark.parametrize(
    ("disks", "note"),
    [
        (None, "bytes at risk not known: cluster.yaml has no kafka section"),
        (MoveFacts(problem="Kafka's admin API did not answer: x"), "did not answer: x"),
    ],
)
def test_sizes_not_known_say_why(disks: MoveFacts | None, note: str) -> None:
    findings = [replica(K.TOPIC_ID_MISMATCH, 1, 0), *healthy(0, (2, 3)), *healthy(1)]
    report = ScanReport(clusters=("c",), findings=tuple(findings), brokers=())
    verdict = kraft_preflight(STATE, report, disks)
    (hazard,) = verdict.hazards
    assert hazard.bytes_at_risk is None and "size not known" in hazard.detail
    assert any(note in n for n in verdict.notes), verdict.notes
