"""The replicas table's rows: typed in the code, the same JSON Lines on disk."""

from __future__ import annotations

import json
from pathlib import Path

from remediate.collect.snapshot import BrokerReport, ReplicaRow, read_rows, write_snapshot
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
