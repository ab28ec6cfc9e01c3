"""A topic that lost its id before any replica wrote partition.metadata: the plan has the
controller re-elected so that the new one mints an id every replica takes (in-memory cluster,
tests/execute/fake_cluster.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from remediate.execute import steps
from remediate.formats.logdir import encode_partition_metadata
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import CONTROLLER, decode_topic, topic_path
from remediate.plan import Plan, RestoreStep
from remediate.playbook import Action
from remediate.state import TopicPartition
from tests.execute.fake_cluster import OLD_ID, Topic
from tests.execute.test_executor import World, plan_of, world

MINTED = TopicId(bytes(15) + b"\x07")


@pytest.fixture
def unclaimed(tmp_path: Path) -> tuple[World, Plan]:
    topic = Topic("orders", {0: (1, 2), 1: (2, 3)}, topic_id=None)
    w = world(tmp_path, {"orders": topic})
    w.kafka.boot()

    def elect_and_mint() -> None:
        # A new controller assigns an id to a topic without one, and every replica writes it.
        w.kafka.elect(None)
        if topic.topic_id is None:
            topic.topic_id = MINTED
            w.kafka.write_topic(topic)
            for number, replicas in topic.assignment.items():
                for broker in replicas:
                    w.kafka.metadata(broker, "orders", number).write_bytes(
                        encode_partition_metadata(MINTED)
                    )

    w.zk.on_delete[CONTROLLER] = elect_and_mint
    step = RestoreStep(
        topic="orders",
        topic_id="",
        zk_topic_id=None,
        znode_version=w.zk.nodes[topic_path("orders")].version,
        reelect=True,
        reason="test",
        partitions=(TopicPartition("orders", 0), TopicPartition("orders", 1)),
        actions=tuple(a for a in steps.RESTORE_ACTIONS if a != Action.ZK_WRITE_TOPIC_ID),
        impact=(),
        playbook="restore-zk-topic-id",
        mint=True,
    )
    return w, plan_of([step], playbook="restore-zk-topic-id")


def zk_id(w: World) -> str | None:
    data, _ = w.zk.get(topic_path("orders"))
    found = decode_topic(data, source="test").topic_id
    return None if found is None else str(found)


def test_the_election_mints_an_id_every_replica_takes(unclaimed: tuple[World, Plan]) -> None:
    w, plan = unclaimed
    epoch = w.kafka.epoch
    outcome = w.run(plan)
    assert outcome.status == "completed", outcome.error
    assert zk_id(w) == str(MINTED)
    assert w.kafka.epoch == epoch + 1
    assert w.cluster_writes() == [("delete", CONTROLLER)]


def test_a_replica_that_wrote_its_file_since_the_plan_stops_the_election(
    unclaimed: tuple[World, Plan],
) -> None:
    w, plan = unclaimed
    path = w.kafka.metadata(3, "orders", 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_partition_metadata(OLD_ID))
    outcome = w.run(plan)
    assert outcome.status == "halted"
    assert outcome.error is not None and "orders-1 on broker 3 has a partition.metadata now" in (
        outcome.error
    )
    assert zk_id(w) is None
    assert w.cluster_writes() == []
