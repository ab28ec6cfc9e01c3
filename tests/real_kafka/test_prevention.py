"""The prevention on real Apache Kafka 2.8.2: the legacy client has dropped the topic's id and
no controller has failed over yet. `check` warns, `fix --yes` writes the id every replica
holds back into ZooKeeper, and the failover that would have minted a new id then changes
nothing, even across a rolling restart.

Slow: real brokers (Kafka's defaults), and a rolling restart of the three.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remediate.sandbox import admin, cluster
from remediate.sandbox.reproduce import Incident, partition_states, replica_file_ids
from tests.execute.sandbox_tools import run_cli
from tests.wait import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.real_kafka("2.8.2")]


def test_the_restore_prevents_the_incident_on_real_kafka(tmp_path: Path) -> None:
    directory = tmp_path / "sandbox"
    cluster.up(directory, kafka="real-2.8.2")
    incident = Incident(directory, topic="orders")
    try:
        for step in (
            incident.create_topic,
            incident.produce,
            incident.consume,
            incident.add_partitions_legacy,
            incident.produce_and_consume_all,
        ):
            step()
        zk, config = incident.zk, directory / "cluster.yaml"
        assert admin.read_topic(zk, "orders")[0].topic_id is None
        ids = replica_file_ids(incident.state, "orders")
        # 2.8.2 writes partition.metadata lazily: the new partitions' replicas have none yet.
        assert {ids[(b, p)] for b in (1, 2, 3) for p in (0, 1, 2)} == {incident.result.old_id}
        assert {ids[(b, p)] for b in (1, 2, 3) for p in (3, 4, 5)} == {None}

        checked = run_cli("check", "-c", str(config), "--json")
        assert checked.returncode == 1, checked.stdout[-2000:] + checked.stderr[-2000:]
        kinds = {f["kind"] for f in json.loads(checked.stdout)["findings"]}
        assert "ZK_TOPIC_ID_MISSING" in kinds and "TOPIC_ID_MISMATCH" not in kinds, kinds

        fixed = run_cli("fix", "-c", str(config), "--yes", "--json")
        assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
        assert [s["kind"] for s in json.loads(fixed.stdout)["plan"]["steps"]] == ["restore"]
        assert str(admin.read_topic(zk, "orders")[0].topic_id) == incident.result.old_id

        # The failover that used to mint a new id, then every broker restarted in turn.
        before, after = admin.failover_controller(zk)
        assert after.broker_id >= 0 and after.epoch > before.epoch
        for broker in (1, 2, 3):
            cluster.stop_broker(directory, broker)
            cluster.start_broker(directory, broker, wait=True)
            wait_until(
                lambda: all(
                    sorted(s.isr) == [1, 2, 3]
                    for s in partition_states(zk, "orders", list(range(6))).values()
                ),
                f"every ISR to be full again after restarting broker {broker}",
                timeout=120,
            )
        assert str(admin.read_topic(zk, "orders")[0].topic_id) == incident.result.old_id
        assert set(replica_file_ids(incident.state, "orders").values()) == {incident.result.old_id}
        checked = run_cli("check", "-c", str(config), "--json")
        assert checked.returncode == 0, checked.stdout[-2000:]
        assert incident.kafka.produce("orders", count=60, key_prefix="after", retries=5).acked
    finally:
        incident.close()
        cluster.down(directory)
