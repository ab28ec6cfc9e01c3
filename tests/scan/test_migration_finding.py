"""KRAFT_MIGRATION: a cluster whose ZooKeeper shows a migration to KRaft has begun, as both
engines report it from the snapshot's meta.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from remediate.errors import ScanError
from remediate.scan.findings import ScanReport
from remediate.scan.kinds import FindingKind, Severity
from remediate.scan.scanner import classify_on_duckdb, classify_snapshots
from tests.scan.builder import SnapshotBuilder, Y

ENGINES = ("spark", "duckdb")


def migrated_cluster(
    migration: dict[str, Any] | None, kraft_controller_epoch: int | None = None
) -> SnapshotBuilder:
    built = SnapshotBuilder(
        controller=3000 if kraft_controller_epoch is not None else 1,
        migration=migration,
        kraft_controller_epoch=kraft_controller_epoch,
    )
    for broker in (1, 2):
        built.broker(broker)
    built.topic("t", Y, {0: [1, 2]})
    for broker in (1, 2):
        built.replica(broker, "t", 0, file_id=Y)
    return built


def classify(engine: str, spark: Any, snapshot: Path) -> ScanReport:
    if engine == "spark":
        return classify_snapshots(spark, [snapshot])[0]
    return classify_on_duckdb([snapshot])[0]


def fields(
    controller: int = 3000, epoch: int = 1, offset: int = -1, problem: str | None = None
) -> dict[str, Any]:
    return {
        "kraft_controller_id": controller,
        "kraft_controller_epoch": epoch,
        "kraft_metadata_offset": offset,
        "kraft_metadata_epoch": 1 if offset >= 0 else -1,
        "problem": problem,
    }


CASES = [
    ("no migration", None, None, None),
    (
        "controllers started, nothing copied yet",
        fields(),
        None,
        "KRaft controller 3000 (epoch 1) leads a migration whose metadata is not yet copied",
    ),
    (
        "metadata copied into KRaft",
        fields(offset=57),
        4,
        "copied ZooKeeper's metadata into KRaft (KRaft's log at offset 57)",
    ),
    (
        "only the controller znode says so",
        None,
        4,
        "the active controller is KRaft controller 3000 (epoch 4), in migration mode",
    ),
    (
        "a /migration that does not parse",
        {"problem": "/migration: version: expected 0, got 7"},
        None,
        "/migration exists but does not parse (/migration: version: expected 0, got 7)",
    ),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("migration", "kraft_epoch", "detail"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_migration_to_kraft_is_one_finding_per_cluster(
    engine: str,
    spark: Any,
    tmp_path: Path,
    migration: dict[str, Any] | None,
    kraft_epoch: int | None,
    detail: str | None,
) -> None:
    report = classify(engine, spark, migrated_cluster(migration, kraft_epoch).write(tmp_path))
    found = [f for f in report.findings if f.kind == FindingKind.KRAFT_MIGRATION]
    if detail is None:
        assert found == []
        assert report.status == Severity.OK
        return
    (finding,) = found
    assert finding.cluster == "c1"
    assert finding.broker is None and finding.topic is None
    assert finding.detail is not None and detail in finding.detail
    assert "a repair now could lose data" in finding.detail
    assert finding.evidence is not None
    assert finding.evidence["kraft_controller_epoch"] == kraft_epoch
    assert finding.evidence.get("migration") == (
        None if migration is None else {**dict.fromkeys(fields()), **migration}
    )
    assert report.status == Severity.WARNING and report.exit_code == 1
    assert report.counts()[FindingKind.KRAFT_MIGRATION] == 1
    assert report.to_json()["findings"][0]["kind"] == "KRAFT_MIGRATION"


@pytest.mark.parametrize(
    ("meta_fields", "message"),
    [
        ({"migration": [1]}, "migration: expected a JSON object or null"),
        ({"migration": {"kraft_controller_id": "3000"}}, "migration.kraft_controller_id"),
        ({"migration": {"zk_version": 3}}, "unknown field 'zk_version'"),
        ({"migration": {"problem": 5}}, "migration.problem"),
        ({"migration": None, "kraft_controller_epoch": "1"}, "kraft_controller_epoch"),
    ],
)
def test_a_malformed_migration_in_meta_json_is_a_scan_error_naming_the_field(
    tmp_path: Path, meta_fields: dict[str, Any], message: str
) -> None:
    snapshot = migrated_cluster(None).write(tmp_path)
    meta = json.loads((snapshot / "meta.json").read_text())
    (snapshot / "meta.json").write_text(json.dumps({**meta, **meta_fields}))
    with pytest.raises(ScanError, match=r"c1: meta\.json") as raised:
        classify_on_duckdb([snapshot])
    assert message in str(raised.value)
