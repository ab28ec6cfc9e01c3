"""Running the classification: on Spark (local mode by default, a cluster with a master URL) or
on the embedded DuckDB engine."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from remediate.collect.snapshot import migration_from_json, read_meta
from remediate.errors import ScanError
from remediate.gates import MIGRATION_ADVICE, describe_migration
from remediate.gcpause import gc_paused
from remediate.scan.findings import ScanReport, build_report, unpack_summary
from remediate.scan.kinds import FindingKind
from remediate.scan.session import DEFAULT_MASTER, BackgroundSession, spark_session

ENGINES = ("spark", "duckdb")


@dataclass(frozen=True)
class ScanTimings:
    spark_startup_s: float
    classify_s: float


def _clusters(snapshot_dirs: Sequence[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    metas = [read_meta(d) for d in snapshot_dirs]
    clusters = [str(m["cluster"]) for m in metas]
    if len(set(clusters)) != len(clusters):
        raise ScanError(f"two snapshots of the same cluster in one scan: {sorted(clusters)}")
    return metas, clusters


def _report(
    metas: list[dict[str, Any]],
    clusters: list[str],
    rows: tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]],
    out_dir: Path | None,
) -> ScanReport:
    problems = [f"{m['cluster']}: {p}" for m in metas for p in m.get("problems", [])]
    finding_rows, count_rows, broker_rows = rows
    migrations = [row for meta in metas for row in migration_rows(meta)]
    finding_rows = [*finding_rows, *migrations]
    count_rows = [
        *count_rows,
        *({"cluster": r["cluster"], "broker": None, "kind": r["kind"], "n": 1} for r in migrations),
    ]
    report = build_report(
        finding_rows, count_rows, broker_rows, clusters=clusters, problems=problems
    )
    if out_dir is not None:
        write_results(out_dir, report)
    return report


def migration_rows(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A KRAFT_MIGRATION finding for a snapshot whose cluster has begun a migration to KRaft
    (decided here, from meta.json, by both engines alike)."""
    source = f"{meta['cluster']}: meta.json"
    migration = migration_from_json(meta.get("migration"), source=source)
    kraft_epoch = meta.get("kraft_controller_epoch")
    if kraft_epoch is not None and (
        not isinstance(kraft_epoch, int) or isinstance(kraft_epoch, bool)
    ):
        raise ScanError(f"{source}: kraft_controller_epoch: expected an integer or null")
    seen = describe_migration(
        migration, controller=meta.get("controller"), kraft_controller_epoch=kraft_epoch
    )
    if seen is None:
        return []
    evidence = {
        **({"migration": asdict(migration)} if migration is not None else {}),
        "kraft_controller_epoch": kraft_epoch,
    }
    return [
        {
            "kind": FindingKind.KRAFT_MIGRATION,
            "cluster": meta["cluster"],
            "detail": f"{seen}; {MIGRATION_ADVICE}",
            "evidence": evidence,
        }
    ]


def classify_snapshots(
    spark: object,
    snapshot_dirs: Sequence[Path],
    *,
    out_dir: Path | None = None,
    include_ok: bool = False,
) -> tuple[ScanReport, float]:
    """Classify snapshots with an existing session; returns the report and the seconds taken.

    OK replicas are counted; their rows are collected only with `include_ok` (or `out_dir`,
    whose findings.jsonl lists every finding).
    """
    from remediate.scan.job import classify  # noqa: PLC0415

    metas, clusters = _clusters(snapshot_dirs)
    started = time.monotonic()
    summary, brokers = classify(
        spark,  # type: ignore[arg-type]
        [str(d.resolve()) for d in snapshot_dirs],
        include_ok=include_ok or out_dir is not None,
    )
    with gc_paused():
        finding_rows, count_rows = unpack_summary(
            row.asDict(recursive=True) for row in summary.collect()
        )
        broker_rows = [row.asDict() for row in brokers.collect()]
    elapsed = time.monotonic() - started
    report = _report(metas, clusters, (finding_rows, count_rows, broker_rows), out_dir)
    return report, elapsed


def classify_on_duckdb(
    snapshot_dirs: Sequence[Path], *, out_dir: Path | None = None, include_ok: bool = False
) -> tuple[ScanReport, float]:
    """The same classification on the embedded engine (no JVM); the report and the seconds."""
    from remediate.scan import duck  # noqa: PLC0415

    metas, clusters = _clusters(snapshot_dirs)
    started = time.monotonic()
    with gc_paused():
        rows = duck.classify(
            [d.resolve() for d in snapshot_dirs], include_ok=include_ok or out_dir is not None
        )
    elapsed = time.monotonic() - started
    return _report(metas, clusters, rows, out_dir), elapsed


def write_results(out_dir: Path, report: ScanReport) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "findings.jsonl", "w", encoding="utf-8") as handle:
        for finding in report.findings:
            handle.write(json.dumps(finding.to_json(), separators=(",", ":")) + "\n")
    document = report.to_json()
    document.pop("findings")
    (out_dir / "summary.json").write_text(json.dumps(document, indent=2) + "\n")


def run_scan(
    snapshot_dirs: Sequence[Path],
    *,
    master: str = DEFAULT_MASTER,
    conf: Mapping[str, str] | None = None,
    out_dir: Path | None = None,
    include_ok: bool = False,
    engine: str = "spark",
    session: BackgroundSession | None = None,
) -> tuple[ScanReport, ScanTimings]:
    """Classify on `engine`: "spark" (`session`, already starting, or one started here on
    `master`) or "duckdb". The Spark session is stopped before this returns."""
    if engine == "duckdb":
        report, elapsed = classify_on_duckdb(snapshot_dirs, out_dir=out_dir, include_ok=include_ok)
        return report, ScanTimings(spark_startup_s=0.0, classify_s=elapsed)
    if engine != "spark":
        raise ScanError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    started = time.monotonic()
    session = session or BackgroundSession(master, conf)
    try:
        spark = session.get()
        startup = time.monotonic() - started
        report, elapsed = classify_snapshots(
            spark, snapshot_dirs, out_dir=out_dir, include_ok=include_ok
        )
    finally:
        session.close()
    return report, ScanTimings(spark_startup_s=startup, classify_s=elapsed)


__all__ = [
    "DEFAULT_MASTER",
    "ENGINES",
    "ScanTimings",
    "classify_on_duckdb",
    "classify_snapshots",
    "run_scan",
    "spark_session",
    "write_results",
]
