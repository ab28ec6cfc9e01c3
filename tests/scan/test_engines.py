"""The two engines give identical findings: the rules' Spark SQL run on Spark, and the same
query transpiled to DuckDB (remediate/scan/duck.py), on every hand-made snapshot of the
classification tests and on hypothesis-generated ones. The sandbox's own snapshots are compared
in tests/scan/test_scan_sandbox.py (`scan_sandbox`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remediate.errors import ScanError
from remediate.scan.duck import duckdb_sql
from remediate.scan.findings import ScanReport
from remediate.scan.rules import CLASSIFY_SQL
from remediate.scan.scanner import classify_on_duckdb, classify_snapshots
from tests.scan import test_classify, test_stale_leader
from tests.scan.builder import SnapshotBuilder, X, Y

Z = "AAAAAAAAAAAAAAAAAAAAAw"  # a third id


def canonical(report: ScanReport) -> dict[str, Any]:
    """The report's JSON with every finding, in an order that does not depend on the engine."""
    document = report.to_json(include_ok=True)
    document["findings"] = sorted(document["findings"], key=lambda f: json.dumps(f, sort_keys=True))
    return document


def assert_same(spark: Any, snapshots: list[Path]) -> ScanReport:
    on_spark, _ = classify_snapshots(spark, snapshots, include_ok=True)
    on_duckdb, _ = classify_on_duckdb(snapshots, include_ok=True)
    assert canonical(on_duckdb) == canonical(on_spark)
    return on_duckdb


BUILDERS: list[tuple[str, Callable[[], SnapshotBuilder]]] = [
    (name, build) for name, build, _expected in test_classify.CASES
]


@pytest.mark.parametrize(("name", "build"), BUILDERS, ids=[b[0] for b in BUILDERS])
def test_both_engines_agree_on_the_hand_made_snapshots(
    spark: Any, tmp_path: Path, name: str, build: Callable[[], SnapshotBuilder]
) -> None:
    report = assert_same(spark, [build().write(tmp_path / "snapshot")])
    assert report.findings, name


def test_both_engines_agree_on_the_stale_leader_rule_with_its_evidence(
    spark: Any, tmp_path: Path
) -> None:
    """Every case of tests/scan/test_stale_leader.py, as one fleet (a cluster per case)."""
    dirs = [
        build(f"case{n}").write(tmp_path / f"case{n}")
        for n, (_name, build, _fenced) in enumerate(test_stale_leader.CASES)
    ]
    report = assert_same(spark, dirs)
    assert [f.evidence for f in report.findings if f.evidence]


def test_both_engines_agree_on_a_fleet_of_two_clusters(spark: Any, tmp_path: Path) -> None:
    first = test_classify.mismatched().write(tmp_path / "one")
    second = SnapshotBuilder(cluster="c2")
    second.broker(1)
    second.topic("t", None, {0: [1]})
    second.replica(1, "t", 0, file_id=X)
    report = assert_same(spark, [first, second.write(tmp_path / "two")])
    assert set(report.clusters) == {"c1", "c2"}


def test_the_transpiled_query_keeps_null_fields_in_the_evidence() -> None:
    """Spark's to_json needs ignoreNullFields=false; DuckDB takes no options and keeps nulls."""
    assert "ignoreNullFields" in CLASSIFY_SQL
    assert "ignoreNullFields" not in duckdb_sql(CLASSIFY_SQL)


def test_a_malformed_table_is_a_scan_error_naming_the_snapshot(tmp_path: Path) -> None:
    snapshot = test_classify.healthy().write(tmp_path / "snapshot")
    (snapshot / "states.jsonl").write_text('{"cluster": "c1", "topic": ')
    with pytest.raises(ScanError, match="snapshot"):
        classify_on_duckdb([snapshot])


# -- hypothesis: snapshots built from arbitrary facts --------------------------------------------

IDS = st.sampled_from([X, Y, Z])
BROKERS = (1, 2, 3)


@st.composite
def snapshots(draw: st.DrawFn) -> SnapshotBuilder:
    """A small cluster with every kind of fact the rules read, in arbitrary combinations."""
    b = SnapshotBuilder(controller=draw(st.sampled_from([None, *BROKERS])))
    for broker in BROKERS:
        reachable = draw(st.booleans() | st.just(True))
        b.broker(
            broker,
            reachable=reachable,
            registered=draw(st.booleans() | st.just(True)),
            broker_epoch=draw(st.sampled_from([None, 50, 150])),
            state_change_log=draw(st.sampled_from([None, "logs/state-change.log"])),
        )
        if draw(st.booleans()):
            b._row(
                "log_dirs",
                broker=broker,
                log_dir=draw(st.sampled_from(["/data/kafka-0", "/data/kafka-1"])),
                state=draw(st.sampled_from(["present", "missing", "unreadable"])),
            )
    for t in range(draw(st.integers(1, 3))):
        topic = f"t{t}"
        partitions = draw(st.integers(1, 3))
        assignment = {
            p: draw(st.permutations(BROKERS).map(lambda r: list(r[: draw(st.integers(1, 3))])))
            for p in range(partitions)
        }
        b.topic(
            topic,
            draw(st.one_of(st.none(), IDS)),
            assignment,
            leaders={p: draw(st.sampled_from([-1, *r])) for p, r in assignment.items()},
            isr={p: draw(st.lists(st.sampled_from(r), unique=True)) for p, r in assignment.items()},
            leader_epochs={p: draw(st.integers(0, 3)) for p in assignment},
            topic_mzxid=draw(st.sampled_from([None, 100])),
            state_mzxid=draw(st.sampled_from([None, 90, 110])),
        )
        for p, replicas in assignment.items():
            for broker in replicas:
                if draw(st.integers(0, 5)) == 0:
                    continue  # no directory
                for log_dir in draw(
                    st.sampled_from([["/data/kafka-0"], ["/data/kafka-1", "/data/kafka-0"]])
                ):
                    b.replica(
                        broker,
                        topic,
                        p,
                        file_id=draw(IDS),
                        state=draw(st.sampled_from(["ok", "ok", "missing", "corrupt"])),
                        log_dir=log_dir,
                        epoch_latest=draw(st.sampled_from([None, 0, 2])),
                    )
                if draw(st.integers(0, 3)) == 0:
                    b.rejection(broker, topic, p, draw(IDS), draw(IDS), "2026-11-24 01:02:03")
    if draw(st.booleans()):
        b.replica(draw(st.sampled_from(BROKERS)), "gone", 0, file_id=X)
    if draw(st.booleans()):
        b.replica(1, "t0", 9, dir_name="t0-9.0123456789abcdef0123456789abcdef-stray", kind="stray")
    return b


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(builder=snapshots())
def test_both_engines_agree_on_generated_snapshots(
    spark: Any, tmp_path: Path, builder: SnapshotBuilder
) -> None:
    directory = tmp_path / "generated"
    shutil.rmtree(directory, ignore_errors=True)
    assert_same(spark, [builder.write(directory)])
