"""Collect, then classify: one cluster's state and findings, for every command that needs them.

`scan`, `check`, `plan` and `fix` all read a cluster the same way: a snapshot of ZooKeeper and
every broker's inventory, classified on Spark. The callers only render what this returns.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from remediate.collect.collector import Progress, collect
from remediate.collect.snapshot import BrokerReport
from remediate.config import ClusterConfig
from remediate.scan.findings import ScanReport
from remediate.scan.scanner import DEFAULT_MASTER, run_scan
from remediate.scan.session import BackgroundSession
from remediate.state import ClusterState


@dataclass(frozen=True)
class ClusterScan:
    """What one read of a cluster found: ZooKeeper's state, the brokers' inventories, and the
    findings classified from both."""

    state: ClusterState
    brokers: tuple[BrokerReport, ...]
    report: ScanReport


@contextmanager
def _snapshot_dir(out_dir: Path | None) -> Iterator[Path]:
    """`out_dir/snapshot` when the snapshot is to be kept, else a directory removed after."""
    if out_dir is not None:
        yield out_dir / "snapshot"
        return
    with tempfile.TemporaryDirectory(prefix="remediate-snapshot-") as tmp:
        yield Path(tmp) / "snapshot"


def collect_and_scan(
    config: ClusterConfig,
    *,
    out_dir: Path | None = None,
    master: str | None = None,
    include_ok: bool = False,
    progress: Progress | None = None,
    engine: str = "spark",
) -> ClusterScan:
    """Collect `config`'s cluster and classify it on `engine` ("spark" or "duckdb"); `master`
    overrides cluster.yaml's Spark.

    `progress` hears each stage as it starts and collection's own messages in between.
    With `out_dir`, the snapshot, findings.jsonl and summary.json are kept there.
    """
    # Spark starts, and warms up on a sample, while the cluster is being read; run_scan stops
    # it (close() if collect fails).
    session = (
        BackgroundSession(master or config.spark.master, config.spark.conf, warm=True)
        if engine == "spark"
        else None
    )
    with _snapshot_dir(out_dir) as snapshot:
        if progress is not None:
            progress(f"collecting {config.cluster}")
        try:
            collected = collect(
                config,
                snapshot,
                progress=None if progress is None else (lambda m: progress(f"collecting: {m}")),
            )
        except BaseException:
            if session is not None:
                session.close()
            raise
        if progress is not None:
            progress("classifying on Spark" if engine == "spark" else "classifying")
        report, _ = run_scan(
            [snapshot],
            master=master or config.spark.master,
            conf=config.spark.conf,
            out_dir=out_dir,
            include_ok=include_ok,
            engine=engine,
            session=session,
        )
    return ClusterScan(state=collected.state, brokers=collected.brokers, report=report)


def scan_snapshots(
    snapshots: Sequence[Path],
    *,
    out_dir: Path | None = None,
    master: str | None = None,
    include_ok: bool = False,
    engine: str = "spark",
) -> ScanReport:
    """Classify snapshots collected earlier (one per cluster: a fleet in one scan)."""
    report, _ = run_scan(
        list(snapshots),
        master=master or DEFAULT_MASTER,
        out_dir=out_dir,
        include_ok=include_ok,
        engine=engine,
    )
    return report
