"""ClusterState: one immutable read of a cluster's ZooKeeper state, holding no client handles,
and the names of its parts: `TopicPartition` and `ReplicaRef`.

Built once per read by the ZooKeeper collector; the scan, the planner and the gates decide on
it without doing I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from remediate.formats.znodes import (
    BrokerRegistration,
    MigrationState,
    PartitionState,
    TopicAssignment,
)
from remediate.minisr import MinIsrRule


class TopicPartition(NamedTuple):
    """One partition of one topic, Kafka's `TopicPartition`.

    A tuple, so it sorts as (topic, partition) and equals the plain `(topic, partition)`
    pairs the collectors key their reads by. Its text, "topic-N", is made by `str()` and read
    back by `parse` only, at the JSON boundary.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """ "orders-3" -> TopicPartition("orders", 3). A topic name may hold '-' and digits
        itself: as in Kafka, the partition is the number after the last '-'."""
        topic, sep, number = text.rpartition("-")
        if not sep or not topic or not (number.isascii() and number.isdigit()):
            raise ValueError(f"{text!r} is not a partition name (topic-N)")
        return cls(topic, int(number))


@dataclass(frozen=True, order=True)
class ReplicaRef:
    """One replica: a partition on a broker. Its text is "topic-N on broker B"."""

    broker: int
    partition: TopicPartition

    SEPARATOR = " on broker "

    def __str__(self) -> str:
        return f"{self.partition}{self.SEPARATOR}{self.broker}"

    @classmethod
    def parse(cls, text: str) -> ReplicaRef:
        partition, sep, broker = text.rpartition(cls.SEPARATOR)
        if not sep or not (broker.isascii() and broker.isdigit()):
            raise ValueError(f"{text!r} is not a replica (topic-N on broker B)")
        return cls(int(broker), TopicPartition.parse(partition))


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
    # `/migration`, when a ZooKeeper-to-KRaft migration has begun (or is done).
    migration: MigrationState | None = None
    # `/controller`'s kraftControllerEpoch: set (0 or more) when a KRaft controller of a
    # migration is the active controller, not a broker.
    kraft_controller_epoch: int | None = None

    def __post_init__(self) -> None:
        # Readers key partitions by plain (topic, partition) pairs; here they are named.
        if not all(type(tp) is TopicPartition for tp in self.partitions):
            named = {TopicPartition(*tp): p for tp, p in self.partitions.items()}
            object.__setattr__(self, "partitions", named)

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        return tuple(self.topics[topic].assignment.partitions.get(partition, ()))

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return list(self._partitions_by_broker.get(broker_id, ()))

    @cached_property
    def _partitions_by_broker(self) -> Mapping[int, tuple[TopicPartition, ...]]:
        """Per broker, the partitions assigned a replica on it, in order: indexed once, since
        a plan asks per broker of a cluster of many thousand partitions."""
        found: dict[int, list[TopicPartition]] = {}
        for name, topic in self.topics.items():
            for number, replicas in topic.assignment.partitions.items():
                for broker in set(replicas):
                    found.setdefault(broker, []).append(TopicPartition(name, number))
        return {broker: tuple(sorted(tps)) for broker, tps in found.items()}

    def min_insync_replicas(self, tp: TopicPartition, rule: MinIsrRule) -> int:
        """The partition's effective min.insync.replicas: its topic's override, else the
        strictest of its replicas' own settings (`rule`, remediate/minisr.py)."""
        topic = self.topics.get(tp.topic)
        if topic is None:
            return rule.strictest
        return rule.of(topic.config, self.replicas(*tp))


@dataclass(frozen=True)
class BrokerDisks:
    """One broker's log dirs as its Kafka reports them, and their free space (collected for
    the repairs that move replicas between log dirs: plan/moves.py)."""

    broker: int
    kafka_version: tuple[int, int] | None
    online_dirs: tuple[str, ...]
    offline_dirs: tuple[str, ...] = ()
    free_bytes: Mapping[str, int] = field(default_factory=dict)
    # Each replica on the broker: its log dir and its size in bytes.
    replicas: Mapping[TopicPartition, tuple[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class MoveFacts:
    """What the planner knows of the brokers' disks; `problem` says why it knows nothing
    (no Kafka admin access configured, a broker that did not answer)."""

    brokers: Mapping[int, BrokerDisks] = field(default_factory=dict)
    problem: str | None = None
