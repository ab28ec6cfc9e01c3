"""The summary the classification is collected as: counts per (cluster, broker, kind) with the
findings listed, unpacked into the finding and count rows the report is built from."""

from __future__ import annotations

from remediate.scan.findings import build_report, unpack_summary
from remediate.scan.rules import LISTED_COLUMNS, summary_sql


def listed(kind: str, broker: int | None, topic: str | None) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(LISTED_COLUMNS)
    return {**row, "kind": kind, "broker": broker, "topic": topic, "partition": 0}


def test_the_summary_counts_every_kind_and_lists_what_is_not_ok() -> None:
    sql = summary_sql(include_ok=False)
    assert "FILTER (WHERE kind <> 'OK')" in sql
    assert "GROUP BY cluster, broker, kind" in sql
    assert "FILTER" not in summary_sql(include_ok=True)


def test_unpacking_gives_each_finding_its_cluster_and_each_group_its_count() -> None:
    rows: list[dict[str, object]] = [
        {"cluster": "c1", "broker": 1, "kind": "OK", "n": 3, "listed": None},  # DuckDB: NULL
        {"cluster": "c1", "broker": 2, "kind": "OK", "n": 2, "listed": []},  # Spark: []
        {
            "cluster": "c1",
            "broker": 2,
            "kind": "TOPIC_ID_MISMATCH",
            "n": 2,
            "listed": [listed("TOPIC_ID_MISMATCH", 2, "t"), listed("TOPIC_ID_MISMATCH", 2, "u")],
        },
        {
            "cluster": "c2",
            "broker": None,
            "kind": "ZK_TOPIC_ID_MISSING",
            "n": 1,
            "listed": [listed("ZK_TOPIC_ID_MISSING", None, "v")],
        },
    ]
    findings, counts = unpack_summary(rows)
    assert [(f["cluster"], f["broker"], f["topic"]) for f in findings] == [
        ("c1", 2, "t"),
        ("c1", 2, "u"),
        ("c2", None, "v"),
    ]
    assert counts == [{k: r[k] for k in ("cluster", "broker", "kind", "n")} for r in rows]
    brokers = [
        {
            "cluster": "c1",
            "broker": b,
            "is_controller": b == 1,
            "registered": True,
            "reachable": True,
        }
        for b in (1, 2)
    ]
    report = build_report(findings, counts, brokers, clusters=["c1", "c2"])
    assert report.counts() == {"OK": 5, "TOPIC_ID_MISMATCH": 2, "ZK_TOPIC_ID_MISSING": 1}
    assert {b.id: dict(b.counts) for b in report.brokers} == {
        1: {"OK": 3},
        2: {"OK": 2, "TOPIC_ID_MISMATCH": 2},
    }
