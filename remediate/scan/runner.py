"""Running the classification on Spark: local mode by default, a cluster with a master URL."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from remediate.collect.snapshot import read_meta
from remediate.errors import ScanError
from remediate.gcpause import gc_paused
from remediate.scan.kinds import FindingKind
from remediate.scan.report import ScanReport, build_report

DEFAULT_MASTER = "local[*]"


@dataclass(frozen=True)
class ScanTimings:
    spark_startup_s: float
    classify_s: float


def spark_session(master: str = DEFAULT_MASTER, conf: Mapping[str, str] | None = None) -> object:
    """A SparkSession for the scan; quiet, no UI, few shuffle partitions for small inputs."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Quiet Spark (errors only, on stderr) and keep it on loopback.
    os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).parent / "sparkconf"))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession  # noqa: PLC0415 - Spark is only needed when scanning

    builder = (
        SparkSession.builder.master(master)
        .appName("remediate-scan")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


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

    metas = [read_meta(d) for d in snapshot_dirs]
    clusters = [str(m["cluster"]) for m in metas]
    if len(set(clusters)) != len(clusters):
        raise ScanError(f"two snapshots of the same cluster in one scan: {sorted(clusters)}")
    started = time.monotonic()
    findings, counts, brokers = classify(spark, [str(d.resolve()) for d in snapshot_dirs])  # type: ignore[arg-type]
    wanted = (
        findings
        if include_ok or out_dir is not None
        else findings.filter(f"kind <> '{FindingKind.OK}'")
    )
    with gc_paused():
        finding_rows = [row.asDict() for row in wanted.collect()]
        count_rows = [row.asDict() for row in counts.collect()]
        broker_rows = [row.asDict() for row in brokers.collect()]
    findings.unpersist()
    elapsed = time.monotonic() - started
    problems = [f"{m['cluster']}: {p}" for m in metas for p in m.get("problems", [])]
    report = build_report(
        finding_rows, count_rows, broker_rows, clusters=clusters, problems=problems
    )
    if out_dir is not None:
        write_results(out_dir, report)
    return report, elapsed


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
) -> tuple[ScanReport, ScanTimings]:
    started = time.monotonic()
    spark = spark_session(master, conf)
    startup = time.monotonic() - started
    try:
        report, elapsed = classify_snapshots(
            spark, snapshot_dirs, out_dir=out_dir, include_ok=include_ok
        )
    finally:
        spark.stop()  # type: ignore[attr-defined]
    return report, ScanTimings(spark_startup_s=startup, classify_s=elapsed)
