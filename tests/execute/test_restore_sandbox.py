"""The restore-zk-topic-id playbook on the sandbox: prevent the incident before a failover."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remediate.formats.logdir import PARTITION_METADATA, encode_partition_metadata
from remediate.formats.topic_id import TopicId
from remediate.sandbox import admin, cluster
from remediate.sandbox.reproduce import Incident, partition_states, replica_file_ids, wait_for
from tests.execute.sandbox_tools import run_cli
from tests.plan.test_plan_sandbox import disk, zookeeper_tree

pytestmark = pytest.mark.slow

TOPIC = "orders"


def partition_files(state: cluster.SandboxState) -> dict[str, str]:
    """The topic's files (the brokers rewrite their root checkpoints on their own)."""
    return {path: digest for path, digest in disk(state).items() if f"/{TOPIC}-" in path}


def legacy_add(directory: Path) -> Incident:
    """Steps 1 to 4 of the incident: the id is gone from ZooKeeper, no failover yet."""
    incident = Incident(directory, topic=TOPIC)
    for step in (
        incident.create_topic,
        incident.produce,
        incident.consume,
        incident.add_partitions_legacy,
    ):
        step()
    assert admin.read_topic(incident.zk, TOPIC)[0].topic_id is None
    return incident


def test_fix_restores_a_lost_id_without_a_restart_and_the_failover_is_harmless(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "sandbox"
    cluster.up(directory)  # Kafka 2.8: the added partitions have no partition.metadata yet
    try:
        incident = legacy_add(directory)
        config = str(directory / "cluster.yaml")
        check = run_cli("check", "-c", config, "--json")
        assert check.returncode == 1
        (lost,) = [
            f for f in json.loads(check.stdout)["findings"] if f["kind"] == "ZK_TOPIC_ID_MISSING"
        ]
        assert lost["file_topic_id"] == incident.result.old_id
        assert "it can be restored" in lost["detail"]
        pids = {
            b.broker_id: cluster.broker_pid(directory, b.broker_id) for b in incident.state.brokers
        }

        # Without --yes, fix is a dry run: the plan, and nothing changed.
        zk_before = zookeeper_tree(incident.zk)
        dry = run_cli("fix", "-c", config, "--json")
        assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-1000:]
        assert json.loads(dry.stdout)["applied"] is False
        assert zookeeper_tree(incident.zk) == zk_before

        fixed = run_cli("fix", "-c", config, "--yes", "--json")
        assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-1000:]
        document = json.loads(fixed.stdout)
        (step,) = document["plan"]["steps"]
        assert (step["kind"], step["topic"], step["topic_id"], step["reelect"]) == (
            "restore",
            TOPIC,
            incident.result.old_id,
            False,
        )
        assert document["run"]["status"] == "completed"
        assert {
            b.broker_id: cluster.broker_pid(directory, b.broker_id) for b in incident.state.brokers
        } == pids, "a broker was restarted"
        assignment, _ = admin.read_topic(incident.zk, TOPIC)
        assert str(assignment.topic_id) == incident.result.old_id
        assert assignment.version == 3

        # What used to start the incident: a failover, then every broker restarted.
        admin.failover_controller(incident.zk)
        for broker in incident.state.brokers:
            cluster.stop_broker(directory, broker.broker_id)
            cluster.start_broker(directory, broker.broker_id, wait=True)
            wait_for(
                lambda b=broker.broker_id: all(
                    b in s.isr
                    for s in partition_states(incident.zk, TOPIC, list(range(6))).values()
                ),
                f"broker {broker.broker_id} back in every ISR",
                timeout=90,
            )
        assert set(replica_file_ids(incident.state, TOPIC).values()) == {incident.result.old_id}
        assert run_cli("check", "-c", config).returncode == 0
        incident.close()
    finally:
        cluster.down(directory)


def test_a_disagreement_among_the_replicas_is_refused_with_the_reason(tmp_path: Path) -> None:
    directory = tmp_path / "sandbox"
    cluster.up(directory, kafka_version="3.4")
    try:
        incident = legacy_add(directory)
        broker = incident.state.brokers[1]
        planted = TopicId.random()
        (path,) = [
            p
            for log_dir in broker.log_dirs
            for p in Path(log_dir).glob(f"{TOPIC}-0/{PARTITION_METADATA}")
        ]
        path.write_bytes(encode_partition_metadata(planted))
        zk_before, disk_before = zookeeper_tree(incident.zk), partition_files(incident.state)
        fixed = run_cli("fix", "-c", str(directory / "cluster.yaml"), "--yes", "--json")
        assert fixed.returncode == 4, fixed.stdout[-3000:] + fixed.stderr[-1000:]
        document = json.loads(fixed.stdout)
        assert document["applied"] is False
        reasons = " ".join(document["plan"]["refusals"])
        assert "ZooKeeper lost its topic id and it cannot be restored automatically" in reasons
        assert "replicas disagree" in reasons and str(planted) in reasons
        assert zookeeper_tree(incident.zk) == zk_before
        assert partition_files(incident.state) == disk_before
        incident.close()
    finally:
        cluster.down(directory)
