"""The reference's "2.8 post-failover state and the restart repair", one test per rule.

Each test names its rule and cites the Kafka source line (tag 2.8.2 unless noted) that
the reference (kafka-zk.md) took it from. Rules about one broker's replica manager run on the
emulator's ReplicaManager directly; rules that need the controller start a sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from remediate.formats.logdir import PARTITION_METADATA
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import topic_path
from remediate.sandbox import admin, cluster, wire
from remediate.sandbox.replica import Partition, ReplicaManager, load_log_dirs
from remediate.sandbox.reproduce import replica_file_ids
from remediate.sandbox.storage import PartitionLog
from tests.sandbox.helpers import replica_dirs, states, wait_until

TOPIC = "rules"
TP = (TOPIC, 0)


def replica_manager(log_dir: Path, kafka_version: str = "2.8") -> ReplicaManager:
    """Broker 1's replica manager over `log_dir`, as loaded at startup; no threads run."""
    log_dirs, logs = load_log_dirs((log_dir,), kafka_version)
    return ReplicaManager(
        broker_id=1,
        kafka_version=kafka_version,
        log_dirs=log_dirs,
        logs=logs,
        replica_lag_time_max_ms=300,
        fetch_wait_max_ms=0,
        min_isr_for=lambda _topic: 2,
        send_alter_isr=lambda _partitions: None,
    )


def leader_and_isr(
    topic_id: TopicId, *, leader: int = 1, leader_epoch: int, isr: list[int] | None = None
) -> dict[str, Any]:
    return {
        "controller_id": 3,
        "controller_epoch": 1,
        "broker_epoch": -1,
        "topic_ids": {TOPIC: str(topic_id)},
        "live_leaders": {},
        "partitions": [
            {
                "topic": TOPIC,
                "partition": 0,
                "leader": leader,
                "leader_epoch": leader_epoch,
                "isr": isr or [1, 2, 3],
                "replicas": [1, 2, 3],
                "zk_version": leader_epoch,
                "controller_epoch": 1,
            }
        ],
    }


def partition_error(response: dict[str, Any]) -> int:
    assert response["error"] == wire.NONE
    ((_topic, _partition, error),) = response["errors"]
    return int(error)


def fetch(
    replicas: ReplicaManager, replica_id: int, offset: int, current_leader_epoch: int
) -> dict[str, Any]:
    response = replicas.handle_fetch(
        {
            "replica_id": replica_id,
            "max_wait_ms": 0,
            "partitions": [
                {
                    "topic": TOPIC,
                    "partition": 0,
                    "offset": offset,
                    "current_leader_epoch": current_leader_epoch,
                }
            ],
        }
    )
    (result,) = response["partitions"]
    return dict(result)


def produce(replicas: ReplicaManager, acks: int, timeout_ms: int = 300) -> dict[str, Any]:
    return replicas.handle_produce(
        {
            "topic": TOPIC,
            "partition": 0,
            "acks": acks,
            "timeout_ms": timeout_ms,
            "records": [["k", "v"]],
        }
    )


def fenced_leader(tmp_path: Path) -> tuple[ReplicaManager, Partition, int]:
    """Broker 1 leads at epoch 5 with ISR 1,2,3; 3 stopped fetching, the shrink to 1,2 was
    refused with FENCED_LEADER_EPOCH (the controller had moved on). Returns the high watermark
    reached while all three replicated."""
    replicas = replica_manager(tmp_path)
    assert (
        partition_error(
            replicas.handle_leader_and_isr(leader_and_isr(TopicId.random(), leader_epoch=5))
        )
        == wire.NONE
    )
    partition = replicas.partitions[TP]
    for _ in range(3):
        assert produce(replicas, acks=1)["error"] == wire.NONE
    for follower in (2, 3):
        assert fetch(replicas, follower, 3, 5)["error"] == wire.NONE
    assert partition.high_watermark == 3

    def shrunk() -> bool:
        fetch(replicas, 2, 3, 5)  # 2 keeps up, 3 is silent
        replicas.shrink_isr_if_needed()
        return partition.pending_isr is not None

    assert wait_until(shrunk, timeout=10, interval=0.05)
    assert partition.pending_isr == (1, 2)
    replicas._apply_alter_isr(
        {"partitions": [{"topic": TOPIC, "partition": 0, "error": wire.FENCED_LEADER_EPOCH}]}
    )
    return replicas, partition, 3


# -- rules on one broker's replica manager ---------------------------------------------------


@pytest.mark.parametrize("kafka_version", ["2.8", "3.4"])
def test_restart_loophole_first_leader_and_isr_accepted_on_2_8_only(
    tmp_path: Path, kafka_version: str
) -> None:
    """2.8.2 cluster/Partition.scala:445-446 (no Log yet when the check runs); closed in 3.4.1
    cluster/Partition.scala:480-483 (Partition.topicId falls back to the log on disk)."""
    old, new = TopicId.random(), TopicId.random()
    PartitionLog.create(tmp_path / f"{TOPIC}-0", TOPIC, 0).assign_topic_id(old)
    replicas = replica_manager(tmp_path, kafka_version)  # the restart: logs loaded from disk

    first = partition_error(replicas.handle_leader_and_isr(leader_and_isr(new, leader_epoch=7)))
    if kafka_version == "2.8":
        assert first == wire.NONE
        partition = replicas.partitions[TP]
        assert (partition.is_leader, partition.leader_epoch) == (True, 7)
        # The log was loaded with the file's id, which the request did not change.
        assert partition.log is not None and partition.log.topic_id == old
        second = leader_and_isr(new, leader_epoch=8)
        assert partition_error(replicas.handle_leader_and_isr(second)) == wire.INCONSISTENT_TOPIC_ID
        assert partition.leader_epoch == 7
    else:
        assert first == wire.INCONSISTENT_TOPIC_ID
        assert not replicas.partitions[TP].is_leader
    metadata = (tmp_path / f"{TOPIC}-0" / PARTITION_METADATA).read_text()
    assert metadata.endswith(str(old))


def test_fenced_alter_isr_keeps_isr_pending_and_freezes_high_watermark(tmp_path: Path) -> None:
    """KafkaController.scala:2319-2321 (FENCED_LEADER_EPOCH); Partition.scala:1391-1440 (gives
    up, stays pending); Partition.scala:174, 878-905 (high watermark over the maximal ISR)."""
    replicas, partition, high_watermark = fenced_leader(tmp_path)
    assert partition.pending_isr == (1, 2)
    assert not partition.alter_isr_in_flight  # nothing more is sent
    assert partition.isr == (1, 2, 3) and partition.maximal_isr == (1, 2, 3)
    # No further ISR change is attempted: neither another shrink nor an expansion of 3.
    replicas.shrink_isr_if_needed()
    assert fetch(replicas, 3, high_watermark, 5)["error"] == wire.NONE
    assert (partition.pending_isr, partition.alter_isr_in_flight) == ((1, 2), False)
    # New records reach 2 but not 3, which is still counted: the high watermark stays.
    assert produce(replicas, acks=1)["error"] == wire.NONE
    assert fetch(replicas, 2, partition.log.log_end_offset, 5)["error"] == wire.NONE  # type: ignore[union-attr]
    assert partition.high_watermark == high_watermark


def test_frozen_high_watermark_times_out_acks_all_and_acknowledges_acks_1(tmp_path: Path) -> None:
    """Partition.scala:878-905 (high watermark over the maximal ISR); acks=all waits for it
    (REQUEST_TIMED_OUT), acks=1 does not; an epoch-aware consumer at the controller's newer
    epoch gets UNKNOWN_LEADER_EPOCH (Partition.scala:359-390)."""
    replicas, partition, high_watermark = fenced_leader(tmp_path)
    assert produce(replicas, acks=-1, timeout_ms=300)["error"] == wire.REQUEST_TIMED_OUT
    acked = produce(replicas, acks=1)
    assert acked["error"] == wire.NONE and acked["base_offset"] >= partition.high_watermark
    assert partition.high_watermark == high_watermark
    # A consumer reads up to the high watermark only ...
    read = fetch(replicas, -1, 0, -1)
    assert read["error"] == wire.NONE
    assert [offset for offset, *_ in read["records"]] == list(range(high_watermark))
    # ... and one that learnt the controller's newer epoch from metadata is refused.
    assert fetch(replicas, -1, 0, 6)["error"] == wire.UNKNOWN_LEADER_EPOCH


def test_follower_at_newer_epoch_than_its_leader_gets_unknown_leader_epoch(
    tmp_path: Path,
) -> None:
    """Partition.scala:359-390: a Fetch whose currentLeaderEpoch is newer than the leader's is
    answered UNKNOWN_LEADER_EPOCH and moves nothing; the follower retries the same fetch."""
    replicas = replica_manager(tmp_path)
    request = leader_and_isr(TopicId.random(), leader_epoch=5)
    assert partition_error(replicas.handle_leader_and_isr(request)) == wire.NONE
    partition = replicas.partitions[TP]
    assert produce(replicas, acks=1)["error"] == wire.NONE
    for _ in range(3):  # every retry the same
        result = fetch(replicas, 2, 0, 6)
        assert result["error"] == wire.UNKNOWN_LEADER_EPOCH
        assert result["records"] == []
    assert partition.followers[2].log_end_offset == -1
    assert partition.high_watermark == 0
