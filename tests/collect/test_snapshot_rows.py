"""The replicas table's rows: typed in the code, the same JSON Lines on disk."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from remediate.collect.snapshot import (
    BROKER_TABLES,
    STATE_TABLES,
    TABLES,
    BrokerReport,
    ReplicaRow,
    read_meta,
    read_rows,
    write_snapshot,
    write_state_tables,
)
from remediate.errors import ScanError
from remediate.state import TopicPartition
from tests.plan.model import cluster

ROW = ReplicaRow(
    log_dir="/data/kafka",
    dir="orders-0",
    dir_hex="6f72646572732d30",
    topic="orders",
    partition=0,
    dir_kind="live",
    name_problem=None,
    metadata_state="ok",
    file_topic_id="AAAAAAAAAAAAAAAAAAAAAQ",
    metadata_problem=None,
    epoch_latest=7,
)


def test_a_row_is_written_with_its_cluster_and_broker_first_and_read_back(tmp_path: Path) -> None:
    state = cluster(brokers=[1, 2, 3], topics={"orders": {0: [1, 2, 3]}}, controller=1)
    report = BrokerReport(1, "kafka1", configured=True, reachable=True, error=None, replicas=(ROW,))
    write_snapshot(tmp_path, cluster="c", state=state, brokers=[report])
    line = (tmp_path / "replicas.jsonl").read_text()
    assert line == (
        '{"cluster":"c","broker":1,"log_dir":"/data/kafka","dir":"orders-0",'
        '"dir_hex":"6f72646572732d30","topic":"orders","partition":0,"dir_kind":"live",'
        '"name_problem":null,"metadata_state":"ok","file_topic_id":"AAAAAAAAAAAAAAAAAAAAAQ",'
        '"metadata_problem":null,"epoch_latest":7}\n'
    )
    (row,) = read_rows(tmp_path, "replicas")
    assert ReplicaRow.from_json(row) == ROW
    assert json.dumps(ROW.to_json()) == json.dumps(
        {k: v for k, v in row.items() if k not in ("cluster", "broker")}
    )


def test_zxids_and_rejections_reach_their_tables(tmp_path: Path) -> None:
    orders_0 = TopicPartition("orders", 0)
    state = cluster(brokers=[1, 2], topics={"orders": {0: [1, 2]}})
    state = replace(
        state,
        topics={"orders": replace(state.topics["orders"], mzxid=40)},
        partitions={orders_0: replace(state.partitions[orders_0], mzxid=55)},
    )
    rejection = {
        "topic": "orders",
        "partition": 0,
        "memory_topic_id": "AAAAAAAAAAAAAAAAAAAAAQ",
        "request_topic_id": "AAAAAAAAAAAAAAAAAAAAAg",
        "logged_at": "2026-11-23 20:40:01,123",
        "wording": "2.8",
    }
    reports = [
        BrokerReport(1, "h1", True, True, None, state_change_log="read", rejections=(rejection,)),
        BrokerReport(2, "h2", True, True, None, state_change_log="missing"),
    ]
    directory = write_snapshot(tmp_path / "snap", cluster="c", state=state, brokers=reports)
    assert [r["topic_mzxid"] for r in read_rows(directory, "topics")] == [40]
    assert {r["topic_mzxid"] for r in read_rows(directory, "assignments")} == {40}
    assert [r["mzxid"] for r in read_rows(directory, "states")] == [55]
    brokers = list(read_rows(directory, "brokers"))
    assert [(b["broker"], b["state_change_log"]) for b in brokers] == [(1, "read"), (2, "missing")]
    assert list(read_rows(directory, "rejections")) == [{"cluster": "c", "broker": 1, **rejection}]
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["counts"]["rejections"] == 1


def test_a_snapshot_written_in_two_parts_is_the_one_written_at_once(tmp_path: Path) -> None:
    """collect writes ZooKeeper's tables while the brokers are inventoried, the rest after:
    the same files, and no meta.json (not a snapshot yet) in between."""
    state = cluster(brokers=[1, 2, 3], topics={"orders": {0: [1, 2, 3], 1: [2, 3, 1]}})
    report = BrokerReport(1, "kafka1", configured=True, reachable=True, error=None, replicas=(ROW,))
    now = datetime(2026, 11, 25, tzinfo=UTC)
    whole = write_snapshot(tmp_path / "whole", cluster="c", state=state, brokers=[report], now=now)
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "meta.json").write_text("{}")  # a snapshot written here before
    counts = write_state_tables(parts, cluster="c", state=state)
    assert set(counts) == set(STATE_TABLES) and set(STATE_TABLES) | set(BROKER_TABLES) == set(
        TABLES
    )
    with pytest.raises(ScanError, match="not a snapshot"):
        read_meta(parts)
    write_snapshot(parts, cluster="c", state=state, brokers=[report], now=now, state_tables=counts)
    assert sorted(p.name for p in parts.iterdir()) == sorted(p.name for p in whole.iterdir())
    for path in whole.iterdir():
        assert (parts / path.name).read_bytes() == path.read_bytes(), path.name
