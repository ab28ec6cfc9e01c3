"""The Spark classification, table-driven on small hand-made snapshots (real local Spark)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remediate.scan.findings import ScanReport
from remediate.scan.scanner import classify_snapshots
from tests.scan.builder import SnapshotBuilder, X, Y

Key = tuple[str, int | None, str | None, int | None]


def replicas_all(
    builder: SnapshotBuilder, topic: str, assignment: dict[int, list[int]], file_id: str
) -> None:
    for partition, brokers in assignment.items():
        for broker in brokers:
            builder.replica(broker, topic, partition, file_id=file_id)


def healthy() -> SnapshotBuilder:
    b = SnapshotBuilder(controller=3)
    for broker in (1, 2, 3):
        b.broker(broker)
    b.topic("orders", Y, {0: [1, 2, 3], 1: [2, 3, 1]})
    replicas_all(b, "orders", {0: [1, 2, 3], 1: [2, 3, 1]}, Y)
    return b


def mismatched() -> SnapshotBuilder:
    b = SnapshotBuilder(controller=3)
    for broker in (1, 2, 3):
        b.broker(broker)
    b.topic("orders", Y, {0: [1, 2, 3], 1: [2, 3, 1]}, isr={0: [2, 3], 1: [2, 3]})
    replicas_all(b, "orders", {0: [1, 2, 3], 1: [2, 3, 1]}, X)
    return b


def missing_and_corrupt() -> SnapshotBuilder:
    b = SnapshotBuilder()
    b.broker(1).broker(2)
    b.topic("t", Y, {0: [1, 2], 1: [1, 2], 2: [1, 2]})
    b.replica(1, "t", 0, state="missing").replica(2, "t", 0, file_id=Y)
    b.replica(1, "t", 1, state="corrupt").replica(2, "t", 1, state="unreadable")
    b.replica(2, "t", 2, file_id=Y)  # broker 1 has no directory for t-2
    return b


def zk_id_missing() -> SnapshotBuilder:
    b = SnapshotBuilder()
    b.broker(1).broker(2)
    b.topic("legacy", None, {0: [1, 2]})
    b.replica(1, "legacy", 0, file_id=X).replica(2, "legacy", 0, file_id=X)
    return b


def orphans_and_odd_dirs() -> SnapshotBuilder:
    b = SnapshotBuilder()
    b.broker(1).broker(2)
    b.topic("t", Y, {0: [1]})
    b.replica(1, "t", 0, file_id=Y)
    b.replica(2, "t", 0, file_id=Y)  # left behind after a reassignment
    b.replica(1, "gone", 3, file_id=X)  # topic deleted from ZooKeeper
    b.replica(
        1, None, None, state="missing", dir_name="lost+found", kind="other", name_problem="no '-'"
    )
    b.replica(1, "t", 0, dir_name="t-0.0123456789abcdef0123456789abcdef-delete", kind="delete")
    b.replica(1, "t", 0, dir_name="t-0.0123456789abcdef0123456789abcdef-future", kind="future")
    b.replica(2, "t", 7, dir_name="t-7.0123456789abcdef0123456789abcdef-stray", kind="stray")
    return b


def unreachable_and_offline() -> SnapshotBuilder:
    b = SnapshotBuilder(controller=1)
    b.broker(1).broker(2, reachable=False, registered=False)
    b.topic("t", Y, {0: [1, 2], 1: [2, 1]}, leaders={1: -1}, isr={1: [2]})
    b.replica(1, "t", 0, file_id=Y).replica(1, "t", 1, file_id=Y)
    return b


def duplicate_copies() -> SnapshotBuilder:
    b = SnapshotBuilder()
    b.broker(1)
    b.topic("t", Y, {0: [1]})
    b.replica(1, "t", 0, file_id=X, log_dir="/data/a")
    b.replica(1, "t", 0, file_id=Y, log_dir="/data/b")
    return b


CASES: list[tuple[str, Callable[[], SnapshotBuilder], set[Key]]] = [
    (
        "healthy",
        healthy,
        {("OK", b, "orders", p) for p in (0, 1) for b in (1, 2, 3)},
    ),
    (
        "mismatch in and out of isr",
        mismatched,
        {("TOPIC_ID_MISMATCH", b, "orders", p) for p in (0, 1) for b in (2, 3)}
        | {("TOPIC_ID_MISMATCH_OUT_OF_ISR", 1, "orders", p) for p in (0, 1)},
    ),
    (
        "missing, corrupt, unreadable and absent directories",
        missing_and_corrupt,
        {
            ("METADATA_MISSING", 1, "t", 0),
            ("OK", 2, "t", 0),
            ("METADATA_CORRUPT", 1, "t", 1),
            ("METADATA_CORRUPT", 2, "t", 1),
            ("REPLICA_DIR_MISSING", 1, "t", 2),
            ("OK", 2, "t", 2),
        },
    ),
    (
        "zookeeper lost the id",
        zk_id_missing,
        {
            ("ZK_TOPIC_ID_MISSING", None, "legacy", None),
            ("OK", 1, "legacy", 0),
            ("OK", 2, "legacy", 0),
        },
    ),
    (
        "orphans and directories that are not partitions",
        orphans_and_odd_dirs,
        {
            ("OK", 1, "t", 0),
            ("ORPHAN_DIR", 2, "t", 0),
            ("ORPHAN_DIR", 1, "gone", 3),
            ("ORPHAN_DIR", 1, None, None),
            ("ORPHAN_DIR", 2, "t", 7),
        },
    ),
    (
        "unreachable broker and offline partition",
        unreachable_and_offline,
        {
            ("BROKER_UNREACHABLE", 2, None, None),
            ("PARTITION_OFFLINE", None, "t", 1),
            ("OK", 1, "t", 0),
            ("OK", 1, "t", 1),
        },
    ),
    (
        "two copies of one replica: the first log dir counts",
        duplicate_copies,
        {("TOPIC_ID_MISMATCH", 1, "t", 0)},
    ),
]


def keys(report: ScanReport) -> set[Key]:
    return {(f.kind, f.broker, f.topic, f.partition) for f in report.findings}


@pytest.mark.parametrize(("name", "build", "expected"), CASES, ids=[c[0] for c in CASES])
def test_classification(
    spark: Any, tmp_path: Path, name: str, build: Callable[[], SnapshotBuilder], expected: set[Key]
) -> None:
    snapshot = build().write(tmp_path / "snapshot")
    report, _ = classify_snapshots(spark, [snapshot], include_ok=True)
    assert keys(report) == expected
    assert len(report.findings) == len(expected), (
        "one finding per replica, topic, partition or broker"
    )


def test_findings_carry_both_ids_and_isr_membership(spark: Any, tmp_path: Path) -> None:
    report, _ = classify_snapshots(spark, [mismatched().write(tmp_path / "s")], include_ok=True)
    # Every replica of both partitions, the one out of each ISR included: a classification
    # that found nothing would prove nothing here.
    assert {(f.broker, f.partition) for f in report.findings} == {
        (b, p) for p in (0, 1) for b in (1, 2, 3)
    }
    for finding in report.findings:
        assert (finding.file_topic_id, finding.zk_topic_id) == (X, Y)
        assert finding.in_isr is (finding.kind == "TOPIC_ID_MISMATCH")
        assert (finding.log_dir, finding.dir) == ("/data/kafka-0", f"orders-{finding.partition}")


def test_orphan_details_say_why(spark: Any, tmp_path: Path) -> None:
    report, _ = classify_snapshots(
        spark, [orphans_and_odd_dirs().write(tmp_path / "s")], include_ok=True
    )
    details = {(f.broker, f.dir): f.detail for f in report.findings if f.kind == "ORPHAN_DIR"}
    assert details == {
        (2, "t-0"): "partition not assigned to this broker",
        (1, "gone-3"): "topic does not exist in ZooKeeper",
        (1, "lost+found"): "not a partition directory: no '-'",
        (2, "t-7.0123456789abcdef0123456789abcdef-stray"): "marked stray by the broker",
    }


def test_broker_summary(spark: Any, tmp_path: Path) -> None:
    report, _ = classify_snapshots(spark, [mismatched().write(tmp_path / "s")], include_ok=True)
    summary = {b.id: b for b in report.brokers}
    assert set(summary) == {1, 2, 3}
    assert [summary[b].is_controller for b in (1, 2, 3)] == [False, False, True]
    assert all(summary[b].needs_fix for b in (1, 2, 3))
    assert dict(summary[1].counts) == {"TOPIC_ID_MISMATCH_OUT_OF_ISR": 2}
    assert dict(summary[2].counts) == {"TOPIC_ID_MISMATCH": 2}

    healthy_report, _ = classify_snapshots(
        spark, [healthy().write(tmp_path / "h")], include_ok=True
    )
    assert not any(b.needs_fix for b in healthy_report.brokers)
    assert all(dict(b.counts) == {"OK": 2} for b in healthy_report.brokers)


@pytest.mark.parametrize(
    ("build", "status", "exit_code"),
    [
        (healthy, "OK", 0),
        (zk_id_missing, "WARNING", 1),
        (mismatched, "CRITICAL", 2),
        (unreachable_and_offline, "CRITICAL", 2),
    ],
    ids=["healthy", "zk-id-missing", "out-of-isr", "offline"],
)
def test_status_and_exit_code(
    spark: Any, tmp_path: Path, build: Callable[[], SnapshotBuilder], status: str, exit_code: int
) -> None:
    report, _ = classify_snapshots(spark, [build().write(tmp_path / "s")], include_ok=True)
    assert (report.status, report.exit_code) == (status, exit_code)


def test_a_fleet_is_classified_per_cluster(spark: Any, tmp_path: Path) -> None:
    first = mismatched()
    second = healthy()
    second.cluster = "c2"
    for rows in second.tables.values():
        for row in rows:
            row["cluster"] = "c2"
    report, _ = classify_snapshots(
        spark, [first.write(tmp_path / "a"), second.write(tmp_path / "b")], include_ok=True
    )
    assert report.clusters == ("c1", "c2")
    by_cluster = {c: {f.kind for f in report.findings if f.cluster == c} for c in ("c1", "c2")}
    assert by_cluster == {"c1": {"TOPIC_ID_MISMATCH", "TOPIC_ID_MISMATCH_OUT_OF_ISR"}, "c2": {"OK"}}
    assert len(report.brokers) == 6
    assert report.to_json()["cluster"] == ["c1", "c2"]


def test_ok_replicas_are_counted_but_not_listed_unless_asked(spark: Any, tmp_path: Path) -> None:
    report, _ = classify_snapshots(spark, [missing_and_corrupt().write(tmp_path / "s")])
    assert {f.kind for f in report.findings} == {
        "METADATA_MISSING",
        "METADATA_CORRUPT",
        "REPLICA_DIR_MISSING",
    }
    assert report.counts()["OK"] == 2
    assert {b.id: b.counts.get("OK", 0) for b in report.brokers} == {1: 0, 2: 2}
    assert report.summary_line().startswith("CRITICAL: 6 replicas checked")


def _lost(*, second: dict[str, Any], reachable: bool = True) -> Callable[[], SnapshotBuilder]:
    def build() -> SnapshotBuilder:
        b = SnapshotBuilder()
        b.broker(1).broker(2, reachable=reachable)
        b.topic("legacy", None, {0: [1, 2], 1: [2, 1]})
        b.replica(1, "legacy", 0, file_id=X).replica(1, "legacy", 1, file_id=X)
        if reachable:
            b.replica(2, "legacy", 0, file_id=X).replica(2, "legacy", 1, **second)
        return b

    return build


@pytest.mark.parametrize(
    ("build", "agreed", "detail"),
    [
        (_lost(second={"file_id": X}), X, f"all 4 replicas agree on {X}, which can be restored"),
        (
            _lost(second={"file_id": Y}),
            None,
            "no automatic restore: the replicas disagree (2 different ids)",
        ),
        (
            _lost(second={"state": "missing"}),
            X,
            f"3 replica(s) agree on {X} and 1 have no partition.metadata yet; it can be restored",
        ),
        (
            _lost(second={"state": "corrupt"}),
            None,
            "no automatic restore: 1 of 4 replica(s) have an unreadable partition.metadata"
            " or no directory",
        ),
        (
            _lost(second={}, reachable=False),
            None,
            "no automatic restore: 2 replica(s) are on brokers that could not be inspected",
        ),
    ],
    ids=["agree", "disagree", "no-file", "corrupt", "unreachable"],
)
def test_a_lost_id_reports_what_the_replicas_agree_on(
    spark: Any,
    tmp_path: Path,
    build: Callable[[], SnapshotBuilder],
    agreed: str | None,
    detail: str,
) -> None:
    report, _ = classify_snapshots(spark, [build().write(tmp_path / "s")], include_ok=True)
    (lost,) = [f for f in report.findings if f.kind == "ZK_TOPIC_ID_MISSING"]
    assert lost.file_topic_id == agreed
    assert lost.detail is not None and lost.detail.endswith(detail), lost.detail
    assert lost.detail.startswith("topic znode version ")
