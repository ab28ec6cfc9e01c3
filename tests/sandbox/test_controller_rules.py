"""The controller's rules, one at a time, read back from ZooKeeper: AlterIsr is a CAS on the
state znode's version; controlled shutdown moves leadership to the first live in-sync replica in
assignment order and takes the broker out of every ISR (leader_epoch + 1) but never removes the
last ISR member; a partition whose only replica is down has no leader, and producers say so;
below inter.broker.protocol.version 2.8 no topic id is ever assigned."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from remediate.formats.znodes import (
    PartitionState,
    broker_path,
    decode_broker,
    partition_state_path,
    topic_path,
)
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated import client, wire
from remediate.sandbox.reproduce import replica_file_ids
from tests.sandbox.helpers import states
from tests.wait import wait_until

pytestmark = pytest.mark.slow


def settled(
    zk: KazooClient, topic: str, partitions: list[int], condition: Callable[[PartitionState], bool]
) -> bool:
    """Every partition's state znode exists and meets `condition`."""
    try:
        return all(condition(s) for s in states(zk, topic, partitions).values())
    except NoNodeError:
        return False


def controller_endpoint(zk: KazooClient) -> tuple[str, int]:
    controller = admin.current_controller(zk)
    assert controller is not None
    data, _ = zk.get(broker_path(controller.broker_id))
    endpoint = decode_broker(controller.broker_id, data, source="test").endpoint()
    assert endpoint is not None
    return endpoint.host, endpoint.port


def test_alter_isr_is_a_cas_on_the_state_znode_version(sandbox: cluster.SandboxState) -> None:
    zk = cluster.zk_client(sandbox)
    try:
        admin.create_topic(zk, "cas", 1, 3)
        assert wait_until(lambda: settled(zk, "cas", [0], lambda s: len(s.isr) == 3))
        path = partition_state_path("cas", 0)
        data, stat = zk.get(path)
        current = states(zk, "cas", [0])[0]
        leader = current.leader
        _, leader_stat = zk.get(broker_path(leader))
        shrunk = [*[b for b in current.isr if b != leader][:1], leader]

        def alter_isr(zk_version: int) -> dict[str, object]:
            request = {
                "api": "AlterIsr",
                "broker_id": leader,
                "broker_epoch": leader_stat.czxid,
                "partitions": [
                    {
                        "topic": "cas",
                        "partition": 0,
                        "leader_epoch": current.leader_epoch,
                        "new_isr": shrunk,
                        "zk_version": zk_version,
                    }
                ],
            }
            response = wire.call_once(*controller_endpoint(zk), request)
            assert response["error"] == wire.NONE
            (result,) = response["partitions"]
            return dict(result)

        # A leader that read the state before someone else wrote it is refused, nothing written.
        stale = alter_isr(stat.version - 1)
        assert stale["error"] == wire.INVALID_UPDATE_VERSION
        assert zk.get(path) == (data, stat)
        # With the version it read, the write goes through and the version moves on.
        accepted = alter_isr(stat.version)
        assert accepted["error"] == wire.NONE
        _, after_stat = zk.get(path)
        assert after_stat.version == stat.version + 1
        written = states(zk, "cas", [0])[0]
        assert sorted(written.isr) == sorted(shrunk)
        # An ISR change is not a leader change.
        assert (written.leader, written.leader_epoch) == (leader, current.leader_epoch)
        # The same request again is stale now.
        assert alter_isr(stat.version)["error"] == wire.INVALID_UPDATE_VERSION
    finally:
        zk.stop()
        zk.close()


def test_controlled_shutdown_and_a_partition_without_a_live_replica(
    sandbox: cluster.SandboxState,
) -> None:
    directory = Path(sandbox.directory)
    zk = cluster.zk_client(sandbox)
    try:
        controller = admin.current_controller(zk)
        assert controller is not None
        # A broker that is not the controller, so only its own shutdown is at work.
        broker = next(b.broker_id for b in sandbox.brokers if b.broker_id != controller.broker_id)
        replicated = admin.create_topic(zk, "moved", 3, 3).partitions
        solo = admin.create_topic(zk, "solo", 3, 1, config={"min.insync.replicas": "1"}).partitions
        (alone,) = [p for p, replicas in solo.items() if replicas == (broker,)]
        assert wait_until(
            lambda: (
                settled(zk, "moved", [0, 1, 2], lambda s: len(s.isr) == 3)
                and settled(zk, "solo", [0, 1, 2], lambda s: s.leader >= 0)
            )
        )
        before = states(zk, "moved", [0, 1, 2])
        assert any(s.leader == broker for s in before.values())

        cluster.stop_broker(directory, broker)  # SIGTERM: controlled shutdown
        # Its znode is gone once its session closes; the controller then takes the partition
        # whose only replica it was offline.
        assert wait_until(lambda: states(zk, "solo", [alone])[alone].leader == -1)

        after = states(zk, "moved", [0, 1, 2])
        for partition, state in after.items():
            old = before[partition]
            assert broker not in state.isr
            assert state.leader_epoch == old.leader_epoch + 1
            if old.leader == broker:
                # The first live in-sync replica in assignment order takes over.
                expected = next(b for b in replicated[partition] if b != broker and b in old.isr)
                assert state.leader == expected
            else:
                assert state.leader == old.leader
        # The last ISR member is never removed: the partition keeps it and has no leader.
        offline = states(zk, "solo", [alone])[alone]
        assert (offline.leader, offline.isr) == (-1, (broker,))
        producer = client.Producer(zk, timeout_ms=1000)
        try:
            assert producer.send("solo", alone, [("k", "v")]) == (None, client.NO_LEADER)
        finally:
            producer.close()

        cluster.start_broker(directory, broker, wait=True)
        # Back: it leads its partition again (leader_epoch + 1) and producers succeed.
        assert wait_until(lambda: states(zk, "solo", [alone])[alone].leader == broker)
        assert states(zk, "solo", [alone])[alone].leader_epoch == offline.leader_epoch + 1
        report = client.produce(zk, "solo", count=6, key_prefix="back", retries=10)
        assert len(report.acked) == 6
    finally:
        zk.stop()
        zk.close()


def test_below_ibp_2_8_the_controller_mints_no_topic_id(sandbox_dir: Path) -> None:
    state = cluster.up(sandbox_dir, properties={"inter.broker.protocol.version": "2.7"})
    zk = cluster.zk_client(state)
    try:
        admin.create_topic(zk, "plain", 2, 3, legacy=True)
        assert wait_until(lambda: settled(zk, "plain", [0, 1], lambda s: len(s.isr) == 3))
        # A failover is where a 2.8 controller would assign the missing id.
        admin.failover_controller(zk)
        assert wait_until(lambda: settled(zk, "plain", [0, 1], lambda s: len(s.isr) == 3))
        data, _ = zk.get(topic_path("plain"))
        assert "topic_id" not in json.loads(data)
        assert len(client.produce(zk, "plain", count=10, retries=10).acked) == 10
        ids = replica_file_ids(state, "plain")
        assert len(ids) == 6 and set(ids.values()) == {None}
    finally:
        zk.stop()
        zk.close()
