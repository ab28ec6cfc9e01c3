"""The single-pass query gives exactly the findings of the rules as first written (one CTE per
rule, tests/scan/reference_rules.py), every OK row included: on every hand-made snapshot of the
classification tests, the stale-leader cases, and many hypothesis-generated snapshots. Both run
on the embedded engine, in this process; tests/scan/test_engines.py holds Spark to DuckDB."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remediate.scan import duck
from remediate.scan.rules import CLASSIFY_SQL, FACTS_SQL
from tests.scan import reference_rules, test_classify, test_stale_leader
from tests.scan.builder import SnapshotBuilder, X, Y
from tests.scan.test_engines import snapshots


def findings(steps: Sequence[str], snapshot_dirs: Sequence[Path]) -> list[str]:
    """The rows of the last of `steps`, each step before it stored as the table `facts`."""
    con = duckdb.connect(":memory:")
    try:
        duck.load_tables(con, snapshot_dirs)
        for step in steps[:-1]:
            con.execute(f"CREATE TABLE facts AS {duck.duckdb_sql(step)}")
        cursor = con.execute(duck.duckdb_sql(steps[-1]))
        names = [column[0] for column in cursor.description or ()]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)


def assert_as_first_written(snapshot_dirs: Sequence[Path]) -> list[str]:
    now = findings([FACTS_SQL, CLASSIFY_SQL], snapshot_dirs)
    assert now == findings([reference_rules.CLASSIFY_SQL], snapshot_dirs)
    return now


CASES: list[tuple[str, Callable[[], SnapshotBuilder]]] = [
    (name, build) for name, build, _expected in test_classify.CASES
]


@pytest.mark.parametrize(("name", "build"), CASES, ids=[c[0] for c in CASES])
def test_hand_made_snapshots(
    tmp_path: Path, name: str, build: Callable[[], SnapshotBuilder]
) -> None:
    assert assert_as_first_written([build().write(tmp_path / "snapshot")]), name


def test_stale_leader_cases_as_one_fleet(tmp_path: Path) -> None:
    dirs = [
        build(f"case{n}").write(tmp_path / f"case{n}")
        for n, (_name, build, _fenced) in enumerate(test_stale_leader.CASES)
    ]
    found = assert_as_first_written(dirs)
    assert any('"LEADER_FENCED_BY_STALE_ID"' in row for row in found)


@st.composite
def odd_snapshots(draw: st.DrawFn) -> SnapshotBuilder:
    """tests/scan/test_engines.py's generated clusters, with the directories the rules must
    tell apart besides replicas: not a partition directory, a bad topic name, directories being
    deleted or moved (of assigned partitions too), stray ones, unreadable files."""
    b = draw(snapshots())
    for _ in range(draw(st.integers(0, 4))):
        before = list(b.tables["replicas"])
        broker = draw(st.sampled_from([1, 2, 3]))
        topic = draw(st.sampled_from(["t0", "t1", "gone"]))
        partition = draw(st.integers(0, 3))
        log_dir = draw(st.sampled_from(["/data/kafka-0", "/data/kafka-1"]))
        kind = draw(st.sampled_from(["other", "problem", "delete", "future", "stray", "live"]))
        if kind == "other":
            b.replica(broker, None, None, dir_name="lost+found", kind="other", log_dir=log_dir)
        elif kind == "problem":
            b.replica(
                broker, "bad name", partition, name_problem="the topic name is odd", log_dir=log_dir
            )
        elif kind in ("delete", "future", "stray"):
            b.replica(
                broker,
                topic,
                partition,
                dir_name=f"{topic}-{partition}.0123456789abcdef0123456789abcdef-{kind}",
                kind=kind,
                file_id=X,
                log_dir=log_dir,
            )
        else:
            b.replica(
                broker,
                topic,
                partition,
                file_id=draw(st.sampled_from([X, Y])),
                state=draw(st.sampled_from(["ok", "unreadable", "missing"])),
                log_dir=log_dir,
                epoch_latest=draw(st.sampled_from([None, 0])),
            )
        # One name once per log dir, as on a disk.
        added = b.tables["replicas"][-1]
        if any(
            (r["broker"], r["log_dir"], r["dir"])
            == (added["broker"], added["log_dir"], added["dir"])
            for r in before
        ):
            b.tables["replicas"] = before
    return b


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(builder=odd_snapshots())
def test_generated_snapshots(tmp_path: Path, builder: SnapshotBuilder) -> None:
    directory = tmp_path / "generated"
    shutil.rmtree(directory, ignore_errors=True)
    assert_as_first_written([builder.write(directory)])


def test_the_reference_is_not_the_query_under_test() -> None:
    # The oracle would prove nothing if it were the same text.
    reference: Any = reference_rules.CLASSIFY_SQL
    assert reference != CLASSIFY_SQL
    assert "FULL OUTER JOIN" in FACTS_SQL and "FULL OUTER JOIN" not in reference
