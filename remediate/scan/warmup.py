"""A tiny snapshot that runs every rule, for Spark to classify before the real one.

A scan's Spark session is cold: its first classification loads thousands of classes and
compiles the query's code, seconds of work that do not depend on the data. `warm_up` spends
them on this sample while the cluster is still being read, so that the real classification
runs warm. The same sample is the training run that lists the classes for the JVM's
class-data archive (remediate/scan/archive.py).

Every table has rows, and every rule finds something: a replica of each finding kind, an
orphan and a stray directory, a second copy of a partition, a topic without an id, an
offline partition, a fenced leader with its logged rejection, an unreachable broker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from remediate.collect.snapshot import FORMAT, META, TABLES

CLUSTER = "warm-up"
X = "AAAAAAAAAAAAAAAAAAAAAQ"  # the id the replicas were written with
Y = "AAAAAAAAAAAAAAAAAAAAAg"  # the id ZooKeeper holds


def _broker(broker: int, *, reachable: bool = True) -> dict[str, Any]:
    return {
        "broker": broker,
        "host": f"kafka{broker}",
        "configured": True,
        "registered": True,
        "broker_epoch": 200 + broker,
        "rack": None,
        "is_controller": broker == 1,
        "reachable": reachable,
        "error": None if reachable else "ssh: connection refused",
        "state_change_log": "read" if reachable else None,
    }


def _replica(
    broker: int,
    topic: str | None,
    partition: int | None,
    *,
    state: str = "ok",
    file_id: str | None = X,
    log_dir: str = "/data/0",
    name: str | None = None,
    kind: str = "live",
    epoch: int | None = 3,
) -> dict[str, Any]:
    dir_name = name if name is not None else f"{topic}-{partition}"
    return {
        "broker": broker,
        "log_dir": log_dir,
        "dir": dir_name,
        "dir_hex": dir_name.encode().hex(),
        "topic": topic,
        "partition": partition,
        "dir_kind": kind,
        "name_problem": "not a partition directory" if kind == "other" else None,
        "metadata_state": state,
        "file_topic_id": file_id if state == "ok" else None,
        "metadata_problem": "version: expected 0" if state == "corrupt" else None,
        "epoch_latest": epoch,
    }


def sample_tables() -> dict[str, list[dict[str, Any]]]:
    """The sample's rows, table by table (every row without its cluster)."""
    assignment = {"t": {0: [1, 2], 1: [2, 1], 2: [1, 2]}, "u": {0: [1, 2]}}
    return {
        "brokers": [_broker(1), _broker(2), _broker(3, reachable=False)],
        "topics": [
            {
                "topic": "t",
                "zk_topic_id": Y,
                "znode_version": 4,
                "data_version": 3,
                "partition_count": 3,
                "min_isr": 2,
                "topic_mzxid": 100,
            },
            {
                "topic": "u",
                "zk_topic_id": None,
                "znode_version": 1,
                "data_version": 1,
                "partition_count": 1,
                "min_isr": None,
                "topic_mzxid": 90,
            },
        ],
        "assignments": [
            {"topic": t, "partition": p, "broker": b, "position": n, "topic_mzxid": 100}
            for t, partitions in assignment.items()
            for p, replicas in partitions.items()
            for n, b in enumerate(replicas)
        ],
        "states": [
            {
                "topic": "t",
                "partition": 0,
                "leader": 1,
                "leader_epoch": 5,
                "isr": [1],
                "zk_version": 3,
                "controller_epoch": 2,
                "mzxid": 120,
            },
            {
                "topic": "t",
                "partition": 1,
                "leader": -1,
                "leader_epoch": 4,
                "isr": [2],
                "zk_version": 2,
                "controller_epoch": 2,
                "mzxid": 110,
            },
            {
                "topic": "t",
                "partition": 2,
                "leader": 2,
                "leader_epoch": 1,
                "isr": [1, 2],
                "zk_version": 1,
                "controller_epoch": 2,
                "mzxid": 80,
            },
            {
                "topic": "u",
                "partition": 0,
                "leader": 1,
                "leader_epoch": 0,
                "isr": [1, 2],
                "zk_version": 0,
                "controller_epoch": 1,
                "mzxid": 70,
            },
        ],
        "topic_configs": [{"topic": "t", "key": "min.insync.replicas", "value": "2"}],
        "log_dirs": [
            {"broker": 1, "log_dir": "/data/0", "state": "present"},
            {"broker": 2, "log_dir": "/data/0", "state": "present"},
            {"broker": 2, "log_dir": "/data/1", "state": "missing"},
        ],
        "replicas": [
            _replica(1, "t", 0),  # fenced leader: holds X, ZooKeeper's epoch 5 above its 3
            _replica(2, "t", 0, state="missing", file_id=None),
            _replica(2, "t", 1),  # mismatch, in the ISR
            _replica(1, "t", 1, epoch=None),  # mismatch, out of the ISR
            _replica(1, "t", 2, file_id=Y),
            _replica(1, "t", 2, file_id=Y, log_dir="/data/1"),  # a second copy
            _replica(1, "u", 0),
            _replica(2, "u", 0, state="corrupt"),
            _replica(1, "gone", 0),  # a topic ZooKeeper does not have
            _replica(2, None, None, name="lost+found", kind="other"),
            _replica(1, "t", 7, name="t-7.0123456789abcdef0123456789abcdef-stray", kind="stray"),
        ],
        "rejections": [
            {
                "broker": 1,
                "topic": "t",
                "partition": 0,
                "memory_topic_id": X,
                "request_topic_id": Y,
                "logged_at": "2026-11-24 01:02:03,456",
                "wording": "2.8",
            }
        ],
    }


def write_sample(directory: Path) -> Path:
    """Write the sample snapshot into `directory` (created), meta.json last."""
    directory.mkdir(parents=True, exist_ok=True)
    tables = sample_tables()
    for name in TABLES:
        rows = tables.get(name, [])
        with open(directory / f"{name}.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps({"cluster": CLUSTER, **row}) + "\n" for row in rows)
    meta = {"format": FORMAT, "cluster": CLUSTER, "controller": 1, "problems": []}
    (directory / META).write_text(json.dumps(meta) + "\n")
    return directory
