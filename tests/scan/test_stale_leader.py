"""LEADER_FENCED_BY_STALE_ID, table-driven: each case is one cluster of a fleet, classified in
one Spark pass (real local Spark). Leader = broker 1 unless a case says otherwise."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remediate.scan.findings import EXIT_CODES, ScanReport
from remediate.scan.kinds import FindingKind, Severity
from remediate.scan.scanner import classify_snapshots
from tests.scan.builder import SnapshotBuilder, X, Y

FENCED = FindingKind.LEADER_FENCED_BY_STALE_ID


def partition(
    *,
    zk_id: str | None = Y,
    leader: int = 1,
    zk_epoch: int = 5,
    leader_file: str | None = X,
    leader_state: str = "ok",
    leader_epoch_latest: int | None = 4,
    leader_reachable: bool = True,
    with_line: bool = True,
) -> Callable[[str], SnapshotBuilder]:
    """One partition t-0 on brokers 1, 2, 3; broker 2 and 3 hold ZooKeeper's id at its epoch."""

    def build(cluster: str) -> SnapshotBuilder:
        b = SnapshotBuilder(cluster=cluster, controller=3)
        b.broker(1, reachable=leader_reachable, broker_epoch=150, state_change_log="read")
        b.broker(2, broker_epoch=400).broker(3, broker_epoch=410)
        b.topic(
            "t",
            zk_id,
            {0: [1, 2, 3]},
            leaders={0: leader},
            isr={0: [1, 3]},
            leader_epochs={0: zk_epoch},
            topic_mzxid=200,
            state_mzxid=300,
        )
        if leader_reachable:
            b.replica(
                1, "t", 0, file_id=leader_file, state=leader_state, epoch_latest=leader_epoch_latest
            )
        b.replica(2, "t", 0, file_id=X, epoch_latest=2)  # a stale follower: never this kind
        b.replica(3, "t", 0, file_id=Y, epoch_latest=zk_epoch)
        if with_line:
            b.rejection(1, "t", 0, X, Y, "2026-11-23 20:40:01,123")
            b.rejection(1, "t", 0, X, Y, "2026-11-23 20:41:07,001")
            b.rejection(1, "t", 0, X, "AAAAAAAAAAAAAAAAAAAAAw", "2026-11-23 20:00:00,000")
        return b

    return build


CASES: list[tuple[str, Callable[[str], SnapshotBuilder], bool]] = [
    ("leader holds X and is behind ZooKeeper's epoch", partition(), True),
    ("the same without its log's lines", partition(with_line=False), True),
    (
        "leader took the current epoch (2.8 restart loophole)",
        partition(leader_epoch_latest=5),
        False,
    ),
    ("leader holds ZooKeeper's id: an ordinary lag", partition(leader_file=Y), False),
    ("leader's checkpoint has no entry: not judged", partition(leader_epoch_latest=None), False),
    ("leader has no partition.metadata", partition(leader_state="missing"), False),
    ("no leader", partition(leader=-1), False),
    ("ZooKeeper has no id", partition(zk_id=None), False),
    ("leader not inspected", partition(leader_reachable=False), False),
    ("leader 3 holds ZooKeeper's id", partition(leader=3), False),
]


@pytest.fixture(scope="module")
def fleet(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> ScanReport:
    root = tmp_path_factory.mktemp("fleet")
    dirs = [build(f"case{n}").write(root / f"case{n}") for n, (_, build, _) in enumerate(CASES)]
    report, _ = classify_snapshots(spark, dirs, include_ok=True)
    return report


@pytest.mark.parametrize(
    ("n", "name", "fenced"),
    [(n, c[0], c[2]) for n, c in enumerate(CASES)],
    ids=[c[0] for c in CASES],
)
def test_rule(fleet: ScanReport, n: int, name: str, fenced: bool) -> None:
    found = [f for f in fleet.findings if f.cluster == f"case{n}" and f.kind == FENCED]
    if not fenced:
        assert found == []
        return
    assert [(f.broker, f.topic, f.partition) for f in found] == [(1, "t", 0)]
    assert found[0].severity == "CRITICAL"
    assert (found[0].file_topic_id, found[0].zk_topic_id, found[0].in_isr) == (X, Y, True)


def test_evidence(fleet: ScanReport) -> None:
    (finding,) = [f for f in fleet.findings if f.cluster == "case0" and f.kind == FENCED]
    assert finding.evidence == {
        "leader_file_topic_id": X,
        "zk_topic_id": Y,
        "zk_leader_epoch": 5,
        "leader_epoch_latest": 4,
        "leader_broker_epoch": 150,
        "topic_mzxid": 200,
        "state_mzxid": 300,
        "restarted_since_topic_write": False,
        "state_changed_since_topic_write": True,
        "state_change_log": "read",
        "rejection_lines": 2,
        "rejection_memory_topic_id": X,
        "rejection_last_logged_at": "2026-11-23 20:41:07,001",
    }
    assert finding.detail is not None and "2 rejection line(s)" in finding.detail
    document = finding.to_json()
    assert document["evidence"] == finding.evidence
    (quiet,) = [f for f in fleet.findings if f.cluster == "case1" and f.kind == FENCED]
    assert quiet.evidence is not None and quiet.evidence["rejection_lines"] == 0
    assert quiet.evidence["rejection_last_logged_at"] is None  # every field, null or not


def test_a_fenced_leader_makes_the_cluster_critical(fleet: ScanReport) -> None:
    assert EXIT_CODES[Severity.CRITICAL] == 2
    assert fleet.status == "CRITICAL"
    others = [f for f in fleet.findings if f.kind != FindingKind.OK and f.cluster == "case0"]
    assert {(f.kind, f.broker) for f in others} == {
        (FENCED, 1),
        (FindingKind.TOPIC_ID_MISMATCH, 1),
        (FindingKind.TOPIC_ID_MISMATCH_OUT_OF_ISR, 2),
    }


def test_an_old_snapshot_without_rejections_is_read(spark: Any, tmp_path: Path) -> None:
    directory = partition(with_line=False)("old").write(tmp_path / "old")
    (directory / "rejections.jsonl").unlink()
    report, _ = classify_snapshots(spark, [directory], include_ok=False)
    assert [f.kind for f in report.findings if f.kind == FENCED] == [FENCED]
