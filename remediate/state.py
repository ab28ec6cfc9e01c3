"""ClusterState: one immutable read of a cluster's ZooKeeper state, holding no client handles.

Built once per read by the ZooKeeper collector; the scan, the planner and the gates decide on
it without doing I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from remediate.formats.znodes import BrokerRegistration, PartitionState, TopicAssignment

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class TopicState:
    """A topic's znode. `mzxid` is the transaction that last wrote it (when a controller
    minted its id, or an admin client rewrote it); None when not known."""

    name: str
    assignment: TopicAssignment
    znode_version: int
    config: Mapping[str, str] = field(default_factory=dict)
    mzxid: int | None = None

    @property
    def topic_id(self) -> str | None:
        return str(self.assignment.topic_id) if self.assignment.topic_id is not None else None


@dataclass(frozen=True)
class ClusterState:
    cluster_id: str | None
    controller_id: int | None
    controller_epoch: int | None
    brokers: Mapping[int, BrokerRegistration]
    topics: Mapping[str, TopicState]
    partitions: Mapping[TopicPartition, PartitionState]
    problems: tuple[str, ...] = ()

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        return tuple(self.topics[topic].assignment.partitions.get(partition, ()))

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return sorted(
            (name, number)
            for name, topic in self.topics.items()
            for number, replicas in topic.assignment.partitions.items()
            if broker_id in replicas
        )

    def min_insync_replicas(self, topic: str, default: int) -> int:
        """The topic's effective min.insync.replicas, `default` when it cannot be resolved."""
        value = (
            self.topics[topic].config.get("min.insync.replicas") if topic in self.topics else None
        )
        if value is not None and value.strip().isdigit():
            return int(value.strip())
        return default
