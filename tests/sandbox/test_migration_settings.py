"""The settings `sandbox migrate` writes at each stage (remediate/sandbox/migration/), as
Kafka's migration guide gives them, on plain data."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from remediate.errors import SandboxError
from remediate.sandbox import cluster
from remediate.sandbox.migration.run import isr_whole, migrate
from remediate.sandbox.migration.settings import (
    ZK_ONLY_KEYS,
    ControllerNode,
    controller_properties,
    hybrid_broker_properties,
    kraft_broker_properties,
)
from remediate.state import TopicPartition
from tests.plan import model

NODE = ControllerNode(3000, "127.0.0.9", 19093)
BROKER = {
    "broker.id": "2",
    "listeners": "PLAINTEXT://127.0.0.12:9092",
    "log.dirs": "/d/data-0",
    "zookeeper.connect": "127.0.0.1:2181",
    "min.insync.replicas": "2",
}


@pytest.mark.parametrize("migrating", [True, False])
def test_the_controller_in_and_out_of_migration_mode(migrating: bool) -> None:
    values = controller_properties(
        NODE, zookeeper_connect="127.0.0.1:2181", data_dir=Path("/c/data"), migrating=migrating
    )
    assert values["process.roles"] == "controller"
    assert values["node.id"] == "3000"
    assert values["controller.quorum.voters"] == "3000@127.0.0.9:19093"
    assert values["listeners"] == "CONTROLLER://127.0.0.9:19093"
    assert values["controller.listener.names"] == "CONTROLLER"
    assert values["log.dirs"] == "/c/data"
    migration_keys = {"zookeeper.metadata.migration.enable", "zookeeper.connect"}
    assert (migration_keys <= set(values)) is migrating
    assert not (migration_keys & set(values)) or migrating


def test_a_broker_in_migration_mode_keeps_its_settings_and_joins_the_quorum() -> None:
    values = hybrid_broker_properties(BROKER, NODE, "3.9")
    assert {k: values[k] for k in BROKER} == BROKER
    assert values["zookeeper.metadata.migration.enable"] == "true"
    assert values["inter.broker.protocol.version"] == "3.9"
    assert values["controller.quorum.voters"] == NODE.voter
    assert "CONTROLLER:PLAINTEXT" in values["listener.security.protocol.map"]


def test_a_broker_in_kraft_mode_drops_zookeeper_and_takes_its_id_as_node_id() -> None:
    values = kraft_broker_properties(hybrid_broker_properties(BROKER, NODE, "3.9"), NODE)
    assert not set(ZK_ONLY_KEYS) & set(values)
    assert values["process.roles"] == "broker"
    assert values["node.id"] == "2"
    assert values["log.dirs"] == BROKER["log.dirs"]
    assert values["min.insync.replicas"] == "2"


def test_a_broker_without_an_id_is_refused() -> None:
    with pytest.raises(SandboxError, match=r"no broker\.id"):
        kraft_broker_properties({"listeners": "PLAINTEXT://h:1"}, NODE)


@pytest.mark.parametrize(
    ("kafka", "message"),
    [
        ("emulated", "needs real Kafka"),
        ("real-3.4.1", "Apache Kafka 3.4.1 has no migration to KRaft the sandbox runs"),
    ],
)
def test_a_sandbox_that_cannot_migrate_is_refused_before_anything_starts(
    tmp_path: Path, kafka: str, message: str
) -> None:
    cluster.save_state(
        cluster.SandboxState(
            directory=str(tmp_path),
            zookeeper_host="127.0.0.1",
            zookeeper_port=1,
            kafka_version="3.4",
            kafka=kafka,
        )
    )
    with pytest.raises(SandboxError, match=message):
        migrate(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sandbox.json"]


def test_the_isr_is_whole_only_with_every_state_a_leader_and_every_replica_in_sync() -> None:
    state = model.cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}})
    assert isr_whole(state)
    shrunk = model.cluster(
        brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}}, isr={("t", 1): [2, 3]}
    )
    assert not isr_whole(shrunk)
    missing = dict(state.partitions)
    missing.pop(TopicPartition("t", 1))
    assert not isr_whole(replace(state, partitions=missing))
    leaderless = model.cluster(
        brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, leaders={("t", 0): -1}
    )
    assert not isr_whole(leaderless)
